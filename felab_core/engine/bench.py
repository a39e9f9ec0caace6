"""The benchmark service: what the CLI, the worker and the tests call to time servers.

Targets run one at a time (a laptop cannot hold three copies of a model under load at once);
a target that cannot be timed (unreachable, or another kind of server than its name says) is
reported and the others still run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from felab_core.engine.client import ClientLimits
from felab_core.engine.measure import RunResult, TargetResult
from felab_core.engine.metrics import SLO
from felab_core.engine.probe import IdentityError
from felab_core.engine.results import append_csv, csv_row, json_paths, write_json
from felab_core.engine.runner import bench_target
from felab_core.engine.shards import LateStart, Shard
from felab_core.engine.targets import Target
from felab_core.engine.workloads import Workload

ProgressFn = Callable[[Target, str, int, int | None], None]


@dataclass(slots=True)
class BenchOutcome:
    target: Target
    result: TargetResult | None = None
    error: str | None = None  # the target could not be timed at all

    @property
    def failed_requests(self) -> int:
        return self.result.failed if self.result else 0

    @property
    def timed_nothing(self) -> bool:
        """Every request failed (an HTML page, a server that never answers): nothing was timed,
        which is a target that could not be timed, not a run with some failures."""
        r = self.result
        return r is not None and not r.interrupted and all(_nothing_in(run) for run in r.runs)

    @property
    def ramps_took_all(self) -> bool:
        """Requests were answered, but each fell in --ramp-up/--ramp-down: the flags left nothing
        to measure, not the server (thirteenth sweep: it exited as 'unreachable')."""
        r = self.result
        return (
            r is not None
            and not r.interrupted
            and bool(r.runs)
            and all(
                run.summary.ok > 0
                and run.summary.window is not None
                and run.summary.window["kept"] == 0
                for run in r.runs
            )
        )


def _nothing_in(run: RunResult) -> bool:
    """No request was timed, or none fell in the steady window the ramps left."""
    window = run.summary.window
    return run.summary.ok == 0 or (window is not None and window["kept"] == 0)


async def run_bench(
    targets: list[Target],
    workload: Workload,
    *,
    slo: SLO | None = None,
    limits: ClientLimits | None = None,
    progress: ProgressFn | None = None,
    check_server: bool = True,
    processes: int | None = 1,
    shard: Shard | None = None,
) -> list[BenchOutcome]:
    """Time each target; `processes` client processes a run (None: chosen per run); `shard`,
    this machine's slice of a run spread over several."""
    outcomes: list[BenchOutcome] = []
    for target in targets:

        def tick(label: str, done: int, total: int | None, target: Target = target) -> None:
            if progress:
                progress(target, label, done, total)

        try:
            result = await bench_target(
                target,
                workload,
                slo=slo,
                limits=limits,
                progress=tick,
                check_server=check_server,
                processes=processes,
                shard=shard,
            )
        except (IdentityError, LateStart) as exc:
            outcomes.append(BenchOutcome(target, error=str(exc)))
            continue
        outcomes.append(BenchOutcome(target, result))
        if result.interrupted:
            break  # Ctrl-C: the remaining targets are not started
    return outcomes


def save_outcomes(
    outcomes: list[BenchOutcome], *, csv_path: Path | None, json_path: Path | None
) -> list[Path]:
    """Append the CSV rows and write the JSON records; return the files written."""
    written: list[Path] = []
    results = [o.result for o in outcomes if o.result is not None]
    # An interrupted or partial run is short of its preset: it stays out of the results file.
    complete = [r for r in results if not r.interrupted and not r.partial]
    if csv_path is not None and complete:
        # A run whose steady window held no request has no figures: a row of dashes.
        rows = [
            csv_row(r, run)
            for r in complete
            for run in r.runs
            if run.summary.ok == 0 or not _nothing_in(run)
        ]
        if rows:
            append_csv(csv_path, rows)
            written.append(csv_path)
    if json_path is not None and results:
        paths = json_paths(json_path, [r.target.name for r in results])
        for r in results:
            write_json(paths[r.target.name], r)
            written.append(paths[r.target.name])
    return written
