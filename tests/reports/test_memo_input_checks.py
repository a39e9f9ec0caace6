"""The memo refuses inputs that would make its figures wrong: a model file too small for the
model named, weights and cache no machine of the chip could hold, and results files that are
not text or hold a cell no felab row has, each said in felab's words (exit 2 from the CLI)."""

from __future__ import annotations

import codecs
import csv
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.results import CSV_COLUMNS
from felab_core.reports.memo import MachineSpec, MemoError, build_memo, load_results
from felab_core.sizing.known_models import file_size_problem
from tests.reports.conftest import MAC_INPUTS, SAMPLE_CSV, sample_rows

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


#: The sample Mac's flags: M4 Pro, Llama 3.1 8B of 4.9 GB, 16 GiB of cache.
MAC_FLAGS = (
    "--chip", "M4 Pro", "--model", "llama-3.1-8b", "--model-bytes", "4.9GB",
    "--kv-memory", "16GiB",
)  # fmt: skip


def memo_cli(*args: str, csv_path: Path = SAMPLE_CSV) -> tuple[int, str, str]:
    result = runner.invoke(app, ["memo", "--csv", str(csv_path), *args], env=WIDE)
    return result.exit_code, result.stdout, result.stderr


def refused(inputs: object) -> str:
    with pytest.raises(MemoError) as caught:
        build_memo(sample_rows(), inputs)  # type: ignore[arg-type]
    return str(caught.value)


# ---------------------------------------------------------------- the model file's size


def test_a_model_file_too_small_for_the_named_model_is_refused() -> None:
    message = refused(replace(MAC_INPUTS, model_bytes="1MB"))
    expected = file_size_problem("llama-3.1-8b", 1_000_000)
    assert expected is not None
    assert message == expected  # the same words as `felab numbers model --bytes`
    assert "cannot hold Llama 3.1 8B" in message and "4.9GB" in message


def test_a_model_file_too_big_for_the_named_model_is_refused() -> None:
    message = refused(replace(MAC_INPUTS, model_bytes="900GB"))
    assert "cannot hold Llama 3.1 8B" in message


def test_a_plausible_file_size_still_makes_the_memo() -> None:
    memo = build_memo(sample_rows(), replace(MAC_INPUTS, model_bytes="16GB"))  # 8B at 16 bits
    assert memo.weights == 16 * 10**9


def m4_pro_memo(model: str, model_bytes: str) -> tuple[int, str, str]:
    """`felab memo` on an M4 Pro with 16 GiB of cache, printed (no files)."""
    return memo_cli(
        "--out", "-", "--no-charts", "--chip", "M4 Pro", "--model", model,
        "--model-bytes", model_bytes, "--kv-memory", "16GiB",
    )  # fmt: skip


def test_the_cli_refuses_a_1mb_model_file_with_exit_2() -> None:
    code, out, err = m4_pro_memo("llama-3.1-8b", "1MB")
    assert code == 2, out
    assert err.startswith("error: 1 MB cannot hold Llama 3.1 8B")
    assert "273,000" not in out + err and "Traceback" not in out + err


# ---------------------------------------------------------------- weights and cache in memory


def test_weights_and_cache_beyond_the_chips_memory_are_refused() -> None:
    inputs = replace(MAC_INPUTS, model="llama-3.1-70b", model_bytes="140GB")
    message = refused(inputs)
    assert "the weights (140.0 GB) and 16 GiB of cache memory (17.2 GB) need 157.2 GB" in message
    assert "M4 Pro comes with (up to 64 GB)" in message
    assert "--bandwidth" not in message  # a Mac's memory cannot be spread over more chips


def test_a_gpu_that_cannot_hold_them_points_to_the_total_bandwidth() -> None:
    inputs = replace(
        MAC_INPUTS,
        machines=(MachineSpec(chip="H100 SXM"),),
        model="llama-3.1-70b",
        model_bytes="140GB",
        kv_memory=None,
        kv_tokens=100_000,  # 320 KiB a token at f16: 32.8 GB
    )
    message = refused(inputs)
    assert "a cache of 100,000 tokens (32.8 GB) need 172.8 GB" in message
    assert "H100 SXM comes with (80 GB HBM3)" in message
    assert "--bandwidth" in message


def test_cache_blocks_count_at_their_cache_type() -> None:
    inputs = replace(MAC_INPUTS, kv_memory=None, blocks=400_000)  # 6.4M tokens at 128 KiB
    assert "400,000 blocks of 16 tokens (838.9 GB)" in refused(inputs)


def test_a_mixture_of_experts_is_held_whole_though_a_token_reads_a_few() -> None:
    # gpt-oss-120b at 4.5 bits: 2.9 GB read per token, but 65.7 GB of weights to hold
    inputs = replace(MAC_INPUTS, model="gpt-oss-120b", model_bytes=None, bits_per_weight="4.5")
    message = refused(inputs)
    assert "the weights (65.7 GB)" in message and "M4 Pro" in message


def test_what_fits_is_still_written() -> None:
    inputs = replace(MAC_INPUTS, model="llama-3.1-70b", model_bytes="40GB")  # 40 + 17.2 <= 64
    memo = build_memo(sample_rows(), inputs)
    assert memo.headline.capacity.whole_requests == 6


def test_a_machine_known_only_by_its_bandwidth_is_not_checked() -> None:
    inputs = replace(
        MAC_INPUTS,
        machines=(MachineSpec(bandwidth="273"),),
        model="llama-3.1-70b",
        model_bytes="140GB",
    )
    memo = build_memo(sample_rows(), inputs)  # its memory is unknown: nothing new is said
    assert memo.weights == 140 * 10**9


def test_the_cli_refuses_a_70b_with_its_cache_on_an_m4_pro_with_exit_2() -> None:
    code, out, err = m4_pro_memo("llama-3.1-70b", "140GB")
    assert code == 2, out
    assert "need 157.2 GB, more than M4 Pro comes with (up to 64 GB)" in err
    assert "conversations at once" not in out


# ---------------------------------------------------------------- results files felab did not write


def test_a_binary_file_is_not_utf8_text_at_byte_0(tmp_path: Path) -> None:
    path = tmp_path / "random.csv"
    path.write_bytes(b"\xbe\x93\x00\xff" * 64)
    with pytest.raises(MemoError) as caught:
        load_results(path)
    assert str(caught.value).startswith(f"{path} is not UTF-8 text (byte 0)")
    assert "codec" not in str(caught.value)


def test_the_bad_byte_counts_from_the_start_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    header = ",".join(CSV_COLUMNS).encode()
    path.write_bytes(codecs.BOM_UTF8 + header + b"\n" + b"caf\xe9\n")
    with pytest.raises(MemoError, match=rf"\(byte {3 + len(header) + 4}\)"):
        load_results(path)


def test_a_byte_order_mark_is_still_fine(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(codecs.BOM_UTF8 + SAMPLE_CSV.read_bytes())
    assert load_results(path) == load_results(SAMPLE_CSV)


def test_a_cell_past_the_csv_limit_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "huge.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_COLUMNS)
        writer.writerow(["2025-06-09T10:00:00+00:00"] + [""] * (len(CSV_COLUMNS) - 1))
        writer.writerow(["x" * 200_000] + [""] * (len(CSV_COLUMNS) - 1))
    with pytest.raises(MemoError) as caught:
        load_results(path)
    message = str(caught.value)
    assert f"{path} line 3: a cell longer than 131,072 characters: not a row felab writes" in (
        message
    )
    assert "field limit" not in message


def test_the_cli_says_not_utf8_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "random.csv"
    path.write_bytes(b"\xbe" + bytes(range(256)))
    code, _, stderr = memo_cli("--out", "-", *MAC_FLAGS, csv_path=path)
    assert code == 2
    assert "is not UTF-8 text (byte 0)" in stderr
    assert "codec" not in stderr


MEMO_FLAGS = ("--chip", "M2 Ultra", "--model", "llama-3.1-8b", "--model-bytes", "4.9GB",
              "--kv-memory", "16GiB")  # fmt: skip


@pytest.mark.parametrize(
    ("contexts", "says"),
    [
        (
            "4,096",
            "holds '096', a number led by a zero: a comma separates items here, so write "
            "4096, not 4,096",
        ),  # had run lengths 4 and 96
        (
            ",".join(str(1 + 32 * i) for i in range(33)),
            "names 33 lengths: a memo compares at most 32",
        ),
    ],
)
def test_contexts_a_memo_cannot_mean_are_refused(contexts: str, says: str) -> None:
    """Seventeenth sweep (c) H5, M11: 4,000 lengths drew charts past 30 s and 600 MB."""
    code, _, err = memo_cli(*MEMO_FLAGS, "-o", "-", "--contexts", contexts)
    assert code == 2 and says in " ".join(err.split()), err


def test_the_memo_makes_one_missing_folder_never_a_tree(tmp_path: Path) -> None:
    """Seventeenth sweep (c) M13: -o nodir/sub/m.md made both folders."""
    code, _, err = memo_cli(*MEMO_FLAGS, "--no-charts", "-o", str(tmp_path / "a" / "b" / "m.md"))
    assert code == 2 and "does not exist, so felab will not make the memo there" in err
    assert not (tmp_path / "a").exists()
    code, _, err = memo_cli(*MEMO_FLAGS, "--no-charts", "-o", str(tmp_path / "a" / "m.md"))
    assert code == 0, err
    assert (tmp_path / "a" / "m.md").is_file()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--kv-memory", "-16GiB"), "got -17.18 GB = -16 GiB"),  # was -17179869184
        (("--kv-memory", "100kB"), "100,000 bytes (97.66 KiB) does not hold even one block"),
        (("--host", ""), "no rows come from host(s) ''"),  # was "host(s) ;"
    ],
)
def test_memo_says_sizes_and_hosts_in_words(flags: tuple[str, str], says: str) -> None:
    """Seventeenth sweep (c) L13."""
    base = ("--chip", "M2 Ultra", "--model", "llama-3.1-8b", "--model-bytes", "4.9GB")
    extra = () if flags[0] == "--kv-memory" else ("--kv-memory", "16GiB")
    code, _, err = memo_cli(*base, *extra, *flags, "-o", "-")
    assert code == 2 and says in " ".join(err.split()), err


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            ("--kv-tokens", "1"),
            "a cache of 1 token cannot hold one conversation of 8,192 tokens "
            "(the default --max-len)",
        ),
        (
            ("--kv-tokens", "99", "--max-len", "100"),
            "cannot hold one conversation of --max-len 100",
        ),
    ],
)
def test_a_cache_too_small_for_one_conversation_is_refused(
    flags: tuple[str, ...], says: str
) -> None:
    """Fifteenth sweep L10, seventeenth (c) L13: "0 conversations at once" was written; the
    default length is said as the default (sixteenth M8)."""
    base = ("--chip", "M2 Ultra", "--model", "llama-3.1-8b", "--model-bytes", "4.9GB")
    code, _, err = memo_cli(*base, *flags, "-o", "-")
    assert code == 2 and says in " ".join(err.split()), err


def test_a_model_named_with_math_marks_is_charted_as_text(tmp_path: Path) -> None:
    """Seventeenth sweep (c) H7: `_name_or_path` "a$\\frac{b$" stopped the memo (exit 70)."""
    config = tmp_path / "m"
    config.mkdir()
    (config / "config.json").write_text(
        '{"_name_or_path": "a$\\\\frac{b$", "num_hidden_layers": 32, "num_attention_heads": 32,'
        ' "num_key_value_heads": 8, "hidden_size": 4096, "max_position_embeddings": 131072}'
    )
    code, _, err = memo_cli(
        "--chip", "M2 Ultra", "--config", str(config), "--model-bytes", "4.9GB",
        "--kv-memory", "16GiB", "-o", str(tmp_path / "m.md"),
    )  # fmt: skip
    assert code == 0, err
    assert (tmp_path / "m-speed.png").is_file()


def test_a_rows_model_and_version_are_text_not_markdown(tmp_path: Path) -> None:
    """Sweep 20 (c) C17: a server's model "[click](http://evil.example/x)" became a live link in
    the memo, and a version "9.9 | **impossible**" a bold verdict; they are escaped as
    `size kv -o md` escapes a cell."""
    rows = list(csv.DictReader(SAMPLE_CSV.open(encoding="utf-8")))
    for row in rows:  # every run of the servers: the memo shows each one's newest
        row["model"] = "[click](http://evil.example/x) ![i](http://evil.example/i.png) <b>"
        row["server_version"] = "9.9 | **impossible**"
    edited = tmp_path / "results.csv"
    with edited.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, text, stderr = memo_cli(*MAC_FLAGS, "--no-charts", "-o", "-", csv_path=edited)
    assert code == 0, stderr
    assert "\\[click\\](http://evil.example/x) !\\[i\\](http://evil.example/i.png) \\<b\\>" in text
    assert "9.9 \\| \\*\\*impossible\\*\\*" in text
    assert "](http" not in text.replace("\\](http", "")
