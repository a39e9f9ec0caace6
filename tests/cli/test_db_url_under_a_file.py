"""Independent sweep 23, s3: a SQLite path under a regular file is said as a file, not as a
missing folder to make with mkdir -p (M1); setting descriptions read as sentences, and an empty
setting's advice is given once (LOW)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.files import NamedFileError, make_folder_for
from felab_core.settings import get_settings

runner = CliRunner()


@pytest.fixture(autouse=True)
def _fresh_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.delenv("FELAB_DATABASE_URL", raising=False)
    monkeypatch.setenv("FELAB_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("under", ["sub/x.db", "sub/deeper/x.db"])
def test_a_folder_under_a_regular_file_is_said_as_a_file(tmp_path: Path, under: str) -> None:
    (regular := tmp_path / "regular.txt").write_text("hello\n")
    with pytest.raises(NamedFileError) as refused:
        make_folder_for(regular / under, what="backup")
    said = str(refused.value)
    assert said.startswith(f"{regular} is not a folder (a file or a device)")
    assert "mkdir" not in said and "does not exist" not in said


def test_db_upgrade_under_a_regular_file_says_it_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (regular := tmp_path / "regular.txt").write_text("hello\n")
    monkeypatch.setenv("FELAB_DATABASE_URL", f"sqlite:///{regular}/sub/felab.db")
    get_settings.cache_clear()
    done = runner.invoke(app, ["db", "upgrade"])
    assert done.exit_code == 2, done.output
    said = _flat(done.stderr)
    assert f"{regular} is not a folder (a file or a device)" in said
    assert "mkdir" not in said and "does not exist" not in said


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("FELAB_JOB_MAX_CONCURRENCY", "abc", "(The most users one job may run at once)"),
        ("FELAB_JOB_MAX_TOKENS", "-5", "(The most output tokens one request may ask for)"),
    ],
)
def test_a_settings_description_reads_as_a_sentence(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, words: str
) -> None:
    monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    done = runner.invoke(app, ["db", "status"])
    assert done.exit_code == 2, done.output
    assert words in _flat(done.stderr)


def test_an_empty_settings_advice_is_given_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FELAB_DATABASE_URL", "")
    get_settings.cache_clear()
    done = runner.invoke(app, ["db", "status"])
    assert done.exit_code == 2, done.output
    said = _flat(done.stderr)
    assert "is set but empty: give a value" in said
    assert said.count("unset it for the default") == 1
