"""The memo from a vLLM log: figures the log contradicts, or the machine or model rule out, are
refused as `size capacity` refuses them, not written up (sweep 20 (c))."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from tests.reports.conftest import SAMPLE_CSV

runner = CliRunner()
HEAD = "INFO vLLM API server version 0.9.1\nINFO non-default args: {'max_model_len': 8192}\n"
TOKENS = "INFO GPU KV cache size: 100,000 tokens\n"


def memo_from_log(tmp_path: Path, log: str, *flags: str) -> tuple[int, str, str]:
    path = tmp_path / "vllm.log"
    path.write_text(log)
    result = runner.invoke(
        app,
        [
            "memo",
            "--csv",
            str(SAMPLE_CSV),
            "--chip",
            "H100 SXM",
            "--model",
            "llama-3.1-8b",
            "--model-bytes",
            "16GB",
            "--no-charts",
            "--vllm-log",
            str(path),
            "-o",
            str(tmp_path / "m.md"),
            *flags,
        ],
        env={"COLUMNS": "200"},
    )
    return result.exit_code, result.stdout, " ".join(result.stderr.split())


@pytest.mark.parametrize(
    ("log", "says"),
    [
        (HEAD + "INFO GPU KV cache size: 1 tokens\n", "a cache of 1 token, which cannot hold one"),
        (HEAD + TOKENS + HEAD + "INFO GPU KV cache size: 5 tokens\n", "a cache of 5 tokens, which"),
    ],
    ids=["one-token", "last-of-two"],
)
def test_a_log_cache_that_cannot_hold_one_conversation_is_refused(
    tmp_path: Path, log: str, says: str
) -> None:
    """C28: "**0 conversations at once**" was the memo's headline."""
    code, _, err = memo_from_log(tmp_path, log)
    assert code == 2 and says in err and "max model length 8,192" in err, err
    assert not (tmp_path / "m.md").exists()


def test_a_log_length_past_the_models_context_is_named_as_the_logs(tmp_path: Path) -> None:
    """C28: "--max-len 200,000 is longer than ..." was said where no --max-len was typed."""
    log = TOKENS + "INFO Maximum concurrency for 200,000 tokens per request: 0.50x\n"
    code, _, err = memo_from_log(tmp_path, log)
    assert code == 2 and "vllm.log's max model length 200,000 is longer than" in err, err


@pytest.mark.parametrize("memory", ["0.001", "0", "9.99"])
def test_cache_memory_that_cannot_hold_the_logs_tokens_is_refused(
    tmp_path: Path, memory: str
) -> None:
    """C10: 0.001 GiB beside 100,000 tokens (13.1 GB of Llama 3.1 8B's cache) was quoted; 0 GiB
    was dropped unsaid. 9.99 GiB is 12 GB: a share of it per GPU of a server split in two."""
    log = HEAD + f"INFO Available KV cache memory: {memory} GiB\n" + TOKENS
    code, _, err = memo_from_log(tmp_path, log)
    if memory == "9.99":
        assert code == 0, err
        assert "Memory left for the cache: 9.99 GiB" in (tmp_path / "m.md").read_text()
        return
    assert code == 2 and "of cache memory beside a cache of 100,000 tokens" in err, err
    assert "Llama 3.1 8B takes 131,072 bytes a token" in err


@pytest.mark.parametrize(
    ("weights", "says"),
    [
        ("9999", "the weights took 10,736.34 GB of one GPU's memory, more than the largest"),
        ("100", "the weights took 107.37 GB of one GPU's memory, more than H100 SXM comes"),
        ("0.001", "the weights took 1.07 MB of one GPU's memory, and the model's are 16.0 GB"),
    ],
)
def test_weights_the_gpu_or_model_rule_out_are_refused(
    tmp_path: Path, weights: str, says: str
) -> None:
    """C31: "Weights took 10,736.34 GB" on an H100 (80 GB), and "0.00 GB", were quoted."""
    log = HEAD + f"INFO Model loading took {weights} GiB\n" + TOKENS
    code, _, err = memo_from_log(tmp_path, log)
    assert code == 2 and says in err, err
    assert memo_from_log(tmp_path, HEAD + "INFO Model loading took 14.99 GiB\n" + TOKENS)[0] == 0


FP8 = (
    "INFO Initializing a V1 LLM engine (v0.9.1) with config: dtype=torch.bfloat16, "
    "max_seq_len=8192, kv_cache_dtype=fp8, block_size=16\n" + TOKENS
)


def test_a_kv_dtype_the_log_contradicts_is_refused_as_size_capacity_does(tmp_path: Path) -> None:
    """C20: --kv-dtype f16 beside a log of fp8 was dropped without a word (the memo said fp8)."""
    code, _, err = memo_from_log(tmp_path, FP8, "--kv-dtype", "f16")
    assert code == 2 and "gives the cache type fp8, and --kv-dtype f16 would not be" in err, err
    for agreeing in (("--kv-dtype", "fp8"), ()):
        code, _, err = memo_from_log(tmp_path, FP8, *agreeing)
        assert code == 0, err
        assert "| KV cache type | fp8 |" in (tmp_path / "m.md").read_text()


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        ("block_size=16\nblock_size=32\n", "block_size=16 on line 3 and block_size=32 on line 4"),
        (
            "kv_cache_dtype=fp8, dtype=torch.bfloat16\nkv_cache_dtype=auto\n",
            "kv_cache_dtype=fp8 on line 3 and kv_cache_dtype=auto on line 4",
        ),
    ],
)
def test_two_block_sizes_or_cache_types_for_one_cache_are_refused(
    tmp_path: Path, lines: str, says: str
) -> None:
    """C11: the last was used without a word (blocks of 32 gave 160,000 tokens, 16 80,000)."""
    code, _, err = memo_from_log(tmp_path, HEAD + lines + "INFO # GPU blocks: 5000\n")
    assert code == 2 and says in err, err
