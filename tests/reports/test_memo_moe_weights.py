"""The memo's speed limit for a mixture of experts reads the active experts' share of the model
file, as `size limit` does (twentieth sweep (c) C18: it divided by the whole file, 4-10x low,
and real runs above that were called impossible)."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from felab_core.reports.memo import MemoError, build_memo
from felab_core.sizing import speed_limit
from felab_core.sizing.gguf_shape import from_gguf
from felab_core.sizing.known_models import known_model
from tests.reports.conftest import MAC_INPUTS, gguf_inputs, sample_rows
from tests.sizing.test_model_shape import write_gguf


def test_model_bytes_of_a_mixture_are_read_at_the_active_share() -> None:
    inputs = replace(MAC_INPUTS, model="qwen3-30b-a3b", model_bytes="18.6GB")
    memo = build_memo(sample_rows(), inputs)
    shape = known_model("qwen3-30b-a3b")
    assert shape.params_active and shape.params_total
    assert memo.weights == Fraction(18_600_000_000 * shape.params_active, shape.params_total)
    assert "8 of 128 experts" in memo.weights_note


def test_a_mixture_s_whole_file_must_still_fit_the_machine() -> None:
    """Every expert is held in memory though a token reads a few: 61 GB + 16 GiB > 64 GB."""
    inputs = replace(MAC_INPUTS, model="qwen3-30b-a3b", model_bytes="61GB")
    with pytest.raises(MemoError, match="61"):
        build_memo(sample_rows(), inputs)


def test_a_mixture_gguf_gives_the_memo_the_speed_limit_size_limit_gives(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "moe.gguf",
        experts=8,
        used=2,
        tensors={
            "blk.0.attn_q.weight": np.zeros((256, 256), np.float32),
            "blk.0.ffn_up_exps.weight": np.zeros((8, 256, 256), np.float32),
        },
    )
    inputs = gguf_inputs(path)
    memo = build_memo(sample_rows(), inputs)
    shape = from_gguf(path)
    read, _ = speed_limit.weights_for(shape)
    assert memo.weights == read  # the tensors' active share, as `size limit` reads it
    assert memo.weights < path.stat().st_size / 2
