"""Run a coroutine from synchronous code (the CLI, a Celery task, a client process) on a fresh
event loop: uvloop where it is installed, since benchmarks/timing_accuracy.py measured it
ingesting more chunks per second than asyncio's own loop before the timing error grew.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to its end on a new loop and return its result."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
