"""`felab numbers`: a password or key typed or read as a name is refused (or masked when
shown) through one check, felab_core.redact.secret_problem (independent sweep 23, s3 H1 to H3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from felab_core.db import models as m
from felab_core.db.session import default_sessions, session_scope
from felab_core.engine.results import append_csv
from tests.cli.test_numbers_cli import _own_data, count, felab, row

__all__ = ["_own_data"]  # the data folder of test_numbers_cli, for each test here


def test_a_skipped_rows_line_masks_the_key_its_model_holds(tmp_path: Path) -> None:
    """H1: `--skip-invalid` printed `line 2: ollama llama3.1:8b?api_key=sk-LEAKME... (preset
    day2): skipped ...`: the reason was masked, the row's own label was not."""
    model = "llama3.1:8b?api_key=sk-LEAKME1234567890abcdef"
    append_csv(csv_path := tmp_path / "a.csv", [row("ollama", model)])
    code, out = felab("import", "--skip-invalid", str(csv_path))
    assert code == 0, out
    assert "LEAKME" not in out
    assert "line 2: ollama llama3.1:8b?api_key=*** (preset day2): skipped" in out


@pytest.mark.parametrize(
    "changes",
    [
        {"host": "carol:TopSecretPW42@studio.local"},
        {"host": "carol:TopSecretPW42@192.168.1.20"},
        {"felab_version": "0.1.0 carol:TopSecretPW42@studio.local"},
    ],
)
def test_user_and_password_without_a_scheme_are_refused_in_any_cell(
    tmp_path: Path, changes: dict[str, str]
) -> None:
    """H2: `carol:TopSecretPW42@studio.local` in the host column was stored, exported and shown
    by later imports; with http:// in front it was refused. Every text cell is checked."""
    append_csv(csv_path := tmp_path / "b.csv", [row("ollama", "llama3.1:8b", **changes)])
    code, out = felab("import", str(csv_path))
    assert code == 2, out
    assert "holds a password or key" in out and "carol:***@" in out
    assert "TopSecretPW42" not in out
    assert count(m.BenchResult) == 0


def test_an_honest_model_name_with_a_colon_and_an_at_is_imported(tmp_path: Path) -> None:
    """What the check must not catch: a tag and a quantization (`llama3.1:8b@q4`)."""
    append_csv(csv_path := tmp_path / "c.csv", [row("ollama", "llama3.1:8b@q4")])
    code, out = felab("import", str(csv_path))
    assert code == 0, out
    assert "llama3.1:8b@q4" in out


@pytest.mark.parametrize(
    ("option", "typed", "shown"),
    [
        ("--name", "http://u:ModelPW55@host/m.gguf", "http://u:***@host/m.gguf"),
        ("--name", "sk-LEAKMEmodel1234567890abcdef", "***"),
        ("--name", "carol:ModelPW55@studio.local", "carol:***@studio.local"),
        ("--label", "https://bob:LabelPW66@hf.co/x", "https://bob:***@hf.co/x"),
    ],
)
def test_numbers_model_refuses_a_name_or_label_holding_a_secret(
    option: str, typed: str, shown: str
) -> None:
    """H3: `numbers model --name/--label` stored such text and printed it, and every later
    `numbers machine` printed it again."""
    base = ["--name", "llama3.1:8b"] if option == "--label" else []
    code, out = felab("model", "llamacpp", "--bytes", "4.9GB", *base, option, typed)
    assert code == 2, out
    assert "holds a password or key" in out and repr(shown) in out
    assert "PW55" not in out and "PW66" not in out and "LEAKME" not in out
    assert count(m.MemberServer) == 0


def test_a_name_stored_before_the_check_is_shown_masked() -> None:
    """A model's name stored before felab refused secrets in it is masked where it is shown."""
    code, out = felab("machine", "--chip", "M4 Pro")
    assert code == 0, out
    with session_scope(default_sessions()) as s:
        member = s.scalars(select(m.Member)).one()
        s.add(
            m.MemberServer(
                member_id=member.id,
                server="llamacpp",
                model="carol:ModelPW55@studio.local/m.gguf",
                model_bytes=4_900_000_000,
            )
        )
    code, out = felab("machine")
    assert code == 0, out
    assert "carol:***@studio.local/m.gguf" in out and "ModelPW55" not in out
