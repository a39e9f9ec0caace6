"""Sweep 22 (c) C19: memo --config/--gguf with --model-bytes holds the typed size to the tensors'
parameter count, as memo --model holds it to the table's (1 GB for 8B weights had been used)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from felab_core.reports.memo import MemoError, MemoInputs, build_memo
from tests.reports.conftest import gguf_inputs, sample_rows
from tests.sizing.test_model_shape import write_gguf


def _inputs(path: Path, size: str) -> MemoInputs:
    return gguf_inputs(path, size)


def _gguf(tmp_path: Path) -> Path:
    tensors = {"blk.0.attn_q.weight": np.zeros((512, 512), np.float32)}  # 262,144 weights
    return write_gguf(tmp_path / "tiny.gguf", tensors=tensors)


def test_a_typed_size_the_tensors_rule_out_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        MemoError,
        match=r"size disagrees: 4\.9 GB from --model-bytes, but 1\.05 MB from the tensors of",
    ):
        build_memo(sample_rows(), _inputs(_gguf(tmp_path), "4.9GB"))


def test_a_typed_size_the_tensors_allow_still_reads(tmp_path: Path) -> None:
    memo = build_memo(sample_rows(), _inputs(_gguf(tmp_path), "1.05MB"))
    assert memo.headline.capacity.tokens > 0
