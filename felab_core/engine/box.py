"""Was the machine itself busy during a run? The self-check's answer to "is the tail felab's?"

On a shared or virtual machine the client's lag can come from elsewhere: other processes taking
the cores, or the hypervisor taking the virtual CPUs (steal). Two readings of the kernel's CPU
counters (/proc/stat) and of felab's own CPU time around a run say how much of the machine went
to others; the run's notes then name the box as the cause instead of the workload. Linux only:
elsewhere there is no reading and no note.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

#: Others' share of the machine's cores past which the box is named as a cause.
OTHERS_BUSY_SHARE = 0.25
#: The hypervisor's share of CPU time (steal) past which the box is named as a cause.
STEAL_SHARE = 0.05

_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class BoxReading:
    """The kernel's CPU counters (seconds, all cores) and felab's own CPU seconds, at one time."""

    at: float
    busy_s: float
    steal_s: float
    total_s: float
    own_s: float


def read_box() -> BoxReading | None:
    """Read the machine's CPU counters now; None where /proc/stat is not there."""
    try:
        first = _STAT.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    tick = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal (guest time is already in user)
    values = [int(x) / tick for x in first[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values + [0.0] * (8 - len(values))
    import resource  # not on Windows, where /proc/stat is not either

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return BoxReading(
        at=time.monotonic(),
        busy_s=user + nice + system + irq + softirq,
        steal_s=steal,
        total_s=sum(values),
        own_s=own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime,
    )


def box_note(before: BoxReading | None, after: BoxReading | None) -> str | None:
    """A note when other work or the hypervisor took a large share of the machine during the
    run (None when it was quiet, or when there is no reading)."""
    if before is None or after is None:
        return None
    total = after.total_s - before.total_s
    if total <= 0:
        return None
    cores = os.cpu_count() or 1
    others = max(0.0, (after.busy_s - before.busy_s) - (after.own_s - before.own_s)) / total
    steal = max(0.0, after.steal_s - before.steal_s) / total
    if others < OTHERS_BUSY_SHARE and steal < STEAL_SHARE:
        return None
    return (
        f"the machine was busy with other work during the run (other processes "
        f"{others * 100:.0f} % of its {cores} cores, hypervisor steal {steal * 100:.0f} %): "
        "a late send or a slow read may be the box's, not felab's or the server's; run again "
        "on a quiet machine before quoting the tail"
    )
