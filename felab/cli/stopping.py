"""A SIGTERM (`kill`, `timeout`, a CI time limit, `docker stop`) stops a command as Ctrl-C does.

`felab demo` and `felab lab` raise KeyboardInterrupt on SIGTERM; a bench must do more: its first
Ctrl-C keeps what finished (asyncio's runner cancels the run, which saves what it measured), so
a SIGTERM is handed to whatever answers Ctrl-C at that moment instead of ending the process
with nothing written.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _as_ctrl_c(_signum: int, frame: FrameType | None) -> None:
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)  # asyncio's runner: cancel the run, keep what finished
        return
    raise KeyboardInterrupt


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """Within the block, SIGTERM does what the first Ctrl-C does; the old handler after."""
    previous = signal.signal(signal.SIGTERM, _as_ctrl_c)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
