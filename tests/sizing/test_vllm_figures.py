"""A vLLM log's or server's figures that contradict each other are refused, never shown as
vLLM's word (the eighteenth sweep, group c: M2, M3, M6)."""

from __future__ import annotations

import re

import pytest

from felab_core.sizing import SizingError, vllm_live, vllm_log
from felab_core.sizing.errors import BadAnswer

TOKENS = "INFO GPU KV cache size: 2,042,016 tokens\n"
CONC = "INFO Maximum concurrency for 2,048 tokens per request: {x}x\n"


@pytest.mark.parametrize(
    ("log", "says"),
    [
        (
            TOKENS + CONC.format(x="99999999999999999999999.00"),
            "line 2: the concurrency line says 99999999999999999999999.00x, more requests than",
        ),
        (
            TOKENS + CONC.format(x="0.00"),
            "a maximum concurrency of 0.00x for 2,048 tokens per request, and line 1 a cache of "
            "2,042,016 tokens, at least 249.27x",
        ),
        (
            "INFO GPU KV cache size: 2,000 tokens\n" + CONC.format(x="2001.00"),
            "2,001.00x beside a cache of 2,000 tokens, and each request holds at least a token",
        ),
        (
            "block_size=16\nINFO # GPU blocks: 10, # CPU blocks: 1966\n" + CONC.format(x="161.00"),
            "161.00x beside 10 cache blocks of 16 tokens",
        ),
    ],
    ids=["huge", "zero", "above-tokens", "above-blocks"],
)
def test_a_printed_concurrency_the_cache_cannot_give_is_refused(log: str, says: str) -> None:
    """M2: 99,999,...x and 0.00x were shown as vLLM's figure, "the one to trust"."""
    with pytest.raises(SizingError, match=re.escape(says)):
        vllm_log.parse_log(log)


def test_a_true_printed_concurrency_still_reads() -> None:
    reading = vllm_log.parse_log(TOKENS + CONC.format(x="997.08"))
    assert reading.printed_concurrency is not None and reading.capacity().whole_requests == 997
    small = vllm_log.parse_log("INFO GPU KV cache size: 5 tokens\n" + CONC.format(x="0.00"))
    assert small.printed_concurrency == 0  # 5 ÷ 2,048 is 0.00x: read, but no started server's
    with pytest.raises(SizingError, match="cannot hold one conversation"):
        small.capacity()


@pytest.mark.parametrize(
    ("log", "says"),
    [
        (
            "'max_model_len': 8192\nINFO GPU KV cache size: 1 tokens\n",
            "a cache of 1 token, which cannot hold one conversation of its max model length 8,192",
        ),
        (
            "'max_model_len': 8192\nGPU KV cache size: 100,000 tokens\n"
            "'max_model_len': 8192\nGPU KV cache size: 5 tokens\n",
            "a cache of 5 tokens, which cannot hold one conversation",
        ),
        (
            "GPU KV cache size: 100,000 tokens\n"
            + CONC.format(x="0.50").replace("2,048", "200,000"),
            "a cache of 100,000 tokens, which cannot hold one conversation of its max model "
            "length 200,000",
        ),
    ],
    ids=["one-token", "last-of-two", "half-a-request"],
)
def test_a_cache_that_cannot_hold_one_conversation_is_refused(log: str, says: str) -> None:
    """Sweep 20 (c) C28: "0 conversations at once" was written up from a log of 1 token; the
    flags (--tokens 1 --max-len 8192) were refused. vLLM does not start with such a cache."""
    with pytest.raises(SizingError, match=re.escape(says)):
        vllm_log.parse_log(log).capacity()
    with pytest.raises(SizingError, match="cannot hold one conversation of --max-len 8,192"):
        vllm_log.parse_log("GPU KV cache size: 10 tokens\n").capacity(max_len=8192)


def test_a_mixed_model_below_its_length_but_printed_at_1x_still_reads() -> None:
    """A model mixing kinds of layers counts fewer tokens than its length and still serves:
    vLLM's own 1x or more is believed."""
    log = "GPU KV cache size: 1,500 tokens\n" + CONC.format(x="1.20")
    assert vllm_log.parse_log(log).capacity().tokens == 1500


@pytest.mark.parametrize("figure", ["-1", "lots", ""])
def test_a_damaged_gpu_block_count_is_not_replaced_by_the_cpu_swap_blocks(figure: str) -> None:
    """M3: "# GPU blocks: -1, # CPU blocks: 1966" was read as a cache of 1,966 (CPU) blocks."""
    log = f"INFO # GPU blocks: {figure}, # CPU blocks: 1966\n" + CONC.format(x="462.97")
    with pytest.raises(SizingError, match=r"line 1: the log says .* where vLLM writes a count"):
        vllm_log.parse_log(log)


def test_a_cpu_backends_own_block_count_still_reads() -> None:
    reading = vllm_log.parse_log("INFO # CPU blocks: 1966\n")
    assert (reading.device, reading.gpu_blocks) == ("CPU", 1966)


def _info(labels: str) -> str:
    return f"# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{{labels}}} 1.0\n"


@pytest.mark.parametrize("max_len", [None, 8192])
def test_a_server_concurrency_its_blocks_cannot_hold_is_the_servers_fault(
    max_len: int | None,
) -> None:
    """M6: 9,999 requests beside 8,234 blocks had been worked back into a max length of 13
    tokens, shown as vLLM's, and used to refuse the user's right --max-len 8192."""
    labels = (
        'block_size="16",num_gpu_blocks="8234",kv_cache_size_tokens="131744",'
        'kv_cache_max_concurrency="9999"'
    )
    with pytest.raises(BadAnswer, match="9999 beside 8,234 cache blocks"):
        vllm_live.reading_from_metrics(_info(labels), max_len=max_len)


V0_BLOCKS = (
    "INFO # cuda blocks: 14815, # CPU blocks: 1966\n"
    "INFO Maximum concurrency for 512 tokens per request: 462.97x\n"
)


def test_a_block_size_the_concurrency_line_rules_out_is_refused() -> None:
    """M4: --block-size 32 beside a log whose 462.97x works out to blocks of 16 doubled the
    capacity (925 conversations) without a word; a --max-len so at odds is refused."""
    reading = vllm_log.parse_log(V0_BLOCKS)
    assert reading.capacity(block_size=16).whole_requests == 462
    with pytest.raises(SizingError, match=r"--block-size 32 would give 925\.94x"):
        reading.capacity(block_size=32)


def test_a_block_size_other_than_the_logs_own_is_refused() -> None:
    """M4: the log's block size had won over the flag's without a word."""
    reading = vllm_log.parse_log("INFO config block_size=16\n" + V0_BLOCKS)
    with pytest.raises(SizingError, match="gives blocks of 16 tokens, and --block-size 32"):
        reading.capacity(block_size=32)


def test_a_cache_type_other_than_the_logs_is_refused() -> None:
    """M4: --kv-dtype f16 beside kv_cache_dtype=fp8 was dropped; the table said fp8."""
    reading = vllm_log.parse_log("kv_cache_dtype=fp8\n" + TOKENS + CONC.format(x="997.08"))
    with pytest.raises(SizingError, match="cache type fp8, and --kv-dtype f16 would not be"):
        reading.capacity(kv_dtype="f16")
    for same in ("fp8", "fp8_e4m3", "auto", None):
        assert reading.capacity(kv_dtype=same).kv_dtype == "fp8"
    plain = vllm_log.parse_log(TOKENS + CONC.format(x="997.08"))
    assert plain.capacity(kv_dtype="fp8").kv_dtype == "fp8"  # a log without one: the flag's


def test_a_printed_figure_the_flags_block_size_disagrees_with_is_noted() -> None:
    """M3 (also): 462.97x beside 1,966 blocks of --block-size 16 (61.44) went unsaid."""
    reading = vllm_log.parse_log(
        "INFO # CPU blocks: 1966\nINFO Maximum concurrency for 512 tokens per request: 462.97x\n"
    )
    notes = reading.consistency_notes(block_size=16)
    assert any("vLLM printed 462.97x but 31,456 ÷ 512 = 61.44" in n for n in notes)


def test_a_token_count_its_blocks_contradict_is_refused_beside_a_concurrency() -> None:
    """Sweep 21 (c) 1: a cache in tokens its blocks cannot give (vLLM prints blocks // groups
    x block size) had been a note; the server's two figures are held to each other."""
    labels = (
        'block_size="16",num_gpu_blocks="8234",kv_cache_size_tokens="5",'
        'kv_cache_max_concurrency="16.08"'
    )
    with pytest.raises(BadAnswer, match="cache of 5 tokens, and num_gpu_blocks = 8,234 blocks"):
        vllm_live.reading_from_metrics(_info(labels), max_len=8192)


def test_a_restart_may_change_the_block_size_but_one_startup_may_not() -> None:
    """Sweep 20 (c) C11: block_size=16 then 32 before one '# GPU blocks' used 32 unsaid; a
    restart with another --block-size is still read (its last cache)."""
    blocks = "INFO # GPU blocks: 5000, # CPU blocks: 100\n"
    restart = vllm_log.parse_log("block_size=16\n" + blocks + "block_size=32\n" + blocks)
    assert (restart.block_size, restart.capacity(max_len=8192).tokens) == (32, 160_000)
    with pytest.raises(SizingError, match="block_size=16 on line 1 and block_size=32 on line 2"):
        vllm_log.parse_log("block_size=16\nblock_size=32\n" + blocks)
    same = vllm_log.parse_log("kv_cache_dtype=fp8\nkv_cache_dtype=fp8_e4m3\n" + blocks)
    assert same.kv_cache_dtype == "fp8_e4m3"  # two names of one size: no contradiction


@pytest.mark.parametrize(
    "line", ["Model loading took 9999 GiB", "Available KV cache memory: 9999 GiB"]
)
def test_memory_past_any_accelerator_is_refused(line: str) -> None:
    """Sweep 20 (c) C31: 'Model loading took 9999 GiB' was quoted as 10,736.34 GB on a GPU."""
    with pytest.raises(SizingError, match=re.escape("10,736.34 GB of one GPU's memory, more than")):
        vllm_log.parse_log(f"INFO {line}\n" + TOKENS)
    cpu = vllm_log.parse_log(f"INFO {line}\nINFO CPU KV cache size: 100,000 tokens\n")
    assert cpu.device == "CPU"  # a CPU server's memory is not bounded by the chip table
