"""A GGUF's weights are read one way by `memo` and `size limit` (its tensors), and the file's
size on disk is held to their sum (fixer sweep: the memo divided by the file's size, the speed
limit by the tensors, 10,000x apart for a padded file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.reports.memo import MemoError, build_memo
from felab_core.sizing.gguf_shape import from_gguf
from felab_core.sizing.gguf_weights import file_size_problem, gguf_weights
from felab_core.sizing.speed_limit import weights_for
from tests.reports.conftest import gguf_inputs, sample_rows
from tests.sizing.test_model_shape import write_gguf

runner = CliRunner()


def _gguf(path: Path, pad_to: int | None = None) -> Path:
    one_mib = {"blk.0.attn_q.weight": np.zeros((512, 512), np.float32)}
    write_gguf(path, layers=1, tensors=one_mib)
    if pad_to is not None:
        with path.open("r+b") as fh:
            fh.truncate(pad_to)  # a sparse tail: 10 GB on disk, no 10 GB written
    return path


def _memo(path: Path) -> None:
    inputs = gguf_inputs(path)
    build_memo(sample_rows(), inputs)


def test_memo_and_size_limit_read_the_same_tensors(tmp_path: Path) -> None:
    path = _gguf(tmp_path / "m.gguf")
    shape = from_gguf(path)
    inputs = gguf_inputs(path)
    memo = build_memo(sample_rows(), inputs)
    assert memo.weights == weights_for(shape)[0] == gguf_weights(shape, path)[0] == 1_048_576


def test_a_padded_gguf_is_refused_by_the_memo_naming_both_sizes(tmp_path: Path) -> None:
    path = _gguf(tmp_path / "m.gguf", pad_to=10**10)
    with pytest.raises(MemoError) as caught:
        _memo(path)
    said = str(caught.value)
    assert "is 10 GB = 9.31 GiB on disk, but its tensors hold only 1.05 MB = 1 MiB" in said
    assert "--model-bytes" in said


def test_a_padded_gguf_is_refused_by_size_limit_too(tmp_path: Path) -> None:
    path = _gguf(tmp_path / "m.gguf", pad_to=10**10)
    result = runner.invoke(app, ["size", "limit", "--chip", "M4 Pro", "--gguf", str(path)])
    assert result.exit_code == 2, result.output
    assert "on disk, but its tensors hold only 1.05 MB" in result.stderr
    assert "Traceback" not in result.output


def test_a_file_smaller_than_its_tensors_is_cut_short() -> None:
    said = file_size_problem(500_000, 1_048_576, "m.gguf")
    assert (
        said is not None and "cut short" in said and "500,000 bytes" in said and "1.05 MB" in said
    )


def test_metadata_beside_the_tensors_is_allowed() -> None:
    """A vocabulary of a few MB beside a small model's tensors is an honest file."""
    assert file_size_problem(8_000_000, 1_048_576, "m.gguf") is None
    assert file_size_problem(4_920_000_000, 4_800_000_000, "m.gguf") is None
