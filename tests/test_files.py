"""felab_core.files: a path a person names is used only when it is a regular file that fits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from felab_core.files import MiB, NamedFileError, read_named_bytes, read_named_text, refuse_special


def test_refuse_special_lets_a_regular_file_and_a_missing_one_through(tmp_path: Path) -> None:
    regular = tmp_path / "a.csv"
    regular.write_text("x\n")
    info = refuse_special(regular, what="results CSV")
    assert info is not None and info.st_size == 2
    assert refuse_special(tmp_path / "missing.csv", what="results CSV") is None
    # A path under a regular file cannot exist either: the caller says what that means.
    assert refuse_special(regular / "below", what="results CSV") is None


def test_refuse_special_names_a_folder_a_pipe_and_a_device(tmp_path: Path) -> None:
    pipe = tmp_path / "a-pipe"
    os.mkfifo(pipe)
    with pytest.raises(NamedFileError, match="is a folder: give the results CSV itself"):
        refuse_special(tmp_path, what="results CSV")
    with pytest.raises(NamedFileError, match=r"not a regular file \(a device or a pipe\)"):
        refuse_special(pipe, what="results CSV")  # returns at once: a FIFO is never opened
    with pytest.raises(NamedFileError, match="give a file name for the backup"):
        refuse_special(Path("/dev/null"), what="backup", to_write=True)


def test_read_named_refuses_what_is_too_big_and_what_is_not_utf8(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_bytes(b"x" * (MiB + 1))
    with pytest.raises(NamedFileError, match="is 1,048,577 bytes: a targets file is at most"):
        read_named_bytes(big, what="targets file", limit=MiB)
    latin = tmp_path / "latin.toml"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(NamedFileError, match=r"not UTF-8 text \(byte 3\)"):
        read_named_text(latin, what="targets file", limit=MiB)
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbfa = 1\n")
    assert read_named_text(bom, what="targets file", limit=MiB) == "a = 1\n"
    with pytest.raises(NamedFileError, match="does not exist: give the path of the trace"):
        read_named_text(tmp_path / "none.jsonl", what="trace", limit=MiB)
