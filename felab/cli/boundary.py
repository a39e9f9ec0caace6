"""The CLI's error boundary: every failure felab expects leaves as one or two lines on stderr
and an exit code (felab_core/failures.py says which); never as a traceback, unless `--debug`
or FELAB_DEBUG=1 asks for one (printed before the message; the exit code stays the same, so a
script sees the same failure with and without it).

It wraps the root command's `invoke`, so it holds for the installed `felab` script and for
typer's CliRunner alike.
"""

from __future__ import annotations

import traceback
from typing import Any

from typer import _click as click
from typer.core import TyperGroup
from typer.exceptions import Abort, Exit, TyperException

from felab.cli.errors import err
from felab_core.failures import debug_requested, explain, unexpected

_debug = False


def set_debug(value: bool) -> None:
    """`--debug` on the command line: failures show their traceback."""
    global _debug
    _debug = value


def bounded(group: type[TyperGroup]) -> type[TyperGroup]:
    """`group` with the error boundary around everything it runs."""

    class Bounded(group):  # type: ignore[valid-type,misc]
        def invoke(self, ctx: click.Context) -> Any:
            try:
                return super().invoke(ctx)
            except (Exit, Abort, TyperException):
                raise
            except (KeyboardInterrupt, SystemExit, GeneratorExit):
                raise
            except BrokenPipeError:
                raise  # the reader left (`felab ... | head`): click ends quietly, exit 1
            except Exception as exc:
                failure = explain(exc) or unexpected(exc)
                if _debug or debug_requested():  # the traceback for a bug report; same exit code
                    traceback.print_exc()
                err(failure.message)
                raise Exit(failure.exit_code) from None

    return Bounded
