"""A safetensors header is believed only where it agrees with itself and its file (the
sixteenth sweep, group c: H6-H8, L2, M4)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from felab_core.sizing.errors import SizingError
from felab_core.sizing.hf_config import from_hf_config
from felab_core.sizing.safetensors_header import tensor_bytes
from felab_core.sizing.speed_limit import weights_for

CONFIG = {
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "hidden_size": 512,
}

#: A shape 200 kB of weights can hold (4 layers of width 512 hold 2.6M attention weights).
SMALL = {
    "num_hidden_layers": 1,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "hidden_size": 64,
}


def _write(path: Path, header: Any, data: int = 0, raw: bytes | None = None) -> Path:
    body = raw if raw is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(body)) + body + b"\0" * data)
    return path


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    return folder


def _refusal(files: list[Path]) -> str:
    with pytest.raises(SizingError) as caught:
        tensor_bytes(files)
    return str(caught.value)


def test_a_true_header_reads(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "a.safetensors",
        {
            "__metadata__": {"format": "pt"},
            "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
            "b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]},
            "e": {"dtype": "F32", "shape": [0], "data_offsets": [32, 32]},
        },
        data=32,
    )
    assert tensor_bytes([path]) == {"w": 24, "b": 8, "e": 0}


def test_offsets_past_the_file_are_refused(tmp_path: Path) -> None:
    """H7: 80 bytes claiming 16 GB were priced as a 16 GB model."""
    path = _write(
        tmp_path / "lie.safetensors",
        {"a": {"dtype": "X9", "shape": [2], "data_offsets": [0, 16_000_000_000]}},
    )
    assert "ends at byte 16,000,000,000 of the data, and the file holds 0" in _refusal([path])


def test_tensors_sharing_bytes_are_refused(tmp_path: Path) -> None:
    """H7: 1,000 tensors all at [0, 16000000] counted as 1,000 tensors' bytes."""
    header = {f"t{i}": {"dtype": "U8", "shape": [64], "data_offsets": [0, 64]} for i in range(3)}
    path = _write(tmp_path / "same.safetensors", header, data=64)
    assert "tensors t0 and t1 share bytes" in _refusal([path])


def test_a_shape_that_disagrees_with_the_offsets_is_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "shape.safetensors",
        {"a": {"dtype": "F32", "shape": [2**40], "data_offsets": [0, 0]}},
    )
    assert "tensor a is F32 [1099511627776], 4,398,046,511,104 bytes" in _refusal([path])


@pytest.mark.parametrize(
    ("dims", "says"),
    [
        (16, "more bytes than any file, but its offsets span 0"),  # 2**992: a float overflowed
        (17, "(17 dimensions)"),
        (100_000, "(100,000 dimensions)"),  # math.prod of them ran past 30 s
    ],
)
def test_a_shape_of_many_huge_dimensions_is_refused_quickly(
    tmp_path: Path, dims: int, says: str
) -> None:
    """Seventeenth sweep (c) H2, H3: exit 70 (OverflowError), and a hang."""
    path = _write(
        tmp_path / "dims.safetensors",
        {"w": {"dtype": "F16", "shape": [2**62] * dims, "data_offsets": [0, 0]}},
    )
    assert says in _refusal([path])


@pytest.mark.parametrize("architectures", [5, {"x": 1}, "Llama", [""], [7]])
def test_a_config_whose_architectures_is_no_list_of_names_names_no_model_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, architectures: Any
) -> None:
    """Seventeenth sweep (c) H1, L1: a config named relatively (no folder name) indexed its
    architectures: exit 70 for a number or a mapping, "L" for a string."""
    (tmp_path / "config.json").write_text(json.dumps({**CONFIG, "architectures": architectures}))
    monkeypatch.chdir(tmp_path)
    assert from_hf_config(Path("config.json")).name == "model"


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    """H6: a FIFO named x.safetensors hung --config for good."""
    folder = _folder(tmp_path)
    os.mkfifo(folder / "x.safetensors")
    with pytest.raises(SizingError, match="not a regular file"):
        from_hf_config(folder)


def test_a_header_past_the_budget_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """H8: a 94 MB header took 15 s and 1.4 GB; felab reads 16 MiB a file."""
    path = tmp_path / "big.safetensors"
    path.write_bytes(struct.pack("<Q", 17 * 1024 * 1024) + b" " * 64)
    assert "its header claims 17,825,792 bytes (felab reads up to 16 MiB" in _refusal([path])


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b'{"a": {"data_offsets": [0, 1' + b"0" * 5000 + b"]}}", "a number of thousands of digits"),
        (b"[" * 100_000, "nested too deeply"),
        (b'{"\xff": 1}', "it is not UTF-8 text"),
        (b'{"a": {}, "a": {}}', "it names a twice"),
    ],
    ids=["digits", "nested", "utf8", "twice"],
)
def test_a_damaged_header_is_said_in_felabs_words(tmp_path: Path, raw: bytes, says: str) -> None:
    """L2: Python's own words ("use sys.set_int_max_str_digits()") reached the user."""
    message = _refusal([_write(tmp_path / "bad.safetensors", None, raw=raw)])
    assert says in message and "sys." not in message and "codec" not in message, message


def test_a_tiny_tensor_list_is_not_called_a_typo(tmp_path: Path) -> None:
    """M4: 8 bytes from a header got advice about --model-bytes units the user never typed."""
    folder = _folder(tmp_path)
    _write(
        folder / "model.safetensors",
        {"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}},
        data=8,
    )
    with pytest.raises(SizingError, match="hold 8 bytes, no model's weights"):
        weights_for(from_hf_config(folder))


def test_a_tiny_tensor_list_names_the_safetensors_files_not_config_json(tmp_path: Path) -> None:
    """Eighteenth sweep (c) M1: "the tensors listed in config.json" sent the user to a file
    that lists no tensors; the folder's .safetensors files list them."""
    folder = _folder(tmp_path)
    tensor = {"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}}
    _write(folder / "model-00000.safetensors", tensor, data=8)
    with pytest.raises(SizingError) as one:
        weights_for(from_hf_config(folder))
    assert str(one.value).startswith(
        f"the tensors listed in {folder / 'model-00000.safetensors'} hold 8 bytes"
    ), one.value
    assert "config.json" not in str(one.value)
    _write(folder / "model-00001.safetensors", {"b": tensor["a"]}, data=8)
    with pytest.raises(SizingError, match=r"the 2 \.safetensors files in .* hold 16 bytes"):
        weights_for(from_hf_config(folder))


def test_a_mixture_whose_active_share_is_tiny_blames_the_files_not_a_typed_unit(
    tmp_path: Path,
) -> None:
    """Seventeenth sweep (c) M1: 200 kB of experts, a quarter of them active, was met with
    "write the unit, e.g. --model-bytes 4.9GB, or check --bits-per-weight", flags never typed."""
    folder = tmp_path / "moe"
    folder.mkdir()
    moe = {**SMALL, "num_local_experts": 8, "num_experts_per_tok": 2}  # 200 kB fit its shape
    (folder / "config.json").write_text(json.dumps(moe))
    header = {"a.experts.w": {"dtype": "U8", "shape": [200_000], "data_offsets": [0, 200_000]}}
    _write(folder / "model.safetensors", header, data=200_000)
    with pytest.raises(SizingError, match="leave 50,000 bytes for a token to read") as caught:
        weights_for(from_hf_config(folder))
    assert "--bits-per-weight" not in str(caught.value)


def test_a_tensor_in_two_shards_is_refused(tmp_path: Path) -> None:
    """Seventeenth sweep (c) L15: the last shard's size had won without a word."""
    header = {"w": {"dtype": "U8", "shape": [64], "data_offsets": [0, 64]}}
    one = _write(tmp_path / "model-00001-of-00002.safetensors", header, data=64)
    two = _write(tmp_path / "model-00002-of-00002.safetensors", header, data=64)
    assert "tensor w is also in model-00001-of-00002.safetensors" in _refusal([one, two])


def test_a_name_that_reads_as_felab_s_own_line_is_not_the_model_s(tmp_path: Path) -> None:
    """Seventeenth sweep (c) L14: _name_or_path "error: your disk is full" was the title."""
    folder = _folder(tmp_path)
    (folder / "config.json").write_text(
        json.dumps({**CONFIG, "_name_or_path": "error: your disk is full"})
    )
    assert from_hf_config(folder).name == "model"
