"""A SIGTERM (`kill`, `timeout`, a CI time limit, `docker stop`) stops a command as Ctrl-C does.

`felab demo` and `felab lab` raise KeyboardInterrupt on SIGTERM; a bench must do more: its first
Ctrl-C keeps what finished (asyncio's runner cancels the run, which saves what it measured), so
a SIGTERM is handed to whatever answers Ctrl-C at that moment instead of ending the process
with nothing written. Where SIGINT was ignored when felab started (a script's `felab bench ... &`:
the shell starts background jobs so), asyncio installs no Ctrl-C handler; the run is then
cancelled the same way directly, and SIGINT stays ignored as the shell asked.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from felab_core.engine.event_loop import interrupt_running


def _as_ctrl_c(_signum: int, frame: FrameType | None) -> None:
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not signal.default_int_handler:
        handler(signal.SIGINT, frame)  # asyncio's runner: cancel the run, keep what finished
        return
    if interrupt_running():  # the first SIGTERM where SIGINT is ignored: the same, directly
        return
    raise KeyboardInterrupt  # no run, or the second SIGTERM: stop at once


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """Within the block, SIGTERM does what the first Ctrl-C does; the old handler after."""
    previous = signal.signal(signal.SIGTERM, _as_ctrl_c)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
