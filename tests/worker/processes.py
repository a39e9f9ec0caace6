"""Real `felab worker` processes in a test: started in their own process group with their
output in a log file, waited on by what they write, and killed with their pool."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def start_felab(args: Sequence[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`args` (a felab command line) running, stdout and stderr to `log`."""
    with log.open("wb") as fh:
        return subprocess.Popen(
            list(args), env=dict(env), stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )


def wait_in(
    log: Path, proc: subprocess.Popen[bytes], text: str, count: int = 1, timeout_s: float = 30
) -> None:
    """Until `text` is in the log `count` times; the process must live that long."""
    end = time.monotonic() + timeout_s
    while log.read_text(errors="replace").count(text) < count:
        assert proc.poll() is None, log.read_text(errors="replace")
        assert time.monotonic() < end, log.read_text(errors="replace")
        time.sleep(0.2)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """The worker and its pool, by the process group the test started."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
