"""Does the client's chunks/s ceiling grow with processes? `felab bench --processes N` on N cores
of its own, against calibration-server processes on the other cores, the offered chunk rate raised
until the client stops keeping up.

The goal: N client processes on N free cores reach >= 0.9 x N times one process's ceiling. On a
2-core box the client and the server share the cores, so this needs a machine with spare ones:
best 2 x max(N) cores, since the servers need up to ~0.7 core per client process.

Each client process gets a CPU of its own (client processes inherit the run's CPU set), one per
physical core as /sys describes them: hyperthread siblings share a core's execution units, so
two clients on siblings, or a client beside a busy server on its sibling, would read as poor
scaling. The calibration servers (felab_core.lab.scripted_server, one per remaining CPU, those
of cores without a client first, all on one port with SO_REUSEPORT so the kernel spreads the
connections) stamp each chunk's send on
CLOCK_MONOTONIC, and the error is measured against those stamps as in timing_accuracy.py. Each
process sends --streams-per-process streams; the chunk rate per process starts at 4,800/s and
grows by a quarter a step until the client stops keeping up, then three halvings of the last
step find the edge. Keeping up: half the chunks read within 10 ms of their arrival, p50 errors
within 1 ms, every token counted (arrival stamps come from the kernel, so the errors alone stay
small while the loop falls seconds behind). The ceiling is the chunks/s ingested in the fastest
run that kept up. A run counts only when the servers kept their schedule (each stream's mean gap
between sends within 10 % of the ITL asked): past that the servers, not the client, set the
pace, and the curve stops there, saying so.

    .venv/bin/python benchmarks/client_scaling.py --processes 1,2,4,8  # client_scaling.json
    .venv/bin/python benchmarks/client_scaling.py --quick              # a smoke run
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine_scaling import scaling, show_scaling  # noqa: E402
from benchmarks.timing_accuracy import (  # noqa: E402
    errors_of,
    free_port,
    machine,
    one_run,
    run_loop,
    server_cmd,
    within,
)

OUT = ROOT / "benchmarks" / "results" / "client_scaling.json"
START_RATE = 4_800.0  # chunks/s per client process at the first step: well inside one's reach
STEP = 1.25
MAX_STEPS = 8
HALVINGS = 3
SERVER_SLACK = 1.10  # a server whose median send gap is 10 % over the ITL fell behind


def start_servers(port: int, itl_ms: float, cores: list[int]) -> list[subprocess.Popen[str]]:
    """One calibration server per core, all listening on `port`."""
    procs = []
    for core in cores:
        cmd = server_cmd(port, itl_ms, 50.0, reuse_port=True)
        procs.append(
            subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                text=True,
                preexec_fn=lambda core=core: os.sched_setaffinity(0, {core}),  # type: ignore[misc]
            )
        )
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("READY"):
            stop(procs)
            raise RuntimeError(f"calibration server did not start: {line!r}")
    return procs


def physical_cores(cpus: list[int]) -> list[list[int]]:
    """The CPUs grouped by the physical core they share (hyperthread siblings), from /sys; a CPU
    whose topology cannot be read counts as a core of its own. A VM shows its own topology: its
    host may still back two vCPUs with one core's two threads."""
    groups: dict[tuple[str, str], list[int]] = {}
    for cpu in cpus:
        where = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            key = (
                (where / "physical_package_id").read_text().strip(),
                (where / "core_id").read_text().strip(),
            )
        except OSError:
            key = ("?", str(cpu))
        groups.setdefault(key, []).append(cpu)
    return list(groups.values())


def placement(cores: list[list[int]], top: int) -> tuple[list[int], list[int], str]:
    """CPUs for up to `top` clients (one per physical core first) and for the servers (the CPUs
    of cores without a client first), and what is shared, in words ("" when nothing is).
    `cores`: the CPUs grouped by physical core (physical_cores)."""
    cpus = [cpu for core in cores for cpu in core]
    clients = [core[0] for core in cores][:top]
    clients += [cpu for core in cores for cpu in core[1:]][: top - len(clients)]
    free = [cpu for core in cores if not set(core) & set(clients) for cpu in core]
    servers = free or [cpu for cpu in cpus if cpu not in clients] or cpus[-1:]
    shared = []
    if len(clients) > len(cores):
        shared.append(f"{top} clients on {len(cores)} physical cores: some on sibling threads")
    if not free:
        shared.append(
            "the servers share physical cores with the clients (sibling threads or the same CPU)"
        )
    return clients, servers, "; ".join(shared)


def busy_s(procs: list[subprocess.Popen[str]]) -> list[float]:
    """CPU seconds each server has used (user + system), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = []
    for proc in procs:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        out.append((int(fields[11]) + int(fields[12])) / ticks)
    return out


def stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(10)


def one(
    clients: list[int],
    per_process_rate: float,
    streams_per_process: int,
    seconds: float,
    servers: list[int],
) -> dict[str, Any]:
    """One run of a client process per CPU in `clients` at this chunk rate per process."""
    n = len(clients)
    streams = streams_per_process * n
    itl_ms = streams_per_process * 1000.0 / per_process_rate
    tokens = max(2, int(seconds * 1000 / itl_ms))
    port = free_port()
    procs = start_servers(port, itl_ms, servers)
    everything = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(clients))  # the client processes inherit it
    try:
        before, started = busy_s(procs), time.monotonic()
        run = run_loop("uvloop", one_run(port, streams, tokens, rounds=2, processes=n))
        wall = time.monotonic() - started
        server_busy = [(b - a) / wall for a, b in zip(before, busy_s(procs), strict=True)]
    finally:
        os.sched_setaffinity(0, everything)
        stop(procs)
    row = errors_of(run)
    row.update(
        server_busy_max=max(server_busy),
        server_kept_up=row["send_gap_p50_ms"] <= SERVER_SLACK * itl_ms,
        processes=n,
        streams=streams,
        itl_ms=round(itl_ms, 3),
        offered_chunks_per_s=streams * 1000.0 / itl_ms,
        partial=run.partial,
        tokens_exact=all(m.output_tokens == tokens == m.counted_chunks for m in run.requests)
        and len(run.requests) == streams * 2,
        load_avg_1m=os.getloadavg()[0],
        warnings=run.client.warnings,
    )
    return row


def show(row: dict[str, Any]) -> str:
    keys = (
        "processes",
        "streams",
        "offered_chunks_per_s",
        "chunks_per_s",
        "ttft_err_p50_ms",
        "ttft_err_p99_ms",
        "itl_err_p50_ms",
        "send_gap_p50_ms",
        "read_lag_p50_ms",
        "server_busy_max",
        "failed",
        "tokens_exact",
    )
    return json.dumps({k: round(row[k], 3) if isinstance(row[k], float) else row[k] for k in keys})


READ_LAG_P50_MS = 10.0


def kept_pace(row: dict[str, Any]) -> bool:
    """The client kept up: it read half its chunks within READ_LAG_P50_MS of their arrival
    (kernel stamps keep the errors small long after the loop has fallen seconds behind, so the
    errors alone would rate a drowning client as fine), p50 errors within 1 ms, nothing failed,
    every token counted."""
    lag = row.get("read_lag_p50_ms")
    return (
        lag is not None
        and lag <= READ_LAG_P50_MS
        and within(row, 1.0, "p50")
        and bool(row["tokens_exact"])
    )


def ceiling(
    clients: list[int],
    streams_per_process: int,
    seconds: float,
    servers: list[int],
    steps: int,
    halvings: int,
    start: float = START_RATE,
    step: float = STEP,
) -> tuple[float, bool, list[dict[str, Any]]]:
    """The fastest ingested chunks/s the client kept up with, and whether the servers set the
    limit: up in steps, then halvings (geometric) of the step where it broke."""
    rows: list[dict[str, Any]] = []
    passed, failed_at, server_bound = None, None, False
    rate = start

    def attempt(rate: float) -> bool | None:
        """True within the bound, False past it, None where the servers fell behind."""
        row = one(clients, rate, streams_per_process, seconds, servers)
        rows.append(row)
        print(f"  {show(row)}", flush=True)
        if not row["server_kept_up"]:
            return None
        return kept_pace(row)

    for _ in range(steps):
        verdict = attempt(rate)
        if verdict is None:
            server_bound = True
            failed_at = rate
            break
        if verdict:
            passed = rate
            if failed_at is not None:
                break
            rate *= step
        else:  # past the edge: stop if something passed, else step down until something does
            failed_at = rate
            if passed is not None:
                break
            rate /= step * step
    if passed is not None and failed_at is not None:
        low, high = passed, failed_at
        for _ in range(halvings):
            mid = math.sqrt(low * high)
            verdict = attempt(mid)
            server_bound = server_bound or verdict is None
            low, high = (mid, high) if verdict else (low, mid)
    best = max(
        (r["chunks_per_s"] for r in rows if r["server_kept_up"] and kept_pace(r)),
        default=float("nan"),
    )
    return best, server_bound, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: tiny, writes nothing")
    ap.add_argument("--processes", default="1,2,4,8", help="client process counts, e.g. 1,2,4,8")
    ap.add_argument("--streams-per-process", type=int, default=512)
    ap.add_argument("--seconds", type=float, default=1.5, help="length of each stream")
    ap.add_argument("--start-rate", type=float, default=START_RATE, help="chunks/s a process")
    ap.add_argument("--step", type=float, default=STEP, help="rate grows by this factor a step")
    ap.add_argument("--repeats", type=int, default=1, help="the whole curve this many times")
    ap.add_argument(
        "--budget-s", type=float, help="start no new curve after this many seconds (a lease)"
    )
    ap.add_argument("--out", type=Path, default=OUT, help="where the figures go (JSON)")
    args = ap.parse_args()
    counts = [int(x) for x in args.processes.split(",")]
    cores = sorted(os.sched_getaffinity(0))
    if args.quick:
        counts, streams, seconds, steps, halvings = [1, 2], 8, 0.3, 2, 1
    else:
        streams, seconds = args.streams_per_process, args.seconds
        steps, halvings = MAX_STEPS, HALVINGS
    top = min(max(counts), len(cores))
    # The servers take every core the clients do not; on a small box they share with them.
    topology = physical_cores(cores)
    clients, servers, shared = placement(topology, top)
    physical = len(topology)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # thousands of sockets
    print(
        f"{machine()}, {physical} physical cores; clients on CPUs {clients}, "
        f"{len(servers)} server process(es) on CPUs {servers}; "
        f"load average before {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    if shared:
        print(f"note: {shared}", flush=True)
    record: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "server_processes": len(servers),
        "physical_cores": physical,
        "client_cpus": clients,
        "server_cpus": servers,
        "shared": shared,
        "streams_per_process": streams,
        "seconds": seconds,
        "ceilings": {},
        "runs": [],
    }
    # The machine's own scaling on the same CPUs, so that a shortfall can be laid where it lies.
    probe_s = 0.3 if args.quick else 1.5
    fits = [n for n in counts if n <= len(clients)]
    record["machine_scaling"] = scaling(clients, servers, fits, probe_s)
    print("the machine alone (benchmarks/machine_scaling.py):", flush=True)
    print(show_scaling(record["machine_scaling"]), flush=True)
    began = time.monotonic()
    for repeat in range(args.repeats):
        for n in counts:
            if args.budget_s is not None and time.monotonic() - began > args.budget_s:
                print(f"{n} processes, curve {repeat + 1}: skipped, past --budget-s", flush=True)
                continue
            if n > len(cores):
                print(f"{n} processes: skipped, only {len(cores)} cores", flush=True)
                continue
            print(f"{n} process(es), curve {repeat + 1}:", flush=True)
            best, server_bound, rows = ceiling(
                clients[:n], streams, seconds, servers, steps, halvings, args.start_rate, args.step
            )
            record["ceilings"].setdefault(str(n), []).append(best)
            if server_bound:
                record.setdefault("server_bound", []).append({"processes": n, "repeat": repeat})
            record["runs"].extend(dict(r, repeat=repeat) for r in rows)
            topped = all(kept_pace(r) and r["server_kept_up"] for r in rows)
            if topped:
                record.setdefault("never_failed", []).append({"processes": n, "repeat": repeat})
            said = (
                " (the servers fell behind first: a lower bound)"
                if server_bound
                else " (never failed: a lower bound; raise --start-rate)"
                if topped
                else ""
            )
            print(f"  ceiling: {best:,.0f} chunks/s read in time{said}", flush=True)
            if not args.quick:  # after each, so a cut-short run keeps what it measured
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(record, indent=1))
    ones = record["ceilings"].get("1")
    base = statistics.median(ones) if ones else float("nan")
    print(
        "\n| client processes | ceiling chunks/s (median) | each curve | x one process "
        "| goal 0.9 x N |"
    )
    print("|---:|---:|---|---:|---|")
    for n in counts:
        values = record["ceilings"].get(str(n))
        if not values:
            continue
        mid = statistics.median(values)
        ratio = mid / base if base == base and base > 0 else float("nan")
        meets = "yes" if ratio >= 0.9 * n else "no"
        each = ", ".join(f"{v:,.0f}" for v in values)
        print(f"| {n} | {mid:,.0f} | {each} | {ratio:.2f} | {meets} |")
    if not args.quick:
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
