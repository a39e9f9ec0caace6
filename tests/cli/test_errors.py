"""felab.cli.errors: what a message quotes (a path, a value) reaches the terminal without its
escape codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from felab.cli.errors import err, warn


def test_an_escape_code_in_a_message_is_shown_not_obeyed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err("ct/\x1b]0;TITLE\x07x: not a folder")
    warn("FELAB_CONTENT_DIR=\x1b[31mRED\u202e")
    said = capsys.readouterr().err
    assert "\x1b" not in said and "\x07" not in said and "\u202e" not in said
    assert "error: ct/?]0;TITLE?x: not a folder" in said
    assert "warning: FELAB_CONTENT_DIR=?[31mRED?" in said


def test_line_breaks_and_tabs_stay(capsys: pytest.CaptureFixture[str]) -> None:
    err("two problems:\n\tone")
    assert "two problems:\n" in capsys.readouterr().err  # rich expands the tab


@pytest.mark.parametrize("name", ["FELAB_TARGETS_FILE", "FELAB_WORKER_KEY_FILE"])
def test_a_file_setting_ending_in_a_slash_is_refused(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eleventh sweep: FELAB_TARGETS_FILE=good.toml/ was read as good.toml."""
    from felab_core.settings import Settings

    (tmp_path / "good.toml").write_text("")
    monkeypatch.setenv(name, f"{tmp_path}/good.toml/")
    with pytest.raises(ValueError, match="ends in '/', a folder's mark"):
        Settings(_env_file=None)  # type: ignore[call-arg]
