"""Sweep 22 (c) C3, C13 and a tiny --model-bytes: a single GGUF's blocks are counted and held to
its block_count, a config's context aliases are read and their disagreement said, and a size
below a gigabyte is shown in its own unit, not as 0.00 GB."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.sizing.errors import SizingError
from felab_core.sizing.gguf_shape import from_gguf
from felab_core.sizing.hf_config import from_hf_config
from tests.sizing.test_model_shape import write_gguf

runner = CliRunner()
F = np.float32


def _blocks(*numbers: int) -> dict[str, np.ndarray]:
    return {f"blk.{i}.attn_norm.weight": np.zeros((64,), F) for i in numbers}


def test_a_gguf_holding_fewer_blocks_than_its_block_count_is_refused(tmp_path: Path) -> None:
    """C3: block_count 4 beside blk.0 and blk.3 alone had been priced as 4 layers (the highest
    block + 1 was read, not the blocks held); llama.cpp refuses to load it."""
    path = write_gguf(tmp_path / "gap.gguf", layers=4, tensors=_blocks(0, 3), every_block=False)
    with pytest.raises(SizingError) as caught:
        from_gguf(path)
    said = str(caught.value)
    assert "the number of layers disagrees: llama.block_count 4 from the metadata of" in said
    assert "but 2 layers (0 to 3) from the tensors listed in" in said
    short = write_gguf(tmp_path / "short.gguf", layers=32, tensors=_blocks(0, 1), every_block=False)
    result = runner.invoke(app, ["size", "kv", "--gguf", str(short), "-c", "1000"])
    assert result.exit_code == 2, result.output
    assert "llama.block_count 32" in result.output and "layers 0 to 1" in result.output


def test_a_gguf_holding_every_block_still_reads(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", layers=4, tensors=_blocks(0, 1, 2, 3))
    assert from_gguf(path).n_layers == 4


def test_a_folder_s_layers_are_counted_not_numbered(tmp_path: Path) -> None:
    """The same for a Hugging Face folder: layers 0 and 7 alone are 2 layers, not 8."""
    from safetensors.numpy import save_file

    folder = tmp_path / "m"
    folder.mkdir()
    cfg = {"num_hidden_layers": 8, "hidden_size": 64, "num_attention_heads": 4}
    (folder / "config.json").write_text(json.dumps(cfg))
    tensors = {f"model.layers.{i}.input_layernorm.weight": np.zeros((64,), F) for i in (0, 7)}
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(SizingError, match=r"num_hidden_layers 8 from .* 2 layers \(0 to 7\)"):
        from_hf_config(folder)


def _config(tmp_path: Path, **context: object) -> Path:
    cfg = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, **context}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize(
    "key",
    [
        "max_position_embeddings",
        "n_positions",
        "max_seq_len",
        "seq_length",
        "max_sequence_length",
        "model_max_length",
    ],
)
def test_each_context_key_is_read(tmp_path: Path, key: str) -> None:
    """C13: MPT's max_seq_len and Baichuan's model_max_length had been left unread."""
    assert from_hf_config(_config(tmp_path, **{key: 4096})).context_length == 4096


def test_two_context_keys_that_disagree_are_said(tmp_path: Path) -> None:
    """C13: Qwen's first config gives seq_length 8,192 beside max_position_embeddings 32,768;
    the first was taken without a word. Both are said (not refused: both can be honest)."""
    shape = from_hf_config(_config(tmp_path, max_position_embeddings=32768, seq_length=8192))
    assert shape.context_length == 32768
    said = " ".join(shape.notes)
    assert "max_position_embeddings 32768 (read), but seq_length 8192" in said
    agree = from_hf_config(_config(tmp_path, max_position_embeddings=4096, seq_length=4096))
    assert not any("context length" in n for n in agree.notes)


def test_a_tokenizers_no_limit_is_no_context_length(tmp_path: Path) -> None:
    huge = int(1e30)  # transformers' VERY_LARGE_INTEGER in a config copied from a tokenizer's
    assert from_hf_config(_config(tmp_path, model_max_length=huge)).context_length is None
    shape = from_hf_config(_config(tmp_path, max_position_embeddings=4096, model_max_length=huge))
    assert shape.context_length == 4096 and not any("context length" in n for n in shape.notes)


def test_chips_shows_a_small_model_in_its_own_unit(tmp_path: Path) -> None:
    """A 1 MB --model-bytes was headed "ceiling for 0.00 GB"."""
    result = runner.invoke(
        app, ["size", "chips", "--model-bytes", "1MB", "--family", "AMD"], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 0, result.output
    assert "ceiling for 1 MB" in result.output and "0.00 GB" not in result.output
    kv = runner.invoke(app, ["size", "kv", "--model", "llama-3.2-1b", "-c", "16"])
    assert kv.exit_code == 0, kv.output
    assert "0.00 GB" not in kv.output
