"""Run a coroutine from synchronous code (the CLI, a Celery task, a client process) on a fresh
event loop: uvloop where it is installed, since benchmarks/timing_accuracy.py measured it
ingesting more chunks per second than asyncio's own loop before the timing error grew.

asyncio's runner answers the first Ctrl-C by cancelling the coroutine (a bench then keeps what
finished), but only where SIGINT has Python's default handler: a script's `felab bench ... &`
starts with SIGINT ignored, and there a SIGTERM has no Ctrl-C handler to stand in for.
`interrupt_running` does the runner's first-Ctrl-C step itself for that case.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class _MainRun:
    """What run_sync runs in the main thread (the one signals reach)."""

    task: asyncio.Task[Any] | None = None
    interrupted: bool = False


_main = _MainRun()


async def _as_main(coro: Coroutine[Any, Any, T]) -> T:
    _main.task, _main.interrupted = asyncio.current_task(), False
    try:
        return await coro
    finally:
        _main.task = None


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to its end on a new loop and return its result; stopped by
    `interrupt_running` before it kept anything: KeyboardInterrupt, as a Ctrl-C ends it."""
    if threading.current_thread() is threading.main_thread():
        coro = _as_main(coro)
    try:
        try:
            import uvloop
        except ImportError:
            return asyncio.run(coro)
        return uvloop.run(coro)
    except asyncio.CancelledError:
        if _main.interrupted:
            raise KeyboardInterrupt from None
        raise


def interrupt_running() -> bool:
    """Cancel the coroutine run_sync runs in the main thread, as asyncio's first Ctrl-C does
    (a bench keeps what finished); False where none runs or it was interrupted already."""
    task = _main.task
    if task is None or task.done() or _main.interrupted:
        return False
    _main.interrupted = True
    task.cancel()
    task.get_loop().call_soon_threadsafe(lambda: None)  # wake a loop asleep in select()
    return True
