"""The sizing memo service: the golden memo, each required section, the charts, and refusals.

The golden file is the memo for the sample CSV on the course's Day 2 Mac. When a wording change is
intended, regenerate it (and the README's chart) with FELAB_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest

from felab_core.engine.results import CSV_COLUMNS
from felab_core.reports.memo import (
    MachineSpec,
    Memo,
    MemoError,
    build_memo,
    chart_names,
    load_results,
    parse_machine,
    render_markdown,
    write_charts,
)
from tests.reports.conftest import (
    GOLDEN,
    MAC_INPUTS,
    SAMPLE_CSV,
    SOURCE,
    blank_row,
    sample_rows,
)

ROOT = Path(__file__).resolve().parents[2]
README_CHART = ROOT / "docs" / "memo-example.png"
FIXTURES = ROOT / "tests" / "sizing" / "fixtures"


def sample_memo() -> Memo:
    return build_memo(load_results(SAMPLE_CSV), MAC_INPUTS, source=SOURCE)


@pytest.fixture(scope="module")
def memo() -> Memo:
    return sample_memo()


@pytest.fixture(scope="module")
def text(memo: Memo) -> str:
    return render_markdown(memo)


def section(text: str, title: str) -> str:
    """The body of one '## title' section."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no section {title!r}"
    return match.group(1)


def table_rows(body: str) -> list[list[str]]:
    """The data rows of the first Markdown table in a section, as stripped cells."""
    lines = [ln for ln in body.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines[2:]]


# ---------------------------------------------------------------- golden


def test_golden_memo(text: str) -> None:
    """The whole memo for the sample CSV; FELAB_UPDATE_GOLDEN=1 rewrites it and the README chart."""
    if os.environ.get("FELAB_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
        with tempfile.TemporaryDirectory() as tmp:
            speed, _ = write_charts(sample_memo(), Path(tmp))
            README_CHART.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(speed, README_CHART)
    assert GOLDEN.exists(), "run with FELAB_UPDATE_GOLDEN=1 once to write the golden memo"
    assert text == GOLDEN.read_text(encoding="utf-8"), (
        "the memo changed; if that was intended, rerun with FELAB_UPDATE_GOLDEN=1 and review "
        "the diff of tests/reports/golden/memo.md"
    )


def test_required_sections_in_order(text: str) -> None:
    titles = re.findall(r"^## (.+)$", text, re.M)
    assert titles == [
        "Summary",
        "Machine and model",
        "Latest timing rows",
        "KV cache math",
        "Conversations at once",
        "Flags to try first",
        "How to read this memo",
    ]
    assert text.startswith("# Sizing memo: Llama 3.1 8B on M4 Pro\n")


def test_sample_csv_has_felab_header() -> None:
    header = SAMPLE_CSV.read_text(encoding="utf-8").splitlines()[0]
    assert tuple(header.split(",")) == CSV_COLUMNS


def test_the_docs_excerpt_matches_the_golden_memo() -> None:
    """The student docs quote the memo; every quoted line must still be in it."""
    doc = (ROOT / "docs" / "student.md").read_text(encoding="utf-8")
    assert "\n## Sizing memo\n" in doc
    body = doc.split("\n## Sizing memo\n", 1)[1]  # the excerpt has headings of its own
    fence = re.search(r"```markdown\n(.*?)```", body, re.S)
    assert fence, "docs/student.md's Sizing memo section has no ```markdown excerpt"
    golden = GOLDEN.read_text(encoding="utf-8").splitlines()
    quoted = [ln for ln in fence.group(1).splitlines() if ln.strip() and ln.strip() != "..."]
    assert quoted
    for line in quoted:
        assert line in golden, f"the docs quote a line the memo no longer has: {line!r}"
    assert "memo-example.png" in body
    assert README_CHART.exists()
    assert png_size(README_CHART.read_bytes())[0] > 400


# ---------------------------------------------------------------- sections


def test_machine_and_model(text: str) -> None:
    body = section(text, "Machine and model")
    assert "| machine (studio-mbp.local) | M4 Pro (Apple M-series, up to 64 GB) |" in body
    assert "| memory bandwidth | 273 GB/s |" in body
    assert "| model | Llama 3.1 8B |" in body
    assert "273 GB/s ÷ 4.9 GB = about 56 tokens per second (55.71)" in body
    assert "8 KV heads of 128 numbers each" in body


def test_latest_rows_one_per_server_with_percent_of_limit(text: str) -> None:
    body = section(text, "Latest timing rows")
    rows = table_rows(body)
    assert [r[1] for r in rows] == ["Ollama 0.9.0", "llama.cpp b5600", "MLX"]
    by_server = {r[1].split()[0]: r for r in rows}
    # the newest rows (2025-06-09), not the first Day 2 run or the llama.cpp sweep in between
    assert by_server["Ollama"][5:8] == ["2025-06-09 14:02", "44.6", "80 %"]
    assert by_server["llama.cpp"][5:8] == ["2025-06-09 14:05", "45.3", "81 %"]
    assert by_server["MLX"][5:8] == ["2025-06-09 14:09", "58.9", "106 %"]
    # preset and model show, so a reader sees whether the rows compare
    assert by_server["Ollama"][2:4] == ["llama3.1:8b", "day2"]
    assert by_server["MLX"][2] == "mlx-community/Meta-Llama-3.1-8B-Instruct-4bit"
    assert "5 older rows for the same servers are left out" in body


def test_impossible_row_is_flagged_with_causes(memo: Memo, text: str) -> None:
    assert [r.server for r in memo.impossible] == ["mlx"]
    body = section(text, "Latest timing rows")
    assert "| **impossible** |" in body
    assert "**MLX on studio-mbp.local is impossible.** 58.9 tokens per second is 106 %" in body
    assert "a different, smaller or more compressed model is loaded" in body
    assert "MLX keeps its own copy of the model" in body
    assert "1 row above the speed limit cannot be right:** MLX" in section(text, "Summary")


def test_kv_math(text: str) -> None:
    body = section(text, "KV cache math")
    assert "2 x 32 layers x 8 KV heads x 128 numbers x 2 bytes = 131,072 bytes (128 KiB)" in body
    assert "65,536 bytes (64 KiB), half as much" in body
    assert "| 32,768 | 4,096 MiB = 4.29 GB | 2,048 MiB = 2.15 GB |" in body


def test_concurrency_table(text: str) -> None:
    body = section(text, "Conversations at once")
    rows = {r[0]: r[1:] for r in table_rows(body)}
    assert rows["8,192 (as planned)"] == ["16.00", "16", "32", "x2"]
    assert rows["4,096"] == ["32.00", "32", "64", "x2"]
    assert rows["131,072"] == ["1.00", "1", "2", "x2"]
    assert "8,192 blocks x 16 tokens = 131,072 tokens of cache" in body
    assert "262,144 tokens ÷ 4,096 = 64.00, so 64 conversations at once, 4 times" in body


def test_flags_to_try_in_the_course_words(text: str) -> None:
    body = section(text, "Flags to try first")
    for flag in ("--enable-prefix-caching", "--enable-chunked-prefill", "--kv-cache-dtype fp8"):
        assert f"(`{flag}`)" in body
    assert "16 conversations at once become 32 (2 times)" in body  # this memo's cache
    assert "131,744 tokens x 2 = 263,488, from 16 to 32 conversations at once" in body  # video
    assert "50 ÷ 16 = 3.1 times as many" in body
    assert "0.5 ÷ 1.6 = 0.31 of the wait: a 69 % cut, 3.2 times faster" in body
    assert body.count("On recent vLLM releases (the V1 engine) this is already on by default") == 2
    assert "The fp8 cache is still opt-in" in body
    assert "Then, and only then, argue about hardware." in body


def test_charts_are_linked(text: str) -> None:
    assert "![Writing speed per server against the speed limit](memo-speed.png)" in text
    assert "![Conversations at once by context length](memo-concurrency.png)" in text
    assert "](" not in render_markdown(sample_memo(), charts=None)


# ---------------------------------------------------------------- charts


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR, after checking its signature and end chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    assert data.endswith(b"IEND\xaeB`\x82"), "PNG is truncated"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_charts_are_valid_pngs(memo: Memo, tmp_path: Path) -> None:
    from matplotlib.image import imread

    speed, conc = write_charts(memo, tmp_path / "out", stem="customer")
    assert (speed.name, conc.name) == chart_names("customer")
    for path in (speed, conc):
        width, height = png_size(path.read_bytes())
        assert width >= 600 and height >= 300
        pixels = imread(path)
        assert pixels.shape[:2] == (height, width)
        assert pixels.std() > 0.05  # not blank
    assert speed.read_bytes() != conc.read_bytes()


def test_charts_for_several_machines(tmp_path: Path) -> None:
    rows = sample_rows()
    other = [dict(r, host="lab-h100", server="vllm", target="vllm") for r in rows[-1:]]
    inputs = replace(
        MAC_INPUTS,
        machines=(parse_machine("studio-mbp.local=M4 Pro"), parse_machine("lab-h100=H100 SXM")),
    )
    memo = build_memo(rows + other, inputs, source=SOURCE)
    assert [m.label for m in memo.machines] == ["H100 SXM", "M4 Pro"]
    assert memo.title == "Sizing memo: Llama 3.1 8B on H100 SXM and M4 Pro"
    vllm = next(r for r in memo.rows if r.server == "vllm")
    assert vllm.percent_text == "9 %" and vllm.verdict == "well below the limit"
    for path in write_charts(memo, tmp_path):
        png_size(path.read_bytes())


# ---------------------------------------------------------------- latest-row rules


def _row(stamp: str, server: str, tps: str, **extra: str) -> dict[str, str]:
    values = {
        "timestamp": stamp,
        "host": "mac",
        "target": server,
        "server": server,
        "model": "llama3.1:8b",
        "preset": "day2",
        "concurrency": "1",
        "requests": "8",
        "ok": "8",
        "failed": "0",
        "writing_tps_p50": tps,
    }
    values.update(extra)
    return blank_row(**values)


def test_one_run_at_several_concurrencies_keeps_the_one_user_row() -> None:
    stamp = "2025-06-09T10:00:00+00:00"
    rows = [
        _row(stamp, "llamacpp", "27.5", concurrency="4", preset="sweep"),
        _row(stamp, "llamacpp", "44.0", concurrency="1", preset="sweep"),
        _row(stamp, "llamacpp", "12.0", concurrency="16", preset="sweep"),
    ]
    memo = build_memo(rows, MAC_INPUTS)
    (row,) = memo.rows
    assert row.concurrency == 1
    assert row.writing_tps == Fraction(44)
    assert row.older_rows == 2


def test_newest_timestamp_wins_whatever_the_file_order() -> None:
    rows = [
        _row("2025-06-09T10:00:00+00:00", "ollama", "44.6"),
        _row("2025-06-02T10:00:00+00:00", "ollama", "41.8"),
        _row("2025-06-09T12:00:00+02:00", "ollama", "40.0"),  # 10:00 UTC: same instant, later row
    ]
    (row,) = build_memo(rows, MAC_INPUTS).rows
    assert str(row.writing_tps) == "40"


def test_rows_that_do_not_compare_are_called_out() -> None:
    rows = [
        _row("2025-06-09T10:00:00+00:00", "ollama", "44.6", preset="day2+custom"),
        _row("2025-06-09T10:05:00+00:00", "llamacpp", "", ok="0", failed="8"),
        _row("2025-06-09T10:09:00+00:00", "mlx", "50", concurrency="4"),
    ]
    memo = build_memo(rows, MAC_INPUTS)
    text = render_markdown(memo)
    assert "different workloads (day2, day2+custom)" in text
    assert "Ollama on mac ran a preset changed by flags" in text
    assert "different numbers of users at once (1, 4)" in text
    assert (
        "llama.cpp on mac: the newest run has no writing speed (0 of 8 requests succeeded)" in text
    )
    assert next(r for r in memo.rows if r.server == "llamacpp").verdict == "every request failed"


# ---------------------------------------------------------------- other inputs


def test_course_video_blocks_give_16_then_32() -> None:
    inputs = replace(MAC_INPUTS, kv_memory=None, blocks=8234)
    memo = build_memo(sample_rows(), inputs)
    text = render_markdown(memo)
    assert "131,744 ÷ 8,192 = 16.08, so 16 conversations at once" in text
    assert memo.headline.fp8 is not None and memo.headline.fp8.whole_requests == 32


def test_vllm_log_sets_the_cache_and_length() -> None:
    inputs = replace(
        MAC_INPUTS,
        machines=(MachineSpec(chip="H100 SXM"),),  # 67.7 GB of weights: no M4 Pro holds them
        model="llama-3.1-70b",
        model_bytes="70GB",
        kv_memory=None,
        vllm_log=FIXTURES / "vllm_v1_blocks_pr12569.log",
    )
    memo = build_memo(sample_rows(), inputs)
    assert memo.max_len == 2048
    assert memo.headline.capacity.tokens == 1381 * 16
    assert "vLLM (GPU) logged 1,381 cache blocks" in render_markdown(memo)


def test_an_fp8_cache_drops_the_fp8_columns() -> None:
    memo = build_memo(sample_rows(), replace(MAC_INPUTS, kv_dtype="fp8"))
    text = render_markdown(memo)
    assert memo.already_fp8
    assert "conversations (fp8 cache)" not in text
    assert "The cache is already fp8, 8 bits or fewer per number (64 KiB per token)" in text
    assert "| 8,192 (as planned) | 32.00 | 32 |" in text


def test_model_from_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        '{"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, '
        '"hidden_size": 4096, "max_position_embeddings": 131072}'
    )
    memo = build_memo(sample_rows(), replace(MAC_INPUTS, model=None, config=config))
    assert memo.per_token.bytes == 131072


def test_contexts_beyond_the_trained_length_are_left_out_with_a_note() -> None:
    memo = build_memo(sample_rows(), replace(MAC_INPUTS, contexts=(4096, 262144)))
    assert [c.context for c in memo.concurrency] == [4096, 8192]
    assert "Left out 262,144 tokens" in render_markdown(memo)


# ---------------------------------------------------------------- refusals


def refuses(fn: Callable[[], object], *needles: str) -> str:
    with pytest.raises(MemoError) as info:
        fn()
    message = str(info.value)
    for needle in needles:
        assert needle in message, message
    return message


def test_missing_csv(tmp_path: Path) -> None:
    refuses(lambda: load_results(tmp_path / "nope.csv"), "does not exist", "felab bench", "--csv")
    refuses(lambda: load_results(tmp_path), "is a folder", "--csv")


def test_csv_with_other_columns(tmp_path: Path) -> None:
    path = tmp_path / "other.csv"
    path.write_text("when,server,speed\n2025-06-09,ollama,44.6\n")
    refuses(lambda: load_results(path), "other columns", "'when'", "no 'timestamp'", "--csv")


def test_csv_with_its_columns_moved_is_read_by_name(tmp_path: Path) -> None:
    """Eleventh sweep: a spreadsheet's reordering was refused by the memo, taken by `numbers
    import`."""
    row = dict.fromkeys(CSV_COLUMNS, "")
    row.update(
        timestamp="2026-12-01T10:00:00+00:00", host="mac", target="mlx", server="mlx",
        model="m", preset="day2", concurrency="1", requests="3", ok="3", failed="0",
        writing_tps_p50="40", tpot_p50_s="0.025",
    )  # fmt: skip
    moved = [*reversed(CSV_COLUMNS)]
    path = tmp_path / "moved.csv"
    path.write_text(",".join(moved) + "\n" + ",".join(row[c] for c in moved) + "\n")
    [read] = load_results(path)
    assert read["writing_tps_p50"] == "40" and read["host"] == "mac"


def test_csv_from_a_much_older_felab(tmp_path: Path) -> None:
    path = tmp_path / "old.csv"
    path.write_text(",".join(CSV_COLUMNS[:10]) + "\n")
    refuses(lambda: load_results(path), "lacks the column(s)", "writing_tps_p50")


def test_csv_from_a_newer_felab_is_read(tmp_path: Path) -> None:
    path = tmp_path / "new.csv"
    lines = SAMPLE_CSV.read_text().splitlines()
    path.write_text("\n".join([lines[0] + ",new_column", *(ln + ",x" for ln in lines[1:])]) + "\n")
    assert len(build_memo(load_results(path), MAC_INPUTS).rows) == 3


def test_no_rows(tmp_path: Path) -> None:
    header_only = tmp_path / "header.csv"
    header_only.write_text(",".join(CSV_COLUMNS) + "\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    for path in (header_only, empty):
        assert load_results(path) == []
    refuses(lambda: build_memo([], MAC_INPUTS), "no timing rows", "felab bench")


def test_unknown_chip() -> None:
    inputs = replace(MAC_INPUTS, machines=(MachineSpec(chip="M9 Hyper"),))
    refuses(lambda: build_memo(sample_rows(), inputs), "'M9 Hyper'", "felab size chips")


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        ({"machines": ()}, ("--chip", "--bandwidth")),
        ({"model": None}, ("--model", "--gguf", "llama3.1:8b")),
        ({"model_bytes": None}, ("--model-bytes", "4.9GB")),
        ({"model_bytes": "4.9"}, ("only 4.9 bytes", "4.9GB")),
        ({"kv_memory": None}, ("none was given", "--kv-memory", "--vllm-log")),
        ({"blocks": 8234}, ("got --kv-memory and --blocks",)),
        ({"max_len": 200_000}, ("--max-len 200,000", "131,072")),
        ({"contexts": (0,)}, ("above zero",)),
        ({"hosts": ("lab-h100",)}, ("lab-h100", "studio-mbp.local")),
        ({"machines": (MachineSpec(host="x", chip="M4 Pro"),)}, ("host 'x'",)),
        (
            {"machines": (MachineSpec(chip="M4 Pro"), MachineSpec(bandwidth="273"))},
            ("two machines",),
        ),
    ],
)
def test_bad_inputs_say_what_to_pass(change: dict[str, object], needles: tuple[str, ...]) -> None:
    inputs = replace(MAC_INPUTS, **change)  # type: ignore[arg-type]
    refuses(lambda: build_memo(sample_rows(), inputs), *needles)


def test_a_host_without_a_machine() -> None:
    rows = [*sample_rows(), _row("2025-06-09T10:00:00+00:00", "vllm", "40")]
    inputs = replace(MAC_INPUTS, machines=(MachineSpec(host="studio-mbp.local", chip="M4 Pro"),))
    refuses(lambda: build_memo(rows, inputs), "no machine for host 'mac'", "--chip 'mac=CHIP'")


def test_bad_timestamp() -> None:
    rows = [_row("last tuesday", "ollama", "44.6")]
    refuses(lambda: build_memo(rows, MAC_INPUTS), "row 2", "'last tuesday'", "ISO")


def test_parse_machine() -> None:
    assert parse_machine("M4 Pro") == MachineSpec(chip="M4 Pro")
    assert parse_machine("studio = M2 Ultra") == MachineSpec(host="studio", chip="M2 Ultra")
    assert parse_machine("gpu=3.35 TB/s", bandwidth=True) == MachineSpec(
        host="gpu", bandwidth="3.35 TB/s"
    )
    refuses(lambda: parse_machine("=M4 Pro"), "names no host")
    refuses(lambda: parse_machine("studio="), "gives no chip")


def test_a_csv_lacking_most_columns_is_not_called_an_older_felabs(tmp_path: Path) -> None:
    """Thirteenth sweep: `timestamp,host` was 'written by an older felab'."""
    path = tmp_path / "two.csv"
    path.write_text("timestamp,host\n2026-12-01T10:00:00+00:00,mac\n")
    refuses(lambda: load_results(path), "is not a results file written by `felab bench`")
