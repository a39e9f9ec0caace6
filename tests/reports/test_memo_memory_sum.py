"""Weights and cache are summed against the machine's memory on every path (a vLLM log's too),
a Mac is bounded by its own chip, and a machine known only by its bandwidth by a node of the
table's largest (fixer sweep: 95.6 GB on an 80 GB H100, 400 GiB on a 64 GB M4 Pro, and 13 TB of
cache beside --bandwidth had all been planned)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from felab_core.reports.memo import MachineSpec, MemoError, build_memo, render_markdown
from tests.reports.conftest import MAC_INPUTS, sample_rows

H100 = (MachineSpec(chip="H100 SXM"),)


def _log(path: Path, weights_gib: int, kv_gib: int, device: str = "GPU") -> Path:
    tokens = kv_gib * 2**30 // 131_072  # Llama 3.1 8B: 128 KiB a token at f16
    path.write_text(
        f"INFO Model loading took {weights_gib} GiB\n"
        f"INFO Available KV cache memory: {kv_gib} GiB\n"
        f"INFO {device} KV cache size: {tokens:,} tokens\n"
        f"INFO Maximum concurrency for 8,192 tokens per request: {tokens / 8192:.2f}x\n",
        encoding="utf-8",
    )
    return path


def test_a_logs_weights_and_cache_are_summed_against_one_gpu(tmp_path: Path) -> None:
    """16 GiB + 73 GiB, each under 80 GB, together 95.6 GB: more than one H100 holds."""
    inputs = replace(
        MAC_INPUTS, machines=H100, kv_memory=None, vllm_log=_log(tmp_path / "v.log", 16, 73)
    )
    with pytest.raises(MemoError) as caught:
        build_memo(sample_rows(), inputs)
    said = str(caught.value)
    assert "need 95.6 GB, more than H100 SXM comes with (80 GB HBM3)" in said
    assert "17.2 GB, as" in said and "v.log" in said  # the log's own figure, named


def test_a_log_that_fits_still_makes_a_memo(tmp_path: Path) -> None:
    inputs = replace(
        MAC_INPUTS, machines=H100, kv_memory=None, vllm_log=_log(tmp_path / "v.log", 16, 40)
    )
    assert build_memo(sample_rows(), inputs).headline.capacity.tokens > 0


def test_a_mac_cpu_log_is_bounded_by_the_named_chip(tmp_path: Path) -> None:
    """vLLM on a Mac's CPU uses the Mac's memory: 400 GiB is no 64 GB M4 Pro's."""
    log = _log(tmp_path / "mac.log", 15, 400, device="CPU")
    with pytest.raises(MemoError, match=r"more than M4 Pro comes with \(up to 64 GB\)"):
        build_memo(sample_rows(), replace(MAC_INPUTS, kv_memory=None, vllm_log=log))


def test_kv_memory_on_a_mac_is_bounded_by_its_chip_not_a_node_of_them() -> None:
    with pytest.raises(MemoError, match=r"more than M4 Pro \(up to 64 GB\) could hold"):
        build_memo(sample_rows(), replace(MAC_INPUTS, kv_memory="400GiB"))


def test_kv_tokens_beside_a_bandwidth_are_priced() -> None:
    """--kv-tokens with --bandwidth had skipped every memory check: 13 TB of cache planned."""
    inputs = replace(
        MAC_INPUTS, machines=(MachineSpec(bandwidth="273"),), kv_memory=None, kv_tokens=10**8
    )
    with pytest.raises(MemoError) as caught:
        build_memo(sample_rows(), inputs)
    said = str(caught.value)
    assert "a cache of 100,000,000 tokens (13,107.2 GB) need 13,112.1 GB" in said
    assert "8 x M3 Ultra" in said and "--chip" in said


def test_the_memo_says_the_sum_it_checked() -> None:
    text = render_markdown(build_memo(sample_rows(), MAC_INPUTS))
    assert "4.9 GB of weights + 17.2 GB of cache = 22.1 GB" in text
