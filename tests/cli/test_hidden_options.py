"""felab.cli.hidden_options: click's "(Possible options: ...)" never offers a hidden flag.

`size capacity` takes --model/--config/--gguf hidden, only to refuse them in words; click had
answered `--model-bytes 8GB` with "Possible options: --model", advice that met the refusal."""

from __future__ import annotations

from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from felab.cli.hidden_options import suggest_shown_only
from felab.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize("args", [["--model-bytes", "8GB"], ["--mod", "x"], ["--confi", "p"]])
def test_size_capacity_offers_no_hidden_flag(args: list[str]) -> None:
    result = runner.invoke(app, ["size", "capacity", *args])
    assert result.exit_code == 2, result.output
    assert f"No such option: {args[0]}" in result.output
    for hidden in ("--model", "--config", "--gguf"):
        assert f"Possible options: {hidden}" not in result.output
        assert f", {hidden}" not in result.output


def test_a_shown_option_is_still_suggested() -> None:
    result = runner.invoke(app, ["size", "capacity", "--tokenz", "5"])
    assert result.exit_code == 2, result.output
    assert "(Possible options: --tokens)" in result.output


def test_any_command_with_a_hidden_option(capsys: pytest.CaptureFixture[str]) -> None:
    single = typer.Typer()

    @single.command()
    def run(
        shown: Annotated[str, typer.Option("--models")] = "",
        secret: Annotated[str, typer.Option("--model", hidden=True)] = "",
    ) -> None:
        """A command with one shown and one hidden option."""

    cmd = typer.main.get_command(single)
    suggest_shown_only(cmd)
    with pytest.raises(SystemExit) as done:
        cmd.main(["--modelz", "x"], prog_name="run")
    assert done.value.code == 2
    said = capsys.readouterr().err
    assert "(Possible options: --models)" in said, said
