"""Every target's URL secrets are masked in every note of a targets file, whatever the order."""

from __future__ import annotations

from pathlib import Path

from felab_core.engine.targets import load_targets


def test_a_later_target_s_password_is_masked_in_an_earlier_target_s_note(tmp_path: Path) -> None:
    """Twenty-first sweep: a note holding a URL password was masked only when the target with
    that URL came first in the file."""
    path = tmp_path / "t.toml"
    path.write_text(
        '[targets.first]\nkind = "vllm"\nurl = "http://127.0.0.1:1"\n'
        'note = "same box as second, log in with Zq8orderPw (or Zq8orderKey)"\n'
        '[targets.second]\nkind = "vllm"\nurl = "http://alice:Zq8orderPw@127.0.0.1:2"\n'
        '[targets.third]\nkind = "vllm"\nurl = "http://Zq8orderKey@127.0.0.1:3"\n'
    )
    targets = load_targets(path)
    note = targets["first"].note or ""
    assert "Zq8orderPw" not in note and "Zq8orderKey" not in note, note
    assert note.startswith("same box as second")


def test_a_url_s_userinfo_in_a_note_is_masked(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(
        '[targets.box]\nkind = "vllm"\nurl = "http://127.0.0.1:1"\n'
        'note = "mirror at https://bob:Yw3noteSecret@mirror.example/v1 and '
        'https://Yw3noteToken@other.example"\n'
    )
    note = load_targets(path)["box"].note or ""
    assert "Yw3noteSecret" not in note and "Yw3noteToken" not in note, note
    assert "mirror.example/v1" in note
