"""The memo shows sizes through one function (units.size_text): a small model's weights read
in MB, never '÷ 0.0 GB'; and the speed limit at the planned length prices the cache read with
the weights (--kv-tokens beside --bandwidth had left it out)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from felab_core.reports.memo import MachineSpec, build_memo, render_markdown
from tests.reports.conftest import MAC_INPUTS, gguf_inputs, sample_rows
from tests.sizing.test_model_shape import write_gguf


def test_a_small_models_memo_shows_mb(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "tiny.gguf",
        tensors={"blk.0.attn_q.weight": np.zeros((512, 512), np.float32)},  # 1 MiB
    )
    inputs = gguf_inputs(path)
    text = render_markdown(build_memo(sample_rows(), inputs))
    assert "(273 GB/s ÷ 1.05 MB)" in text
    assert "0.0 GB" not in text and "0.00 GB" not in text


def test_kv_tokens_beside_a_bandwidth_price_the_cache_read() -> None:
    inputs = replace(
        MAC_INPUTS, machines=(MachineSpec(bandwidth="273"),), kv_memory=None, kv_tokens=100_000
    )
    text = render_markdown(build_memo(sample_rows(), inputs))
    assert (
        "A conversation at the planned 8,192 tokens also reads its cache for each token "
        "(8,192 x 128 KiB = 1.07 GB), so there the limit is 273 GB/s ÷ 5.97 GB = about 46 "
        "tokens per second (45.70)." in text
    )
