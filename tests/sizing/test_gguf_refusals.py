"""A file named with --gguf that is not one, or is cut short, is said in felab's words: never
the GGUF reader's or numpy's error text (`ValueError: GGUF magic invalid`)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.sizing.errors import SizingError
from felab_core.sizing.gguf_shape import from_gguf
from tests.sizing.test_model_shape import write_gguf

runner = CliRunner()
NOT_GGUF = "is not a GGUF file (it does not start with GGUF)"


def refusal(path: Path) -> str:
    with pytest.raises(SizingError) as caught:
        from_gguf(path)
    message = str(caught.value)
    assert "Error" not in message and "magic" not in message, message
    return message


@pytest.mark.parametrize(
    "content",
    [b'{"prompt": "hi"}\n', b"", b"GGU", b"\x00\x00\x00\x00GGUF"],
    ids=["jsonl", "empty", "three-bytes", "magic-later"],
)
def test_a_file_that_does_not_start_with_gguf(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "some.jsonl"
    path.write_bytes(content)
    message = refusal(path)
    assert message.startswith(f"{path} {NOT_GGUF}")
    assert "--config" in message


@pytest.mark.parametrize("keep", [4, 10, 30, 200])
def test_a_cut_short_gguf_is_called_damaged(tmp_path: Path, keep: int) -> None:
    whole = write_gguf(tmp_path / "whole.gguf").read_bytes()
    part = tmp_path / "part.gguf"
    part.write_bytes(whole[:keep])
    message = refusal(part)
    assert message.startswith(f"cannot read {part} as a GGUF model: it starts with GGUF")
    assert "download" in message


def test_an_unknown_gguf_version_is_named(tmp_path: Path) -> None:
    whole = write_gguf(tmp_path / "whole.gguf").read_bytes()
    later = tmp_path / "v9.gguf"
    later.write_bytes(whole[:4] + (9).to_bytes(4, "little") + whole[8:])
    assert refusal(later).startswith(f"{later} is GGUF version 9, and felab reads versions 2 and 3")


def test_a_real_gguf_still_reads(tmp_path: Path) -> None:
    assert from_gguf(write_gguf(tmp_path / "m.gguf")).name == "test-model"


def test_size_limit_says_not_a_gguf_file_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "some.jsonl"
    path.write_text('{"prompt": "hi"}\n', encoding="utf-8")
    result = runner.invoke(
        app, ["size", "limit", "--gguf", str(path), "--chip", "M4 Pro"], env={"COLUMNS": "300"}
    )
    assert result.exit_code == 2, result.output
    assert NOT_GGUF in result.stderr
    assert "ValueError" not in result.output + result.stderr


@pytest.mark.parametrize(
    ("key", "value"),
    [("llama.embedding_length", 64.7), ("llama.attention.head_count", 4.5)],
    ids=["hidden-fraction", "heads-fraction"],
)
def test_a_count_that_is_not_whole_is_refused_not_rounded(
    tmp_path: Path, key: str, value: float
) -> None:
    import numpy as np
    from gguf import GGUFWriter

    path = tmp_path / "odd.gguf"
    w = GGUFWriter(str(path), "llama")
    w.add_name("odd")
    w.add_block_count(2)
    if key != "llama.attention.head_count":
        w.add_head_count(4)
    w.add_head_count_kv(2)
    if key != "llama.embedding_length":
        w.add_embedding_length(64)
    w.add_float32(key, value)
    w.add_tensor("blk.0.attn_q.weight", np.zeros((64, 64), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    message = refusal(path)
    assert key in message and "whole number" in message, message


def _no_tensors(path: Path) -> Path:
    return write_gguf(path, tensors={})


def test_a_file_with_no_tensors_has_unknown_weights_not_zero(tmp_path: Path) -> None:
    """Shape keys but no weights: the weights were shown as 0 bytes, and the speed limit
    said "more than zero (got 0.0000)"."""
    shape = from_gguf(_no_tensors(tmp_path / "vocab.gguf"))
    assert shape.weights_bytes is None and shape.active_weights_bytes is None
    assert any("lists no tensors" in note and "--model-bytes" in note for note in shape.notes)


def test_a_key_written_twice_is_named(tmp_path: Path) -> None:
    """The reader's KeyError read as "damaged or cut short; download again"."""
    import struct

    data = bytearray(_no_tensors(tmp_path / "one.gguf").read_bytes())
    tensors, keys = struct.unpack_from("<QQ", data, 8)
    (length,) = struct.unpack_from("<Q", data, 24)  # general.architecture, a string value
    value_at = 24 + 8 + length + 4
    (value_length,) = struct.unpack_from("<Q", data, value_at)
    first = bytes(data[24 : value_at + 8 + value_length])
    twice = tmp_path / "twice.gguf"
    twice.write_bytes(data[:8] + struct.pack("<QQ", tensors, keys + 1) + first + data[24:])
    message = refusal(twice)
    assert "names the metadata key general.architecture twice" in message, message
    assert "convert the model again" in message


@pytest.mark.parametrize(("item", "count"), [(4, 10**7), (4, 2**62), (8, 2**62), (9, 2**40)])
def test_an_array_longer_than_the_file_is_refused_at_once(
    tmp_path: Path, item: int, count: int
) -> None:
    """Twelfth sweep (H1): a 49-byte GGUF claiming an array of 10^7 numbers ran the reader
    until memory ran out (numbers were not held to the file's size; strings were)."""
    path = tmp_path / "hostile.gguf"
    key = struct.pack("<Q", 5) + b"a.b.c" + struct.pack("<I", 9)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + key + struct.pack("<IQ", item, count))
    message = refusal(path)
    assert "claims more metadata than the file holds" in message


def test_experts_used_past_the_experts_are_refused(tmp_path: Path) -> None:
    """Fifteenth sweep M2: "100 of 8 experts" was read and set a speed limit."""
    path = write_gguf(tmp_path / "moe.gguf", experts=8, used=100)
    assert "llama.expert_used_count" not in refusal(path)  # both are whole numbers
    assert "100 experts used per token, but the model has 8" in refusal(path)


@pytest.mark.parametrize(
    ("experts", "used", "says"),
    [
        (8, 0, "llama.expert_used_count is 0, but the model has 8 experts: a token uses 1 to 8"),
        (0, 2, "2 experts used per token, but the model has 0"),
    ],
)
def test_an_expert_count_of_zero_beside_experts_is_refused(
    tmp_path: Path, experts: int, used: int, says: str
) -> None:
    """Eighteenth sweep (c) L2: 0 of 8 experts (or 2 of 0) read as "not a mixture of experts"
    without a word, where config.json refuses the same; llama.cpp refuses both too."""
    assert says in refusal(write_gguf(tmp_path / "m.gguf", experts=experts, used=used))


def test_zero_experts_of_zero_is_a_dense_model(tmp_path: Path) -> None:
    """llama.cpp reads expert_count 0 with expert_used_count 0 as a dense model: so does felab."""
    shape = from_gguf(write_gguf(tmp_path / "m.gguf", experts=0, used=0))
    assert not shape.is_moe and shape.n_experts is None


@pytest.mark.parametrize(
    ("heads", "kv_heads", "says"),
    [
        ([4, 0], 2, "layer 1 has 0 query heads but 2 KV heads"),
        ([4, 4, 4], 2, "llama.attention.head_count lists 3 layers' counts for 2 layers"),
        (4, [2, 2, 2], "llama.attention.head_count_kv lists 3 layers' counts for 2 layers"),
    ],
    ids=["zero-head-layer", "heads-length", "kv-length"],
)
def test_per_layer_head_counts_are_held_to_the_layers(
    tmp_path: Path, heads: int | list[int], kv_heads: int | list[int], says: str
) -> None:
    """Eighteenth sweep (c) L2: a per-layer head_count ([4, 0]) beside one KV count was read as
    its largest, and a list of even counts was not held to the layer count."""
    path = write_gguf(tmp_path / "m.gguf", heads=heads, kv_heads=kv_heads)  # type: ignore[arg-type]
    assert says in refusal(path)
