"""felab.cli.plain_numbers: numbers on the command line are plain ASCII digits; '_' and other
scripts' digits are refused with the number meant, and nan/inf reach the command's own check."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
import typer

from felab.cli.plain_numbers import refuse_loose_numbers
from felab_core.text import loose_number_problem


def _command(seen: list[object]) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def run(
        job: Annotated[int, typer.Argument()],
        requests: Annotated[int | None, typer.Option("-n", min=1)] = None,
        rate: Annotated[float | None, typer.Option("--rate")] = None,
        label: Annotated[str, typer.Option("--label")] = "",
    ) -> None:
        seen.extend([job, requests, rate, label])

    return app


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Any:
    def run(args: list[str]) -> tuple[int, str, list[object]]:
        seen: list[object] = []
        cmd = typer.main.get_command(_command(seen))
        refuse_loose_numbers(cmd)
        refuse_loose_numbers(cmd)  # twice: still one check
        try:
            cmd.main(args, prog_name="run")
            code = 0
        except SystemExit as done:
            code = int(done.code or 0)
        captured = capsys.readouterr()
        return code, " ".join((captured.out + captured.err).replace("│", " ").split()), seen

    return run


@pytest.mark.parametrize(
    ("args", "meant"),
    [
        (["1_0"], "10"),
        (["1", "-n", "1_00"], "100"),
        (["1", "-n", "１０"], "10"),
        (["1", "--rate", "2_5.0"], "25.0"),
        (["1", "--rate", "２.５"], "2.5"),
    ],
)
def test_underscores_and_other_digits_are_refused_with_the_number_meant(
    run: Any, args: list[str], meant: str
) -> None:
    """Thirteenth sweep: `--warmup 1_0` ran 10 warm-up requests without a word."""
    code, out, seen = run(args)
    assert code == 2 and not seen
    assert f"in digits 0-9, such as {meant}" in out


def test_plain_numbers_and_words_pass(run: Any) -> None:
    code, _, seen = run(["7", "-n", "+12", "--rate", "1e3", "--label", "1_0"])
    assert code == 0 and seen == [7, 12, 1000.0, "1_0"]
    code, _, seen = run(["7", "-n", "1_000", "--rate", "2_500.5"])  # groups of three, as sizes
    assert code == 0 and seen[1:3] == [1000, 2500.5]
    code, _, seen = run(["7", "--rate", "nan"])  # the command's own range check says why
    assert code == 0 and seen[2] != seen[2]


def test_a_word_that_is_no_number_gets_clicks_own_message() -> None:
    assert loose_number_problem("many", int) is None
    assert loose_number_problem("½", float) is not None
