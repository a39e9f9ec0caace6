"""The installed `felab` script: the commands loaded under a Ctrl-C guard.

Loading typer, rich and every command takes a few tenths of a second; a Ctrl-C in that time
would end in Python's traceback, before the CLI's own boundary (felab/cli/boundary.py) exists.
"""

from __future__ import annotations


def main() -> None:
    try:
        from felab.cli.main import app
    except KeyboardInterrupt:
        from felab_core.failures import EXIT_INTERRUPTED

        raise SystemExit(EXIT_INTERRUPTED) from None
    app()
