"""vLLM's KV-cache lines, one real excerpt per supported format (see fixtures/README.md)."""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import httpx
import pytest

from felab_core.sizing import SizingError, capacity, vllm_live, vllm_log
from felab_core.sizing.errors import BadAnswer
from felab_core.sizing.units import GiB

FIXTURES = Path(__file__).parent / "fixtures"


def read(name: str) -> vllm_log.VllmReading:
    return vllm_log.parse_log_file(FIXTURES / name)


def test_current_one_line_format_from_the_cpu_build_here() -> None:
    r = read("vllm_0.32.0_cpu_startup.log")
    assert r.format == "v1-one-line"
    assert (r.device, r.tokens, r.max_len, r.printed_concurrency) == ("CPU", 2_097_152, 2048, 1024)
    assert r.version == "0.32.0"
    assert r.kv_cache_dtype == "float32"  # 'auto' resolved to the model's dtype
    cap = r.capacity()
    assert (cap.tokens, cap.whole_requests) == (2_097_152, 1024)
    assert r.consistency_notes() == ()


def test_the_fp8_run_matches_the_what_if() -> None:
    """The same 1 GiB cache in fp8 and at half the length, measured, equals felab's what-if."""
    f32 = read("vllm_0.32.0_cpu_startup.log").capacity()
    measured = read("vllm_0.32.0_cpu_fp8_startup.log")
    assert measured.kv_cache_dtype == "fp8"
    predicted = capacity.what_if(f32, kv_from="f32", kv_to="fp8", max_len=1024).after
    assert predicted.tokens == measured.tokens == 8_388_608
    assert predicted.concurrency == measured.printed_concurrency == 8192


def test_v1_tokens_format_with_thousands_commas() -> None:
    r = read("vllm_v1_tokens_pr13596.log")
    assert r.format == "v1-tokens"
    assert (r.tokens, r.max_len, r.printed_concurrency) == (2_042_016, 2048, Fraction("997.08"))
    assert r.capacity().whole_requests == 997


def test_early_v1_blocks_format_infers_the_block_size() -> None:
    r = read("vllm_v1_blocks_pr12569.log")
    assert r.format == "v1-blocks"
    assert (r.gpu_blocks, r.block_size, r.block_size_from) == (1381, 16, "inferred")
    assert r.weights_bytes is not None
    cap = r.capacity()
    assert (cap.tokens, cap.whole_requests) == (22_096, 10)
    assert "worked out from its concurrency line" in r.explanation


def test_v0_blocks_format_with_cpu_swap_blocks() -> None:
    r = read("vllm_v0_blocks_executor_base.log")
    assert r.format == "v0-blocks"
    assert (r.device, r.gpu_blocks, r.cpu_blocks, r.block_size) == ("GPU", 14_815, 1966, 16)
    assert r.kv_memory_bytes == Fraction("45.21") * GiB
    cap = r.capacity()
    assert (cap.tokens, cap.max_len, cap.whole_requests) == (237_040, 512, 462)


def test_course_page_summary_reads_like_a_log() -> None:
    r = read("course_page_whiteboard.txt")
    assert r.format == "summary"
    assert (r.gpu_blocks, r.block_size, r.max_len) == (8234, 16, 8192)
    cap = r.capacity()
    assert (cap.tokens, cap.whole_requests) == (131_744, 16)


def test_a_printed_figure_that_disagrees_is_pointed_out() -> None:
    text = (
        "INFO kv_cache_utils.py:1] # GPU blocks: 1000\n"
        "INFO kv_cache_utils.py:2] Maximum concurrency for 1000 tokens per request: 9.99x\n"
    )
    r = vllm_log.parse_log(text)
    assert r.block_size is None  # no power of two reproduces 9.99
    r16 = replace(r, block_size=16, block_size_from="given")
    assert (
        r16.consistency_notes()
        and "its own figure is the one to trust" in r16.consistency_notes()[0]
    )


def test_blocks_without_size_or_length_ask_for_them() -> None:
    r = vllm_log.parse_log("INFO llm_engine.py:196] # GPU blocks: 865, # CPU blocks: 327\n")
    assert r.format == "v0-blocks"
    with pytest.raises(SizingError, match="pass --max-len"):
        r.capacity()
    with pytest.raises(SizingError, match="pass --block-size"):
        r.capacity(max_len=2048)
    assert r.capacity(block_size=16, max_len=2048).tokens == 865 * 16


def test_repeated_lines_use_the_last_and_say_so() -> None:
    text = "\n".join(
        f"(Worker_TP{i}) INFO x] GPU KV cache size: {n:,} tokens, Maximum concurrency for 4,096 "
        f"tokens per request: {n / 4096:.2f}x"
        for i, n in enumerate([100_000, 120_000])
    )
    r = vllm_log.parse_log(text)
    assert r.tokens == 120_000 and r.occurrences == 2
    assert "appear 2 times" in r.explanation


def test_log_with_no_kv_lines_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "llama.log"
    log.write_text("main: server is listening on http://127.0.0.1:8080\n")
    with pytest.raises(SizingError, match=r"no KV-cache lines in .*llama.log"):
        vllm_log.parse_log_file(log)
    with pytest.raises(SizingError, match=r"missing\.log does not exist"):
        vllm_log.parse_log_file(tmp_path / "missing.log")


def test_metrics_cache_config_info() -> None:
    text = (FIXTURES / "vllm_0.32.0_cpu_metrics_after.txt").read_text()
    r = vllm_live.reading_from_metrics(text)
    assert (r.gpu_blocks, r.block_size, r.tokens, r.max_len) == (16_384, 128, 2_097_152, 2048)
    assert r.kv_memory_bytes == GiB
    cap = r.capacity()
    assert (cap.blocks_per_request, cap.whole_requests) == (16, 1024)


def test_live_vllm_reads_metrics_and_max_len() -> None:
    metrics = (FIXTURES / "vllm_0.32.0_cpu_metrics_before.txt").read_text()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(200, text=metrics)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "tiny", "max_model_len": 2048}]})
        return httpx.Response(404)

    r = vllm_live.read_live_vllm(
        "http://vllm", client=httpx.Client(transport=httpx.MockTransport(handler))
    )
    assert r.format == "metrics" and r.max_len == 2048 and r.capacity().whole_requests == 1024


@pytest.mark.parametrize("models", [{"data": 5}, {"data": "x"}, [1, 2], {"data": [5]}])
def test_a_model_list_that_is_not_one_leaves_the_length_unknown(models: object) -> None:
    metrics = (FIXTURES / "vllm_0.32.0_cpu_metrics_before.txt").read_text()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(200, text=metrics)
        return httpx.Response(200, json=models)

    r = vllm_live.read_live_vllm(
        "http://vllm", client=httpx.Client(transport=httpx.MockTransport(handler))
    )
    assert r.max_len == 2048  # /metrics still says it; the odd list is passed over


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        ('kv_cache_size_tokens="16000",kv_cache_max_concurrency="-2"', "-2"),
        ('kv_cache_size_tokens="16000",kv_cache_max_concurrency="nan"', "nan"),
        ('kv_cache_size_tokens="16000",kv_cache_max_concurrency="1e-300"', "1e-300"),
        ('kv_cache_size_tokens="16000",kv_cache_max_concurrency="1000000"', "no model length"),
        ('block_size="16",num_gpu_blocks="0"', "num_gpu_blocks = 0"),
        ('block_size="1.9",num_gpu_blocks="1000"', "block_size = 1.9"),
        ('block_size="16",num_gpu_blocks="10.5"', "num_gpu_blocks = 10.5"),
        # eighth sweep: these read as missing figures (exit 2, "found neither ...")
        ('block_size="16",num_gpu_blocks="-5"', "num_gpu_blocks = '-5'"),
        ('block_size="16",num_gpu_blocks="NaN"', "num_gpu_blocks = 'NaN'"),
        ('block_size="16",num_gpu_blocks="1e400"', "num_gpu_blocks = '1e400'"),
        # seventeenth sweep (c) M5, M8: blamed on --tokens, and on "a file given"
        ('block_size="8192",num_gpu_blocks="100"', "block_size = 8192: no vLLM has that"),
        ('block_size="' + "6" * 5000 + '"', "block_size = '666666"),
    ],
)
def test_cache_figures_no_vllm_reports_are_the_servers_fault(labels: str, says: str) -> None:
    """Seventh sweep: these read as the user's bad --max-len (exit 2) or were cut down."""
    text = f"# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{{labels}}} 1.0\n"
    with pytest.raises(BadAnswer, match=re.escape(says)):
        vllm_live.reading_from_metrics(text)


def test_llama_metrics_are_not_vllm() -> None:
    text = "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 5\n"
    with pytest.raises(SizingError, match="not vLLM's"):
        vllm_live.reading_from_metrics(text)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("INFO # GPU blocks: 100000000000000000000000000000", "the log says 1000000"),
        ("INFO # GPU blocks: 1e309", "the log says 1e309 where vLLM writes a count"),
        ("INFO # GPU blocks: 10.5, # CPU blocks: 2048", "the log says 10.5"),
        ("INFO GPU KV cache size: 1e12 tokens", "the log says 1e12"),
    ],
)
def test_a_count_no_vllm_logs_is_refused_not_misread(line: str, says: str) -> None:
    """Ninth sweep: 10^29 blocks were believed, and 1e309 read as its first digit, 1."""
    with pytest.raises(SizingError, match=re.escape(says)):
        vllm_log.parse_log(line + "\n")


def test_binary_metrics_are_named_not_echoed() -> None:
    """Ninth sweep: NUL bytes and U+FFFD reached the terminal inside the parser's words."""
    from felab_core.sizing.metrics_scrape import parse_metrics

    with pytest.raises(BadAnswer, match="binary bytes, not Prometheus text"):
        parse_metrics("\x00\ufffd" * 1000)


def test_two_caches_that_disagree_are_not_read_as_one() -> None:
    """Ninth sweep: the last of two cache_config_info lines was used without a word."""
    line = 'vllm:cache_config_info{{engine="0",block_size="{}",num_gpu_blocks="{}"}} 1.0\n'
    text = "# TYPE vllm:cache_config_info gauge\n" + line.format(16, 8234) + line.format(32, 100)
    with pytest.raises(BadAnswer, match="two different vllm:cache_config_info lines"):
        vllm_live.reading_from_metrics(text)
    same = "# TYPE vllm:cache_config_info gauge\n" + line.format(16, 8234) * 2
    assert vllm_live.reading_from_metrics(same, max_len=4096).gpu_blocks == 8234


ONE_LINE = (
    "INFO CPU KV cache size: 2,097,152 tokens, Maximum concurrency for {len} tokens per "
    "request: {x}x"
)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (ONE_LINE.format(len="0", x="1.00"), "a max model length of 0 tokens"),
        (ONE_LINE.format(len="2,048", x="."), "the concurrency line says '.'x"),
        (ONE_LINE.format(len="2,048", x="1e5"), "the concurrency line says '1e5'x"),
        (
            "INFO max_seq_len="
            + "9" * 30
            + ", kv_cache_dtype=auto\n"
            + ONE_LINE.format(len="2,048", x="1024.00"),
            "the log says 999999",
        ),
        (
            "INFO block_size=100000\n" + ONE_LINE.format(len="2,048", x="1024.00"),
            "a block size of 100000",
        ),
        # seventeenth sweep (c) M4: a misplaced comma was read as its first groups (8,234)
        (
            "INFO # GPU blocks: 8,2340\n" + ONE_LINE.format(len="2,048", x="1024.00"),
            "the log says 8,2340 where vLLM writes a count",
        ),
        ("INFO # GPU blocks: 1,00\nmax_seq_len=100", "the log says 1,00 where"),
    ],
    ids=[
        "zero-length",
        "dot",
        "exponent",
        "thirty-digit-length",
        "block-size",
        "comma-4",
        "comma-2",
    ],
)
def test_a_damaged_line_is_refused_with_the_file_and_line(
    tmp_path: Path, line: str, says: str
) -> None:
    """Fifteenth sweep M3: 0 tokens was called "no max model length"; '.' was "expected a
    number" with no file or line; a 30-digit max length was believed."""
    log = tmp_path / "conc.log"
    log.write_text("INFO starting\n" + line + "\n")
    with pytest.raises(SizingError) as caught:
        vllm_log.parse_log_file(log)
    message = str(caught.value)
    assert message.startswith(f"{log}, line 2: "), message
    assert says in message, message


def test_a_cache_type_felab_does_not_know_is_refused_not_read_as_f16() -> None:
    """Fifteenth sweep M3: kv_cache_dtype=fp99 gave an f16 what-if."""
    text = "INFO kv_cache_dtype=fp99\n" + ONE_LINE.format(len="2,048", x="1024.00")
    reading = vllm_log.parse_log(text, source="fp99.log")
    with pytest.raises(
        SizingError, match=re.escape("fp99.log gives the cache type 'fp99', which felab")
    ):
        reading.capacity()


def test_a_long_log_is_read_line_by_line_within_bounds(tmp_path: Path) -> None:
    """Sixteenth sweep (c) H9/L3: a 240 MB log of short lines took 6 GB and ran past 30 s
    (splitlines of the whole text); a progress bar's \\r counted as a line break."""
    from felab_core.sizing.vllm_log import MAX_LINE_BYTES

    log = tmp_path / "long.log"
    with log.open("w") as fh:
        fh.write("Loading: 10%\rLoading: 100%\r\n")
        fh.write("x" * (3 * MAX_LINE_BYTES) + "\n")  # one line past the cut, skipped whole
        fh.write("INFO max_seq_len=abc\n")
        fh.write("INFO GPU KV cache size: 1e5 tokens\n")
    with pytest.raises(SizingError, match=re.escape(f"{log}, line 4: the log says 1e5")):
        vllm_log.parse_log_file(log)


def test_a_cache_past_any_server_is_refused_from_a_log() -> None:
    """Sixteenth sweep (c) H10: 9,999,999,999 tokens from a log was promised as 1.2 million
    conversations, while the same cache as blocks was refused."""
    text = ONE_LINE.replace("2,097,152", "9,999,999,999").format(len="8192", x="1220703.12")
    with pytest.raises(SizingError, match="9,999,999,999 tokens is more than any server holds"):
        vllm_log.parse_log(text, source="huge.log").capacity()


def test_an_fp8_name_vllm_does_not_have_is_not_read_as_fp8() -> None:
    """Sixteenth sweep (c) L4: kv_cache_dtype=fp8_garbage_xyz was read as fp8."""
    text = "INFO kv_cache_dtype=fp8_garbage_xyz\n" + ONE_LINE.format(len="2,048", x="1024.00")
    with pytest.raises(SizingError, match="gives the cache type 'fp8_garbage_xyz'"):
        vllm_log.parse_log(text, source="odd.log").capacity()


def test_lines_naming_the_cache_are_read_within_a_byte_budget(tmp_path: Path) -> None:
    """Seventeenth sweep (c) H4: 150 MB of 64 KiB lines each holding "lock" ran every pattern
    over every byte, past 30 s. Only lines holding a pattern's own words are searched now, and
    at most MOST_READ_BYTES of them."""
    head = "INFO GPU KV cache size: 1,000 tokens\n"
    wide = tmp_path / "wide.log"
    wide.write_text(head + ("lock " + "# " * 30_000 + "\n") * 600)  # 36 MB, nothing to search
    assert vllm_log.parse_log_file(wide).tokens == 1000
    named = tmp_path / "named.log"
    line = "KV cache size: block_size= max_model_len version weights " + "# " * 2_000 + "\n"
    named.write_text(head + line * (vllm_log.MOST_READ_BYTES // len(line) + 2))
    with pytest.raises(SizingError, match="over 32 MiB of lines that name vLLM's cache"):
        vllm_log.parse_log_file(named)


def test_a_log_longer_than_felab_reads_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seventeenth sweep (c) L8: KV lines past line 2,000,000 were "no KV-cache lines", and a
    restart after it was not seen, without a word."""
    monkeypatch.setattr(vllm_log, "MAX_LOG_LINES", 50)
    late = tmp_path / "late.log"
    late.write_text("x\n" * 60 + "INFO GPU KV cache size: 1,000 tokens\n")
    with pytest.raises(SizingError, match="no KV-cache lines in the first 50 lines of"):
        vllm_log.parse_log_file(late)
    early = tmp_path / "early.log"
    early.write_text("INFO GPU KV cache size: 1,000 tokens\n" + "x\n" * 60)
    reading = vllm_log.parse_log_file(early)
    assert "Only the first 50 lines of the log were read" in reading.explanation


def _info(labels: str) -> str:
    return f"# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{{labels}}} 1.0\n"


def test_a_length_vllm_s_rounding_leaves_open_is_asked_for_not_guessed() -> None:
    """Seventeenth sweep (c) M7: 131,744 tokens at 16.08x was shown as "vLLM reports ... 8,193
    tokens per request" (8,190 to 8,195 fit the rounding); 2,097,152 at 1024.00 is 2,048."""
    labels = 'block_size="16",num_gpu_blocks="8234",kv_cache_size_tokens="131744",'
    rounded = vllm_live.reading_from_metrics(_info(labels + 'kv_cache_max_concurrency="16.08"'))
    assert rounded.max_len is None
    with pytest.raises(SizingError, match="name no max model length; pass --max-len"):
        rounded.capacity()
    labels = 'block_size="16",num_gpu_blocks="131072",kv_cache_size_tokens="2097152",'
    exact = vllm_live.reading_from_metrics(_info(labels + 'kv_cache_max_concurrency="1024.00"'))
    assert exact.max_len == 2048


def test_a_cache_in_tokens_that_its_blocks_contradict_is_refused() -> None:
    """Seventeenth sweep (c) M6: 1 token beside 8,234 blocks of 16 went unsaid; then a note;
    sweep 21 (c) 1: refused, naming both figures."""
    labels = 'block_size="16",num_gpu_blocks="8234",kv_cache_size_tokens="1"'
    with pytest.raises(BadAnswer, match="a cache of 1 token, and num_gpu_blocks = 8,234"):
        vllm_live.reading_from_metrics(_info(labels), max_len=8192)


def test_metrics_opening_with_a_byte_order_mark_read() -> None:
    """Seventeenth sweep (c) L9: "invalid metric name:?# TYPE ..."."""
    labels = 'block_size="16",num_gpu_blocks="8234"'
    assert vllm_live.reading_from_metrics("\ufeff" + _info(labels)).gpu_blocks == 8234


def test_a_max_len_other_than_the_logs_is_refused_not_made_the_start(tmp_path: Path) -> None:
    """Seventeenth sweep (c) M14: --max-len 4096 beside a log of 8,192 became the "as
    started" row (32 conversations, not the server's 16)."""
    log = tmp_path / "v1.log"
    log.write_text(
        "INFO GPU KV cache size: 131,744 tokens\n"
        "INFO Maximum concurrency for 8,192 tokens per request: 16.08x\n"
    )
    reading = vllm_log.parse_log_file(log)
    assert reading.capacity(max_len=8192).max_len == 8192
    with pytest.raises(SizingError, match="says the server runs --max-model-len 8,192"):
        reading.capacity(max_len=4096)


def test_a_utf16_log_is_named_as_such(tmp_path: Path) -> None:
    """Twentieth sweep (c) C29: PowerShell's > writes UTF-16, and the log's lines read as
    noise: 'no KV-cache lines ... a log cut short or from another server'."""
    log = tmp_path / "vllm.log"
    log.write_text("INFO GPU KV cache size: 1,000 tokens\n", encoding="utf-16")
    with pytest.raises(SizingError, match=r"is UTF-16 text .* save it as UTF-8"):
        vllm_log.parse_log_file(log)
