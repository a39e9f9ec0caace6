"""`felab content check DIR` and `felab content load DIR`: the course's packs, from files.

`check` reads and reports, touching nothing; `load` checks, then writes every pack in one
transaction (all or nothing; loading twice changes nothing). Problems go to stderr one per line,
`file:line: field: what was expected`, and the exit code is 2 (a file to fix, as everywhere).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from felab.cli.db import service_errors, sessions
from felab_core.content.loader import ContentError, ContentProblem
from felab_core.content.store import check_with_database, load_folder
from felab_core.db.session import session_scope
from felab_core.drills.kinds import KINDS
from felab_core.settings import get_settings

EXIT_PROBLEMS = 2  # a file to fix: the exit code every bad input gets

content_app = typer.Typer(
    name="content",
    help="Course content packs (YAML, one file per day; format in content/README.md).",
    no_args_is_help=True,
)

_DIR_HELP = "Folder of day-NN.yaml packs (default: FELAB_CONTENT_DIR, else ./content)."


def _problems(problems: list[ContentProblem], *, loading: bool = True) -> None:
    err = Console(stderr=True, highlight=False)
    count = f"{len(problems)} problem{'' if len(problems) == 1 else 's'}"
    err.print(f"{count}{'; nothing was loaded' if loading else ''}:", markup=False)
    for p in problems:
        err.print(f"  {p}", markup=False, soft_wrap=True)


def _skipped(skipped: list[ContentProblem]) -> None:
    """Files named almost like a pack and not read, each said (a note: they are not refused)."""
    err = Console(stderr=True, highlight=False)
    for p in skipped:
        err.print(f"note: {p}", markup=False, soft_wrap=True)


@content_app.command("check")
def check(folder: Path = typer.Argument(None, help=_DIR_HELP)) -> None:
    """Check every pack in a folder and report every problem; changes nothing."""
    folder = folder or get_settings().content_dir
    report, not_compared = check_with_database(folder)
    _skipped(report.skipped)
    if not report.ok:
        _problems(report.problems, loading=False)
        raise typer.Exit(code=EXIT_PROBLEMS)
    if not_compared is not None:
        _skipped([ContentProblem(folder, "", not_compared)])
    table = Table(title=f"{folder}: all packs check clean")
    kinds = [kind.section for kind in KINDS.values()]  # each drill kind its column
    for col in ("file", "day", "cards", "prompts", *kinds, "numbers"):
        table.add_column(col, justify="left" if col == "file" else "right")
    for p in report.packs:
        pack = p.pack
        table.add_row(
            p.path.name,
            str(pack.day),
            str(len(pack.cards)),
            str(len(pack.prompts)),
            *(str(len(pack.items_of(section))) for section in kinds),
            str(len(pack.numbers)),
        )
    Console(highlight=False).print(table)


@content_app.command("load")
def load(folder: Path = typer.Argument(None, help=_DIR_HELP)) -> None:
    """Check, then load every pack into the database in one transaction (idempotent)."""
    folder = folder or get_settings().content_dir
    factory = sessions()
    try:
        with service_errors(), session_scope(factory) as session:
            report = load_folder(session, folder)
    except ContentError as exc:
        _skipped(exc.skipped)
        _problems(exc.problems)
        raise typer.Exit(code=EXIT_PROBLEMS) from None
    _skipped(report.skipped)
    say = Console(highlight=False)
    packs = ", ".join(report.packs)
    if not report.changed:
        say.print(f"Loaded {packs}: already up to date, nothing changed.", markup=False)
        return
    say.print(f"Loaded {packs}:", markup=False)
    for line in report.lines():
        say.print(f"  {line}", markup=False)
