"""Sweep 22 (c) C5, C21: the log's weights are held to the model's, and a CPU server's log is not
summed beside a GPU chip's memory unchecked."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from felab_core.reports.memo import MachineSpec, MemoError, MemoInputs, build_memo, render_markdown
from tests.reports.conftest import MAC_INPUTS, sample_rows

H100 = (MachineSpec(chip="H100 SXM"),)


def _log(path: Path, weights: str, kv_gib: int, device: str = "GPU") -> Path:
    tokens = kv_gib * 2**30 // 131_072  # Llama 3.1 8B: 128 KiB a token at f16
    path.write_text(
        f"INFO Model loading took {weights}\n"
        f"INFO Available KV cache memory: {kv_gib} GiB\n"
        f"INFO {device} KV cache size: {tokens:,} tokens\n"
        f"INFO Maximum concurrency for 8,192 tokens per request: {tokens / 8192:.2f}x\n",
        encoding="utf-8",
    )
    return path


def _inputs(log: Path) -> MemoInputs:
    return replace(
        MAC_INPUTS, machines=H100, model_bytes=None, bits_per_weight="16", kv_memory=None,
        vllm_log=log,
    )  # fmt: skip


def test_a_logs_weights_far_below_the_models_are_refused(tmp_path: Path) -> None:
    """C5: "Model loading took 1.00 GiB" beside 16.06 GB of weights on one GPU (its cache
    memory beside its tokens says one): the sum had taken 1.1 GB, the speed limit 16.06 GB."""
    with pytest.raises(
        MemoError, match=r"the weights on one GPU disagrees: 1\.07 GB from .*16\.06"
    ):
        build_memo(sample_rows(), _inputs(_log(tmp_path / "lie.log", "1.00 GiB", 40)))


def test_a_logs_weights_that_match_the_model_still_make_a_memo(tmp_path: Path) -> None:
    log = _log(tmp_path / "ok.log", "14.99 GiB", 40)
    assert build_memo(sample_rows(), _inputs(log)).headline.capacity.tokens > 0


def test_a_cpu_servers_log_beside_a_gpu_chip_is_refused(tmp_path: Path) -> None:
    """C21: 429.5 GB of a CPU server's cache was shown beside an H100's 80 GB, unchecked."""
    log = _log(tmp_path / "cpu.log", "14.99 GiB", 400, device="CPU")
    with pytest.raises(MemoError, match=r"CPU server's log .* --chip names H100 SXM, a GPU"):
        build_memo(sample_rows(), _inputs(log))


def test_a_logs_tensor_parallel_size_divides_the_models_weights(tmp_path: Path) -> None:
    """C5: the log's weights are one GPU's share; tensor_parallel_size=2 halves the model's."""
    path = _log(tmp_path / "tp.log", "7.50 GiB", 40)
    text = path.read_text(encoding="utf-8")
    config = "INFO Initializing a V1 LLM engine (v0.9.1) with config: tensor_parallel_size=2\n"
    path.write_text(config + text, encoding="utf-8")
    assert build_memo(sample_rows(), _inputs(path)).headline.capacity.tokens > 0
    path.write_text(config.replace("=2", "=8") + text, encoding="utf-8")
    with pytest.raises(MemoError, match=r"over 8 GPUs, its tensor x pipeline parallel size"):
        build_memo(sample_rows(), _inputs(path))


def test_typed_model_bytes_far_from_the_logs_weights_are_said(tmp_path: Path) -> None:
    """C5: --model-bytes 4.9GB (a 4-bit copy) beside "Model loading took 14.99 GiB" on one GPU
    passed without a word (the typed size may be another server's quantized copy: said, not
    refused)."""
    log = _log(tmp_path / "bf16.log", "14.99 GiB", 40)
    typed = replace(_inputs(log), model_bytes="4.9GB", bits_per_weight=None)
    memo = build_memo(sample_rows(), typed)
    said = " ".join(memo.memory_notes)
    assert "the weights on one GPU disagrees: 16.10 GB from" in said
    assert "4.90 GB (4.90 GB over 1 GPU" in said and "--model-bytes for" in said
    assert said in render_markdown(memo)
    same = replace(typed, model_bytes="16GB")
    assert build_memo(sample_rows(), same).memory_notes == ()
