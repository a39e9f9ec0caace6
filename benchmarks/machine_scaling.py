"""How well does this machine itself scale? N independent processes, each pinned to a CPU of its
own, doing (a) pure Python work and (b) TCP ping-pong over loopback with a partner pinned to
another CPU: the work each gets done, as a fraction of what one does alone.

Why: client_scaling.py measures felab's client against the goal ">= 0.9 x N times one process
on N free cores". That goal assumes the cores are free: that N busy processes each run as fast
as one. A VM whose vCPUs are one host core's two threads, a clock that drops as more cores wake,
or a network stack that is one shared process (gVisor's netstack runs in its user-space kernel)
breaks that assumption for any program, felab's or not; this says by how much, on the same
CPUs the client used.

    .venv/bin/python benchmarks/machine_scaling.py --counts 1,2,4,8   # prints a table
    .venv/bin/python benchmarks/machine_scaling.py --quick            # a smoke run

client_scaling.py runs it first on its own CPUs and keeps the figures in its JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import socket
import time
from typing import Any

PROBE_S = 1.5
MESSAGE = b"x" * 64


def _pin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})


def _spin(cpu: int, seconds: float, start: Any, out: Any) -> None:
    """Pure Python work: loop iterations a second."""
    _pin(cpu)
    start.wait()
    n, stop = 0, time.monotonic() + seconds
    while True:
        for _ in range(1000):
            n += 1
        if time.monotonic() >= stop:
            break
    out.put(n / seconds)


def _echo(cpu: int, listener: socket.socket) -> None:
    """Echo each message back until the peer closes."""
    _pin(cpu)
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := conn.recv(4096):
        conn.sendall(data)


def _ping(cpu: int, port: int, seconds: float, start: Any, out: Any) -> None:
    """Round trips a second over loopback: a send, a wake-up, a read on each side."""
    _pin(cpu)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    start.wait()
    n, stop = 0, time.monotonic() + seconds
    while time.monotonic() < stop:
        sock.sendall(MESSAGE)
        got = 0
        while got < len(MESSAGE):
            got += len(sock.recv(4096))
        n += 1
    sock.close()
    out.put(n / seconds)


def probe(kind: str, cpus: list[int], partners: list[int], seconds: float = PROBE_S) -> list[float]:
    """Each process's rate with len(cpus) of them running at once."""
    ctx = mp.get_context("fork")
    start, out = ctx.Barrier(len(cpus)), ctx.Queue()
    procs: list[Any] = []
    listeners: list[socket.socket] = []
    for i, cpu in enumerate(cpus):
        if kind == "spin":
            procs.append(ctx.Process(target=_spin, args=(cpu, seconds, start, out)))
        else:
            listener = socket.create_server(("127.0.0.1", 0))
            port = listener.getsockname()[1]
            partner = partners[i % len(partners)]
            procs.append(ctx.Process(target=_echo, args=(partner, listener), daemon=True))
            procs.append(ctx.Process(target=_ping, args=(cpu, port, seconds, start, out)))
            listeners.append(listener)
    for proc in procs:
        proc.start()
    for listener in listeners:  # each echo process holds its own copy
        listener.close()
    rates = [out.get(timeout=seconds + 30) for _ in cpus]
    for proc in procs:
        proc.join(10)
    return rates


def scaling(
    cpus: list[int], partners: list[int], counts: list[int], seconds: float = PROBE_S
) -> dict[str, Any]:
    """For each count N: the median per-process rate over N at once, as a fraction of one alone."""
    result: dict[str, Any] = {"client_cpus": cpus, "partner_cpus": partners, "probe_s": seconds}
    for kind in ("spin", "loopback"):
        alone = None
        rows = {}
        for n in counts:
            if n > len(cpus):
                continue
            rates = sorted(probe(kind, cpus[:n], partners, seconds))
            mid = rates[len(rates) // 2]
            alone = alone or mid
            rows[str(n)] = {
                "median_rate": round(mid, 1),
                "slowest_rate": round(rates[0], 1),
                "fraction_of_one": round(mid / alone, 3),
                "total_x_one": round(sum(rates) / alone, 2),
            }
        result[kind] = rows
    result["kernel"] = platform.release()
    return result


def show_scaling(result: dict[str, Any]) -> str:
    lines = [
        "| processes at once | pure Python, each x alone | total x one "
        "| loopback ping-pong, each x alone | total x one |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n, spin in result["spin"].items():
        loop = result["loopback"].get(n, {})
        lines.append(
            f"| {n} | {spin['fraction_of_one']:.2f} | {spin['total_x_one']:.2f} "
            f"| {loop.get('fraction_of_one', float('nan')):.2f} "
            f"| {loop.get('total_x_one', float('nan')):.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="1,2,4,8", help="processes at once, e.g. 1,2,4,8")
    ap.add_argument("--seconds", type=float, default=PROBE_S, help="length of each probe")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 1 and 2, short probes")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    counts = [int(x) for x in args.counts.split(",")]
    if args.quick:
        counts, args.seconds = [1, 2], 0.2
    top = min(max(counts), len(cpus) // 2 or 1)
    clients, partners = cpus[:top], cpus[top:] or cpus
    result = scaling(clients, partners, counts, args.seconds)
    print(show_scaling(result))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
