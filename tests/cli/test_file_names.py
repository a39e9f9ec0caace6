"""felab.cli.file_names: a file named with a folder's trailing '/' is refused unless the folder
exists; folder options (with a parser of their own) and other types are left alone."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
import typer

from felab.cli.file_names import refuse_folder_marks
from felab.cli.folders import folder_parser

INTO = folder_parser("--into d")


def _command(seen: list[object]) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def write(
        out: Annotated[Path | None, typer.Option("--out")] = None,
        into: Annotated[Path | None, typer.Option("--into", parser=INTO)] = None,
        label: Annotated[str, typer.Option("--label")] = "",
    ) -> None:
        seen.extend([out, into, label])

    return app


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Any:
    def run(args: list[str]) -> tuple[int, str, list[object]]:
        seen: list[object] = []
        cmd = typer.main.get_command(_command(seen))
        refuse_folder_marks(cmd)
        refuse_folder_marks(cmd)  # twice: still one check
        try:
            cmd.main(args, prog_name="write")
            code = 0
        except SystemExit as done:
            code = int(done.code or 0)
        captured = capsys.readouterr()
        return code, captured.out + captured.err, seen

    return run


def test_a_file_name_ending_in_a_slash_is_refused(run: Any, tmp_path: Path) -> None:
    code, out, seen = run(["--out", f"{tmp_path}/record.json/"])
    assert code == 2 and "a folder's mark" in out and not seen
    assert "or create the folder first" in " ".join(out.split())
    assert not (tmp_path / "record.json").exists()


def test_a_files_name_with_a_slash_is_not_told_to_become_a_folder(run: Any, tmp_path: Path) -> None:
    """Twelfth sweep: `compare good.json/ b.json` advised creating the folder good.json/."""
    (tmp_path / "good.json").write_text("{}")
    code, out, seen = run(["--out", f"{tmp_path}/good.json/"])
    said = " ".join(out.replace("│", " ").split())
    assert code == 2 and not seen
    assert "good.json is a file: name it without the '/'" in said
    assert "create the folder" not in said


def test_an_existing_folder_and_plain_names_pass(run: Any, tmp_path: Path) -> None:
    code, _, seen = run(["--out", f"{tmp_path}/"])
    assert code == 0 and seen[0] == tmp_path
    code, _, seen = run(["--out", f"{tmp_path}/record.json", "--label", "x/"])
    assert code == 0 and seen[0] == tmp_path / "record.json" and seen[2] == "x/"


def test_a_folder_option_may_name_a_folder_to_create(run: Any, tmp_path: Path) -> None:
    code, _, seen = run(["--into", f"{tmp_path}/new/"])
    assert code == 0 and seen[1] == tmp_path / "new"


def test_an_empty_file_name_is_refused_not_read_as_this_folder(run: Any) -> None:
    """Eleventh sweep: `--targets-file ""` said ". is a folder" (Path('') is '.')."""
    code, out, seen = run(["--out", ""])
    assert code == 2 and "is empty: give a file's name" in out and seen == []
