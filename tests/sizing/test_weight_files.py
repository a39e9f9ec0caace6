"""Which files hold a model's one copy of its weights (twentieth sweep (c) C7, C8, C26, C34)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from felab_core.sizing.errors import SizingError
from felab_core.sizing.gguf_shape import from_gguf, gguf_file_bytes
from felab_core.sizing.hf_config import from_hf_config
from felab_core.sizing.model_shape import weights_summary
from felab_core.sizing.speed_limit import weights_for
from tests.sizing.test_model_shape import LLAMA_31_8B_CONFIG

MB_TENSOR = np.zeros((512, 512), np.float32)  # 1 MiB, past the smallest model's size
SHARD = 512 * 512 * 4
SMALL_CONFIG = {
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_size": 64,
}


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_31_8B_CONFIG))
    return tmp_path


def test_consolidated_beside_the_hf_shards_is_counted_once(tmp_path: Path) -> None:
    """C7: Mistral's downloads hold consolidated.safetensors and the model-* shards: 2x."""
    folder = tmp_path  # a small shape: 2 MB of tensors are no Llama 3.1 8B's
    (folder / "config.json").write_text(json.dumps({**SMALL_CONFIG, "num_hidden_layers": 2}))
    save_file(
        {"layers.0.w": MB_TENSOR, "layers.1.w": MB_TENSOR}, folder / "consolidated.safetensors"
    )
    save_file({"model.layers.0.w": MB_TENSOR}, folder / "model-00001-of-00002.safetensors")
    save_file({"model.layers.1.w": MB_TENSOR}, folder / "model-00002-of-00002.safetensors")
    shape = from_hf_config(folder)
    assert shape.weights_bytes == 2 * SHARD
    assert "consolidated.safetensors is left out" in weights_summary(shape)
    index = {
        "weight_map": {
            "model.layers.0.w": "model-00001-of-00002.safetensors",
            "model.layers.1.w": "model-00002-of-00002.safetensors",
        }
    }
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert from_hf_config(folder).weights_bytes == 2 * SHARD  # the index names the files


def test_a_partial_download_is_refused_naming_the_missing_shards(tmp_path: Path) -> None:
    """C8: 1 of 4 shards was priced as the model, a quarter of its size."""
    folder = _folder(tmp_path)
    save_file({"model.layers.0.w": MB_TENSOR}, folder / "model-00001-of-00004.safetensors")
    with pytest.raises(SizingError, match=re.escape("3 of them are missing (model-00002-of-00004")):
        from_hf_config(folder)
    (folder / "model-00001-of-00004.safetensors").rename(folder / "model.safetensors")
    index = {"weight_map": {"a": "model.safetensors", "b": "extra.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(SizingError, match=re.escape("1 of them is missing (extra.safetensors)")):
        from_hf_config(folder)


def test_git_lfs_pointers_are_named_and_do_not_block_the_kv_cache(tmp_path: Path) -> None:
    """C26: a pointer's text was read as a header claiming 2.3e18 bytes, even for size kv."""
    folder = _folder(tmp_path)
    pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 4976698672\n"
    (folder / "model-00001-of-00001.safetensors").write_text(pointer)
    shape = from_hf_config(folder)  # the KV cache needs only config.json
    assert shape.n_layers == 32
    with pytest.raises(SizingError, match=r"Git LFS pointer, not the weights.*git lfs pull"):
        weights_for(shape)
    (folder / "m.gguf").write_text(pointer)
    with pytest.raises(SizingError, match="is a Git LFS pointer"):
        from_gguf(folder / "m.gguf")


def _split(path: Path, no: int, count: int) -> Path:
    """One shard as llama.cpp's gguf-split writes it: the shape in the first, tensors in all."""
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), "llama")
    if no == 0:
        w.add_block_count(3)
        w.add_head_count(4)
        w.add_head_count_kv(2)
        w.add_embedding_length(64)
    w.add_uint16("split.no", no)
    w.add_uint16("split.count", count)
    w.add_tensor(f"blk.{no}.ffn.weight", MB_TENSOR)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_split_gguf_is_priced_from_all_its_shards(tmp_path: Path) -> None:
    """C34: the first of three shards was priced as the model (speed limit 3x too high)."""
    first = _split(tmp_path / "m-00001-of-00003.gguf", 0, 3)
    _split(tmp_path / "m-00002-of-00003.gguf", 1, 3)
    with pytest.raises(
        SizingError, match=re.escape("1 of them is missing (m-00003-of-00003.gguf)")
    ):
        from_gguf(first)
    with pytest.raises(SizingError, match=re.escape("1 of them is missing")):
        gguf_file_bytes(first)
    _split(tmp_path / "m-00003-of-00003.gguf", 2, 3)
    assert from_gguf(first).weights_bytes == 3 * SHARD
    sizes = sum(p.stat().st_size for p in tmp_path.glob("m-*.gguf"))
    assert gguf_file_bytes(first) == sizes
    with pytest.raises(SizingError, match="is shard 2 of a GGUF split into 3 files"):
        from_gguf(tmp_path / "m-00002-of-00003.gguf")
