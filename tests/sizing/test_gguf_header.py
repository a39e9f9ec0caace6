"""felab's own GGUF header walker reads what the gguf package's reader reads, steps over the
arrays felab never needs (a tokenizer's vocabulary), and refuses a header that lies about its
tensors. Fifteenth sweep H8: the package's reader took 9 s and 700 MB on a Llama 3 tokenizer."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter

from felab_core.sizing.errors import SizingError
from felab_core.sizing.gguf_header import GGUFHeaderError, read_header
from felab_core.sizing.gguf_shape import from_gguf
from tests.sizing.test_model_shape import write_gguf


def _package_fields(path: Path) -> dict[str, Any]:
    reader = GGUFReader(str(path), "r")
    out = {}
    for name, fld in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        value = fld.contents()
        out[name] = value.tolist() if hasattr(value, "tolist") else value
    return out


def _quantised(path: Path) -> Path:
    """Tensors of several types, so n_bytes goes through the block sizes (Q4_0: 32 per 18 B)."""
    w = GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_head_count(4)
    w.add_head_count_kv([2, 4])
    w.add_embedding_length(64)
    w.add_float32("llama.rope.freq_base", 500000.0)
    w.add_bool("felab.flag", True)
    w.add_array("felab.tokens", ["a", "bb", ""])
    w.add_array("felab.long", list(range(5000)))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((64, 64), np.float32))
    w.add_tensor("blk.0.ffn.weight", np.zeros((64, 64), np.float16))
    q4 = np.zeros((64, 64 // 32 * 18), np.uint8)  # raw Q4_0 blocks: 64 x 64 weights
    w.add_tensor("blk.1.attn_q.weight", q4, raw_dtype=GGMLQuantizationType.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("make", [write_gguf, _quantised], ids=["plain", "quantised"])
def test_the_walker_reads_what_the_package_reads(tmp_path: Path, make: Any) -> None:
    path = make(tmp_path / "m.gguf")
    header = read_header(path)
    for name, expected in _package_fields(path).items():
        if isinstance(expected, list) and (len(expected) > 4096 or isinstance(expected[0], str)):
            with pytest.raises(GGUFHeaderError, match="an array of"):
                header.value(name)  # stepped over, never needed for a shape
        else:
            assert header.value(name) == pytest.approx(expected), name
    package = {t.name: int(t.n_bytes) for t in GGUFReader(str(path), "r").tensors}
    assert {t.name: t.n_bytes for t in header.tensors} == package


def test_a_big_endian_file_reads(tmp_path: Path) -> None:
    from gguf import GGUFEndian

    path = tmp_path / "be.gguf"
    w = GGUFWriter(str(path), "llama", endianess=GGUFEndian.BIG)
    w.add_block_count(3)
    w.add_head_count(4)
    w.add_tensor("blk.0.attn_q.weight", np.zeros((8, 8), np.float32).byteswap())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    header = read_header(path)
    assert header.value("llama.block_count") == 3
    assert [t.n_bytes for t in header.tensors] == [256]


def _header(*pairs: bytes, tensors: tuple[bytes, ...] = (), tail: bytes = b"") -> bytes:
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(pairs))
    return head + b"".join(pairs) + b"".join(tensors) + tail


def _text_pair(key: str, value: bytes) -> bytes:
    name = key.encode()
    return struct.pack("<Q", len(name)) + name + struct.pack("<IQ", 8, len(value)) + value


def _tensor(name: str, dims: tuple[int, ...], kind: int = 0, offset: int = 0) -> bytes:
    raw = name.encode()
    shape = struct.pack(f"<I{len(dims)}Q", len(dims), *dims)
    return struct.pack("<Q", len(raw)) + raw + shape + struct.pack("<IQ", kind, offset)


def test_a_tensor_past_the_end_of_the_file_is_damage(tmp_path: Path) -> None:
    """The header lists a 4 MB tensor; the file stops after the header (a cut-short copy)."""
    path = tmp_path / "cut.gguf"
    path.write_bytes(
        _header(_text_pair("general.architecture", b"llama"), tensors=(_tensor("w", (1024, 1024)),))
    )
    with pytest.raises(SizingError, match="tensor 'w' runs past the end of the file"):
        from_gguf(path)


def test_an_unknown_tensor_type_is_named(tmp_path: Path) -> None:
    path = tmp_path / "new.gguf"
    path.write_bytes(
        _header(_text_pair("general.architecture", b"llama"), tensors=(_tensor("w", (4,), 999),))
    )
    with pytest.raises(SizingError, match="type number 999, which felab's gguf package"):
        from_gguf(path)


def test_too_many_dimensions_are_damage(tmp_path: Path) -> None:
    path = tmp_path / "dims.gguf"
    path.write_bytes(
        _header(_text_pair("general.architecture", b"llama"), tensors=(_tensor("w", (1,) * 9),))
    )
    with pytest.raises(SizingError, match="claims 9 dimensions"):
        from_gguf(path)


def test_an_architecture_that_is_not_utf8_is_refused_with_the_file(tmp_path: Path) -> None:
    """Fifteenth sweep L5: "a file is not UTF-8", without saying which file or key."""
    path = tmp_path / "bad.gguf"
    path.write_bytes(_header(_text_pair("general.architecture", b"ll\xffama")))
    with pytest.raises(SizingError) as caught:
        from_gguf(path)
    assert str(caught.value).startswith(f"{path}: general.architecture is not UTF-8 text")


def test_a_name_that_is_not_utf8_gives_way_to_the_file_name(tmp_path: Path) -> None:
    good = write_gguf(tmp_path / "good.gguf").read_bytes()
    named = good.replace(b"test-model", b"test-mod\xff\xfe", 1)
    path = tmp_path / "my-model.gguf"
    path.write_bytes(named)
    assert from_gguf(path).name == "my-model"


def test_a_tokenizer_sized_vocabulary_is_stepped_over(tmp_path: Path) -> None:
    """200,000 strings: kept by nobody, walked by their lengths (the package made a numpy view
    per string). Speed is measured in benchmarks/gguf_header.py, not asserted here."""
    path = tmp_path / "vocab.gguf"
    w = GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_head_count(4)
    w.add_embedding_length(64)
    w.add_token_list([b"t%d" % i for i in range(200_000)])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    header = read_header(path)
    assert header.fields["tokenizer.ggml.tokens"].what == "an array of 200,000 items"
    assert from_gguf(path).n_layers == 2


def test_a_text_value_cut_short_is_damage(tmp_path: Path) -> None:
    data = _header(_text_pair("general.architecture", b"llama"))
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:-2] + b"\x00" * 0)
    with pytest.raises(SizingError, match="claims more metadata than the file holds"):
        from_gguf(path)


@pytest.mark.parametrize("align", [0, 3, 48])
def test_an_alignment_that_is_not_a_power_of_two_is_refused(tmp_path: Path, align: int) -> None:
    key = b"general.alignment"
    pair = struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, align)
    path = tmp_path / "align.gguf"
    path.write_bytes(_header(_text_pair("general.architecture", b"llama"), pair))
    with pytest.raises(SizingError, match=r"general\.alignment"):
        from_gguf(path)


# --- the sixteenth sweep (group c), on the walker's first version ---------------------------


def _u32(key: str, value: int, kind: int = 4) -> bytes:
    name = key.encode()
    return (
        struct.pack("<Q", len(name))
        + name
        + struct.pack("<I", kind)
        + struct.pack("<" + {4: "I", 5: "i", 12: "d"}[kind], value)
    )


def _array(key: str, item: int, values: list[int]) -> bytes:
    name = key.encode()
    code = {4: "I", 5: "i", 10: "Q"}[item]
    body = struct.pack(f"<{len(values)}{code}", *values)
    return struct.pack("<Q", len(name)) + name + struct.pack("<IIQ", 9, item, len(values)) + body


def _model(tmp_path: Path, *extra: bytes, hidden: int = 512, name: str = "m.gguf") -> Path:
    """A small llama GGUF with real tensor bytes; a pair in `extra` replaces the base key."""
    base = (
        _text_pair("general.architecture", b"llama"),
        _u32("llama.block_count", 4),
        _u32("llama.attention.head_count", 8),
        _u32("llama.attention.head_count_kv", 2),
        _u32("llama.embedding_length", hidden),
    )

    def key(pair: bytes) -> bytes:
        return pair[8 : 8 + struct.unpack_from("<Q", pair)[0]]

    given = {key(p) for p in extra}
    pairs = (*(p for p in base if key(p) not in given), *extra)
    head = _header(*pairs, tensors=(_tensor("w", (512, 512)),))
    data = head + b"\0" * (-len(head) % 32) + b"\0" * (512 * 512 * 4)
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_the_base_model_reads(tmp_path: Path) -> None:
    shape = from_gguf(_model(tmp_path))
    assert (shape.n_layers, shape.n_kv_heads, shape.head_dim_k) == (4, 2, 64)
    assert shape.weights_bytes == 512 * 512 * 4


@pytest.mark.parametrize(
    "file_type",
    [_array("general.file_type", 4, [1, 2]), _u32("general.file_type", float("inf"), 12)],  # type: ignore[arg-type]
    ids=["array", "infinity"],
)
def test_a_file_type_that_is_not_a_number_is_ignored(tmp_path: Path, file_type: bytes) -> None:
    """H1: exit 70 (TypeError / OverflowError) on every --gguf command."""
    assert from_gguf(_model(tmp_path, file_type)).weights_dtype is None


@pytest.mark.parametrize(
    ("kv", "says"),
    [
        (_array("llama.attention.head_count_kv", 5, [2, -2, 2, 2]), "holds -2 for a layer"),
        (_array("llama.attention.head_count_kv", 10, [2, 2**62, 2, 2]), "for a layer"),
        (_array("llama.attention.head_count_kv", 4, [2, 1000, 2, 2]), "layer 1 has 1,000 KV heads"),
        (_array("llama.attention.head_count_kv", 4, [2, 3, 2, 2]), "(layer 1): 8 query heads"),
        (_array("llama.attention.head_count", 5, [8, -8, 8, 8]), "holds -8 for a layer"),
    ],
    ids=["negative", "huge", "above-query-heads", "uneven", "negative-query-heads"],
)
def test_per_layer_head_counts_are_held_to_the_shape(tmp_path: Path, kv: bytes, says: str) -> None:
    """H2/L1: -2, 2^62 and 1,000 KV heads per layer were priced (a negative layer subtracted)."""
    with pytest.raises(SizingError, match=re.escape(says)):
        from_gguf(_model(tmp_path, kv))


@pytest.mark.parametrize("hidden", [3, 513])
def test_a_width_that_does_not_split_over_the_heads_is_refused(tmp_path: Path, hidden: int) -> None:
    """H3/M1: 3 over 8 heads gave 0-number heads and a 0-byte cache; 513 was floored."""
    with pytest.raises(SizingError, match=f"embedding_length {hidden} does not split evenly"):
        from_gguf(_model(tmp_path, hidden=hidden))


def test_tensors_that_share_bytes_are_refused(tmp_path: Path) -> None:
    """H4: 1,000 tensors at offset 0 of a 1 MiB file were priced as 1 GB of weights."""
    head = _header(
        _text_pair("general.architecture", b"llama"),
        tensors=(_tensor("a", (512, 512)), _tensor("b", (512, 512), offset=4096)),
    )
    path = tmp_path / "overlap.gguf"
    path.write_bytes(head + b"\0" * (-len(head) % 32) + b"\0" * (512 * 512 * 4 + 4096))
    with pytest.raises(SizingError, match="its tensors 'a' and 'b' share bytes"):
        from_gguf(path)
    twice = _header(
        _text_pair("general.architecture", b"llama"),
        tensors=(_tensor("same", (8,)), _tensor("same", (8,), offset=32)),
    )
    path.write_bytes(twice + b"\0" * 4096)
    with pytest.raises(SizingError, match="lists the tensor 'same' twice"):
        from_gguf(path)


@pytest.mark.parametrize(
    ("pair", "says"),
    [
        (b"\x01\x00\x00\x00\x00\x00\x00\x00x" + struct.pack("<I", 13), "value type 13"),
        (_u32("general.alignment", 3), "not a power of two"),
    ],
    ids=["unknown-type", "alignment"],
)
def test_a_file_written_wrongly_is_not_called_a_partial_download(
    tmp_path: Path, pair: bytes, says: str
) -> None:
    """M2: "download the .gguf file again" for a value type GGUF does not define."""
    with pytest.raises(SizingError) as caught:
        from_gguf(_model(tmp_path, pair))
    message = str(caught.value)
    assert says in message and "convert the model again" in message, message
    assert "partial copy" not in message, message


def test_a_crafted_header_of_honest_counts_meets_a_budget(tmp_path: Path) -> None:
    """H5: 34 million empty nested arrays (409 MB, counts all true) ran past 30 s. Here 9
    million in 108 MB: refused by count, before they are walked."""
    name = b"nested"
    count = 9_000_000
    pair = struct.pack("<Q", len(name)) + name + struct.pack("<IIQ", 9, 9, count)
    path = tmp_path / "nested.gguf"
    with path.open("wb") as fh:
        fh.write(_header(_text_pair("general.architecture", b"llama"), pair))
        fh.write(struct.pack("<IQ", 0, 0) * count)  # each: an array of 0 uint8
    with pytest.raises(SizingError, match="more than 8,000,000 strings and arrays in arrays"):
        from_gguf(path)


def test_a_header_of_tiny_tensors_is_not_called_a_typo(tmp_path: Path) -> None:
    """M3: 4 bytes of tensors gave advice about --model-bytes units the user never typed."""
    from felab_core.sizing.speed_limit import weights_for

    path = tmp_path / "header.gguf"
    head = _header(
        _text_pair("general.architecture", b"llama"),
        _u32("llama.block_count", 4),
        _u32("llama.attention.head_count", 8),
        _u32("llama.embedding_length", 512),
        tensors=(_tensor("w", ()),),
    )
    path.write_bytes(head + b"\0" * 64)
    with pytest.raises(SizingError, match="hold 4 bytes, no model's weights"):
        weights_for(from_gguf(path))


def _u32_pair(key: str, value: int) -> bytes:
    name = key.encode()
    return struct.pack("<Q", len(name)) + name + struct.pack("<II", 4, value)


def _u32_array_pair(key: str, values: list[int]) -> bytes:
    name = key.encode()
    body = struct.pack(f"<{len(values)}I", *values)
    return struct.pack("<Q", len(name)) + name + struct.pack("<IIQ", 9, 4, len(values)) + body


def test_an_architecture_that_is_a_number_is_named_not_called_missing(tmp_path: Path) -> None:
    """Seventeenth sweep (c) M2: "has no general.architecture key ... a LoRA adapter?"."""
    path = tmp_path / "arch.gguf"
    path.write_bytes(_header(_u32_pair("general.architecture", 5)))
    said = r"general\.architecture is 5, not an architecture's name"
    with pytest.raises(SizingError, match=said):
        from_gguf(path)


def test_shape_keys_that_are_arrays_are_said_by_their_length(tmp_path: Path) -> None:
    """Seventeenth sweep (c) L2, L3: 4,000 numbers were echoed (23 kB), [] was "lacks"."""
    arch = _text_pair("general.architecture", b"llama")
    long = tmp_path / "long.gguf"
    long.write_bytes(
        _header(arch, _u32_array_pair("llama.block_count", list(range(1, 4001))),
                _u32_pair("llama.attention.head_count", 4))
    )  # fmt: skip
    with pytest.raises(SizingError, match="block_count is an array of 4,000 items") as caught:
        from_gguf(long)
    assert len(str(caught.value)) < 300
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(
        _header(arch, _u32_pair("llama.block_count", 2),
                _u32_array_pair("llama.attention.head_count", []))
    )  # fmt: skip
    with pytest.raises(SizingError, match="head_count is an empty array"):
        from_gguf(empty)


def test_a_name_that_is_a_number_gives_way_to_the_file_s(tmp_path: Path) -> None:
    """Seventeenth sweep (c) L5: general.name 7 titled the table "KV cache: 7"."""
    path = write_gguf(tmp_path / "named.gguf")
    raw = path.read_bytes()
    key = b"general.name"
    at = raw.index(key) + len(key)  # its type (8, a string) becomes 4 (uint32), its value 7
    (length,) = struct.unpack_from("<Q", raw, at + 4)
    path.write_bytes(raw[:at] + struct.pack("<II", 4, 7) + raw[at + 12 + length :])
    assert from_gguf(path).name == "named"
