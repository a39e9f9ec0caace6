"""A run's load in words, the same wherever felab names it: bench's table, notes and progress,
its --repeat summary, and compare, which matches two records' runs by these words.

A closed loop's load is its streams; an open loop's is its rate, and a replayed trace's its
own arrival times at a --trace-speed. For those two -c caps the requests in flight (0: no cap),
so `-c 1,4 --rate 2` is two loads: the cap is part of the words (sweep 24 M1: two rows read
"2/s" alike, and compare called the fresh record "edited or broken"). A trace run had been
"0 streams" in the repeat summary and in compare (M2), and one replayed 20 times faster was
matched with the trace as recorded (M3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from felab_core.engine.record_requests import CompareError

if TYPE_CHECKING:
    from felab_core.engine.workloads import Workload


def load_label(concurrency: int | None, rate: float | None, trace_speed: float | None) -> str:
    """'4 streams', '2 req/s', '2 req/s, cap 4', 'as traced', 'as traced x20, cap 4'.

    `trace_speed`: the --trace-speed of a replayed trace, None for a run of no trace."""
    if trace_speed is not None:
        load = "as traced" if trace_speed == 1 else f"as traced x{trace_speed:g}"
    elif rate is not None:
        load = f"{rate:g} req/s"
    else:  # a closed loop: its users
        return f"{concurrency} stream{'' if concurrency == 1 else 's'}"  # not "1 streams"
    return f"{load}, cap {concurrency}" if concurrency else load


def trace_speed_of(workload: dict[str, Any] | None) -> float | None:
    """The --trace-speed a record's workload replayed its trace at; None when it replayed none
    (a trace written without its speed ran at 1)."""
    trace = (workload or {}).get("trace")
    if not isinstance(trace, dict):
        return None
    speed = trace.get("speed")
    return float(speed) if isinstance(speed, int | float) and not isinstance(speed, bool) else 1.0


def run_load(workload: Workload, concurrency: int) -> str:
    """The load of the run of `workload` at this concurrency (or cap), as load_label words it."""
    speed = None if workload.trace is None else workload.trace.speed
    return load_label(concurrency, workload.rate, speed)


def check_same_trace(wa: Any, wb: Any) -> None:
    """Two replays of different traces (their contents' sha256) are two loads, as two rates
    are: no verdict (sweep 24 M3; another --trace-speed is another load by its words)."""
    ta = wa.get("trace") if isinstance(wa, dict) else None
    tb = wb.get("trace") if isinstance(wb, dict) else None
    ha = ta.get("sha256") if isinstance(ta, dict) else None
    hb = tb.get("sha256") if isinstance(tb, dict) else None
    if isinstance(ha, str) and isinstance(hb, str) and ha != hb:
        raise CompareError(
            f"A and B replayed different traces (sha256 {ha[:12]}... in A, {hb[:12]}... in B), "
            "so they share no load to compare: replay the same --trace file in both"
        )


def same_load_flags(a: dict[str, Any], b: dict[str, Any]) -> str:
    """The flags that set a load, for a refusal's 'run both with ...'."""
    if any(isinstance((r.get("workload") or {}).get("trace"), dict) for r in (a, b)):
        return "the same --trace, --trace-speed and -c"
    return "the same --concurrency or --rate"
