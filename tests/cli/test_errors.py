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


@pytest.mark.parametrize("name", ["FELAB_DATA_DIR", "FELAB_RESULTS_DIR", "FELAB_CACHE_DIR"])
def test_a_folder_setting_with_a_control_character_is_named(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eighteenth sweep (b) M1: FELAB_DATA_DIR with ESC was blamed on FELAB_DATABASE_URL (not
    set), with advice to write a PostgreSQL URL."""
    from felab_core.settings import Settings

    monkeypatch.setenv(name, f"{tmp_path}/d\x1b[31mx")
    with pytest.raises(ValueError, match=f"{name.removeprefix('FELAB_').lower()}(.|\\n)*holds"):
        Settings(_env_file=None)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "value", ["abc", "rediss://", "rediss://[::1:6380/0", "rediss:// broker:6380/0"]
)
def test_the_public_broker_urls_refusals_show_an_address_with_no_user(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eighteenth sweep (b) M2: FELAB_BROKER_PUBLIC_URL's refusal advised
    rediss://USER:PASSWORD@HOST:6380/0, a form the same setting then refused."""
    from felab_core.settings import Settings

    monkeypatch.setenv("FELAB_BROKER_PUBLIC_URL", value)
    with pytest.raises(ValueError) as caught:
        Settings(_env_file=None)  # type: ignore[call-arg]
    assert "USER:PASSWORD" not in str(caught.value), str(caught.value)
