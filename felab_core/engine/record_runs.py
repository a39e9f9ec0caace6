"""A run of a `felab bench --json` record held to its own length and workload: no more
requests than the workload sends, none longer than the run, and no more time in flight than
its streams had between them.

Apart from record_reading.py (the record around the runs) and record_requests.py (each
request's own figures), so each stays one job.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from felab_core.engine.record_requests import CompareError, cut, finite

_BROKEN = "the file was edited or broken"
#: A second for the clocks and the run's own edges.
_EDGE_S = 1.0


def check_run_bounds(
    path: Path, i: int, run: dict[str, Any], requests: list[Any], record: dict[str, Any]
) -> None:
    """Run i against its length and its workload: 20 requests copied 50 times and renumbered
    had narrowed an interval, and an end-to-end of 86,399 s inside a 0.44 s run (or in a run
    whose length was deleted, NaN or -1) was "worse". `requests` are the run's requests as
    listed, each already checked on its own."""
    _check_count(path, i, requests, record.get("workload"))
    lasted = _lasted(path, i, run)
    e2es = [r["e2e_s"] for r in requests if finite(r.get("e2e_s"))]
    longest = max(e2es, default=0.0)
    if longest > lasted + _EDGE_S:
        raise CompareError(
            f"{path}: run {i} has a request of {longest:,.6g} s end to end in a run that lasted "
            f"{lasted:,.6g} s: {_BROKEN}"
        )
    first = max((r["ttft_s"] for r in requests if finite(r.get("ttft_s"))), default=0.0)
    if first > lasted + _EDGE_S:
        raise CompareError(
            f"{path}: run {i} has a first token after {first:,.6g} s in a run that lasted "
            f"{lasted:,.6g} s: {_BROKEN}"
        )
    streams = run.get("concurrency")  # closed loop: its users; open loop: its cap (0: none)
    if record.get("spread") is not None or type(streams) is not int or streams < 1:
        return  # slices on several machines each keep their own streams
    busy = math.fsum(e2es)
    if busy > streams * (lasted + _EDGE_S):
        raise CompareError(
            f"{path}: run {i} lists requests of {busy:,.6g} s end to end in all, and its "
            f"{streams:,} stream{'' if streams == 1 else 's'} had {streams * lasted:,.6g} s "
            f"between them in a run of {lasted:,.6g} s: requests were added to the file or "
            f"its length changed: {_BROKEN}"
        )


def _lasted(path: Path, i: int, run: dict[str, Any]) -> float:
    """How long run i lasted, as its summary says: felab writes it for every run."""
    summary = run.get("summary")
    if not isinstance(summary, dict):
        raise CompareError(
            f"{path}: run {i} has no summary: felab writes one for every run, with how long "
            f"it lasted, and without it no request can be held to the run's length: {_BROKEN}"
        )
    said = summary.get("duration_s")
    if said is None:
        raise CompareError(
            f"{path}: run {i} has no summary duration_s (how long the run lasted): felab "
            f"writes it for every run, and without it no request can be held to the run's "
            f"length: {_BROKEN}"
        )
    if not finite(said) or said < 0:
        raise CompareError(
            f"{path}: run {i} has summary duration_s = {cut(said)}, not how long a run lasted "
            f"(seconds, 0 or more): {_BROKEN}"
        )
    return float(said)


def _check_count(path: Path, i: int, requests: list[Any], workload: Any) -> None:
    """No more requests than the workload sends: -n, a trace's lines (the fewer of the two),
    or sessions x turns; a workload with none of these nor a duration is none bench runs."""
    if not isinstance(workload, dict):
        return
    asked, trace = workload.get("requests"), workload.get("trace")
    sessions, turns = workload.get("sessions"), workload.get("turns")
    bounds: list[tuple[int, str]] = []
    if type(sessions) is int:  # conversations send their turns, whatever -n says
        if type(turns) is int:
            bounds.append((sessions * turns, f"{sessions:,} sessions x {turns:,} turns"))
    else:
        if type(asked) is int:
            bounds.append((asked, "-n"))
        lines = trace.get("requests") if isinstance(trace, dict) else None
        if type(lines) is int:
            bounds.append((lines, f"the trace's {lines:,} request{'' if lines == 1 else 's'}"))
    if bounds:
        most, why = min(bounds)
        if len(requests) > most:
            raise CompareError(
                f"{path}: run {i} lists {len(requests):,} requests, and its workload sent "
                f"{most:,} ({why}): requests were added to the file: {_BROKEN}"
            )
        return
    unbounded = ("requests", "duration_s", "sessions", "trace")
    if all(k in workload and workload[k] is None for k in unbounded):
        raise CompareError(
            f"{path}: workload requests is None with no duration_s, sessions or trace: felab "
            f"bench sends a count of requests or for a time, never neither: {_BROKEN}"
        )
