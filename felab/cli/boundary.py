"""The CLI's error boundary: every failure felab expects leaves as one or two lines on stderr
and an exit code (felab_core/failures.py says which); never as a traceback, unless `--debug`
or FELAB_DEBUG=1 asks for one (printed before the message; the exit code stays the same, so a
script sees the same failure with and without it).

It wraps the root command's `invoke`, so it holds for the installed `felab` script and for
typer's CliRunner alike.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from typer import _click as click
from typer.core import TyperGroup
from typer.exceptions import Abort, Exit, TyperException

from felab.cli.errors import err
from felab_core.failures import Failure, debug_requested, explain, unexpected
from felab_core.redact import redact

_debug = False
#: What a running command adds to the words for a failure felab_core.failures does not know:
#: felab/cli/db.py, once a command has opened the database, looks there for a stored value
#: felab cannot read. Emptied when a command starts.
_explainers: list[Callable[[Exception], Failure | None]] = []


def explain_also(explainer: Callable[[Exception], Failure | None]) -> None:
    """Ask `explainer` about this command's unexpected failures before calling them a bug."""
    _explainers.append(explainer)


def _explained_here(exc: Exception) -> Failure | None:
    for explainer in _explainers:
        try:
            failure = explainer(exc)
        except Exception:  # an explainer's own trouble must not hide the failure it was asked
            failure = None
        if failure is not None:
            return failure
    return None


def set_debug(value: bool) -> None:
    """`--debug` on the command line: failures show their traceback."""
    global _debug
    _debug = value


def debugging() -> bool:
    """Whether tracebacks were asked for (`--debug` or FELAB_DEBUG=1)."""
    return _debug or debug_requested()


def _masked(exc: TyperException) -> None:
    """A usage error quotes what was typed ("Invalid value: 'sk-...'"): masked as every other
    line felab prints is (felab/cli/errors.py), before typer prints it."""
    message = getattr(exc, "message", None)
    if isinstance(message, str):
        exc.message = redact(message)


def bounded(group: type[TyperGroup]) -> type[TyperGroup]:
    """`group` with the error boundary around everything it runs."""

    class Bounded(group):  # type: ignore[valid-type,misc]
        def invoke(self, ctx: click.Context) -> Any:
            _explainers.clear()
            try:
                return super().invoke(ctx)
            except (Exit, Abort):
                raise
            except TyperException as exc:  # click's usage errors: typer prints them in a box
                _masked(exc)
                raise
            except (KeyboardInterrupt, SystemExit, GeneratorExit):
                raise
            except BrokenPipeError:
                raise  # the reader left (`felab ... | head`): click ends quietly, exit 1
            except Exception as exc:
                failure = explain(exc) or _explained_here(exc) or unexpected(exc)
                if _debug or debug_requested():  # the traceback for a bug report; same exit code
                    traceback.print_exc()
                err(failure.message)
                raise Exit(failure.exit_code) from None

    return Bounded
