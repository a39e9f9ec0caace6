"""How every command says that something went wrong: one line on stderr, and an exit code.

Light on purpose (rich only): the commands a student's machine runs import it too.
"""

from __future__ import annotations

from rich.console import Console

from felab_core.failures import EXIT_UNREACHABLE, EXIT_USAGE
from felab_core.redact import redact
from felab_core.text import is_hidden

__all__ = ["EXIT_UNREACHABLE", "EXIT_USAGE", "err", "warn"]


def _safe(text: str) -> str:
    """A message for a terminal: a name or a value it quotes may hold an escape code (a folder
    named with ESC]0; sets the window's title), so each control character but a line break or a
    tab is shown as '?'; and a value it quotes may be a password or key typed in the wrong place
    (`--chip https://u:pw@host`, a key as a member's name), masked as everywhere else."""
    return "".join("?" if is_hidden(c) and c not in "\n\t" else c for c in redact(text))


def err(text: str) -> None:
    Console(stderr=True, highlight=False).print(
        f"error: {_safe(text)}", markup=False, soft_wrap=True
    )


def warn(text: str) -> None:
    """Something felab goes on despite, said once on stderr."""
    Console(stderr=True, highlight=False).print(
        f"warning: {_safe(text)}", markup=False, soft_wrap=True
    )
