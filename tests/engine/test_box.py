"""The self-check names the machine when other work took it during a run (felab_core/engine/box)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from felab_core.engine.box import BoxReading, box_note, read_box


def _reading(at: float, busy: float, steal: float, total: float, own: float) -> BoxReading:
    return BoxReading(at=at, busy_s=busy, steal_s=steal, total_s=total, own_s=own)


def test_a_quiet_box_says_nothing_and_felabs_own_work_is_not_others() -> None:
    before = _reading(0, busy=100, steal=0, total=1000, own=10)
    # 2 s of 2 cores: felab itself used 1.5 s of the 1.6 s busy
    after = _reading(2, busy=101.6, steal=0, total=1004, own=11.5)
    assert box_note(before, after) is None
    assert box_note(None, after) is None


def test_other_processes_or_steal_are_named() -> None:
    before = _reading(0, busy=100, steal=0, total=1000, own=10)
    others = box_note(before, _reading(2, busy=103, steal=0, total=1004, own=10.2))
    assert others is not None and "other processes 70 %" in others
    steal = box_note(before, _reading(2, busy=100.5, steal=0.4, total=1004, own=10.4))
    assert steal is not None and "steal 10 %" in steal


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux's /proc/stat only")
def test_a_real_busy_box_is_named() -> None:
    """Burners on every core between two readings: the note names other processes."""
    burn = (
        f"{sys.executable} -c 'import time; end = time.time() + 1.0\nwhile time.time() < end: pass'"
    )
    before = read_box()
    # Started by a shell that leaves at once: not felab's children, so not felab's own CPU.
    many = " & ".join([burn] * (os.cpu_count() or 1)) + " &"
    subprocess.run(["sh", "-c", many], check=True, timeout=30)
    time.sleep(1.3)
    note = box_note(before, read_box())
    assert note is not None and "other processes" in note
