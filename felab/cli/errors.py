"""How every command says that something went wrong: one line on stderr, and an exit code.

Light on purpose (rich only): the commands a student's machine runs import it too.
"""

from __future__ import annotations

from rich.console import Console

from felab_core.failures import EXIT_UNREACHABLE, EXIT_USAGE

__all__ = ["EXIT_UNREACHABLE", "EXIT_USAGE", "err", "warn"]


def err(text: str) -> None:
    Console(stderr=True, highlight=False).print(f"error: {text}", markup=False, soft_wrap=True)


def warn(text: str) -> None:
    """Something felab goes on despite, said once on stderr."""
    Console(stderr=True, highlight=False).print(f"warning: {text}", markup=False, soft_wrap=True)
