"""Small bad-input findings of the twenty-third sweep (s2 L4, L7; s3's content LOW), each
through the command a person types."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.settings import get_settings
from tests.db_support import CONTENT

runner = CliRunner()


@pytest.mark.parametrize("text", ["", "\n  \n", "\ufeff"])
def test_compare_of_an_empty_file_says_it_is_empty(tmp_path: Path, text: str) -> None:
    """s2 L7: an empty record had read "not a JSON file (Expecting value: line 1 column 1
    (char 0))"."""
    empty = tmp_path / "empty.json"
    empty.write_text(text, encoding="utf-8")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "aiperf/1"}))
    result = runner.invoke(app, ["compare", str(empty), str(other)])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert f"{empty} is empty: give a record `felab bench --json` wrote" in said
    assert "Expecting value" not in said


def _folder(tmp_path: Path, *names: str) -> Path:
    folder = tmp_path / "content"
    folder.mkdir()
    for name in names:
        shutil.copyfile(CONTENT / "day-02.yaml", folder / name)
    return folder


def test_a_pack_named_in_upper_case_is_read(tmp_path: Path) -> None:
    """s3 LOW: Day-02.YAML beside other files was passed over without a word (alone: "no .yaml
    packs here"); the loader's .yaml and .yml are read in any case, its day held to the name."""
    folder = _folder(tmp_path, "Day-02.YAML")
    result = runner.invoke(app, ["content", "check", str(folder)])
    assert result.exit_code == 0, result.output
    assert "Day-02.YAML" in result.output
    (folder / "Day-02.YAML").rename(folder / "DAY-03.Yml")
    result = runner.invoke(app, ["content", "check", str(folder)])
    assert result.exit_code == 2
    assert "DAY-03.Yml: day: the file is named for day 3 but says day 2" in result.output


def test_a_file_named_almost_like_a_pack_is_named_not_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """s3 LOW: a near miss (day-03.yaml.bak, day-04.json) is said in a note, and neither fails
    the check nor stops a load; README.md and an editor's hidden swap file are not named."""
    monkeypatch.setenv("FELAB_DATABASE_URL", f"sqlite:///{tmp_path / 'felab.db'}")
    get_settings.cache_clear()
    folder = _folder(tmp_path, "day-02.yaml", "day-03.yaml.bak", "day-04.json", ".day-02.yaml.swp")
    (folder / "README.md").write_text("# notes\n")
    try:
        for cmd in ("check", "load"):
            result = runner.invoke(app, ["content", cmd, str(folder)])
            assert result.exit_code == 0, result.output
            said = " ".join(result.output.split())
            for name in ("day-03.yaml.bak", "day-04.json"):
                assert (
                    f"note: {folder / name}: not read: a pack's name ends in .yaml or .yml" in said
                )
            assert "README.md" not in said and ".swp" not in said
    finally:
        get_settings.cache_clear()


@pytest.mark.parametrize("name", ["FELAB_CACHE_DIR", "FELAB_RESULTS_DIR", "FELAB_CONTENT_DIR"])
@pytest.mark.parametrize("under", [False, True])
def test_a_folder_setting_that_is_a_file_is_said_by_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, under: bool
) -> None:
    """s2 L4: FELAB_CACHE_DIR set to a file had `felab lab where` exit 0 saying "not installed:
    felab lab install llamacpp"; now the setting is refused as it is read, for any command."""
    a_file = tmp_path / "regular-file"
    a_file.write_text("not a folder\n")
    monkeypatch.setenv(name, str(a_file / "sub" if under else a_file))
    get_settings.cache_clear()
    try:
        for command in (["lab", "where"], ["size", "chips"]):
            result = runner.invoke(app, command)
            assert result.exit_code == 2, result.output
            said = " ".join(result.output.split())
            assert f"bad setting: {name}=" in said
            assert f"{a_file} is not a folder (a file or a device)" in said
    finally:
        get_settings.cache_clear()


def test_a_folder_setting_not_made_yet_is_fine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FELAB_CACHE_DIR", str(tmp_path / "not" / "yet"))
    get_settings.cache_clear()
    try:
        assert get_settings().cache_dir == tmp_path / "not" / "yet"
    finally:
        get_settings.cache_clear()
