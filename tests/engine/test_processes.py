"""Runs spread over real client processes against the scripted server."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal

from felab_core.engine.runner import bench_target
from felab_core.engine.targets import DEFAULT_TARGETS, Target, resolve_target
from felab_core.engine.workloads import Workload, arrival_offsets_s
from felab_core.lab.scripted_server import Script, ScriptedServer


def target_for(server: ScriptedServer) -> Target:
    return resolve_target("vllm", targets=DEFAULT_TARGETS, url=server.base_url)


async def test_two_processes_send_one_closed_loop_run() -> None:
    script = Script(persona="vllm", ttft_s=0.01, itl_s=0.005)
    async with ScriptedServer(script) as server:
        wl = Workload(concurrency=(4,), requests=12, warmup=1, max_tokens=6)
        result = await bench_target(target_for(server), wl, processes=2)
    run = result.runs[0]
    assert run.partial is None
    assert len(run.processes) == 2  # each process's own self-check
    assert [m.index for m in run.requests] == list(range(12))
    assert [t.index for t in run.timelines] == list(range(12))
    assert run.summary.ok == 12 and run.summary.output_tokens == 12 * 6
    assert server.max_active_streams == 4
    # Every prompt went once: the warm-up's, then one per request (the nonce differs).
    prompts = [r.body["messages"][0]["content"] for r in server.log]
    assert len(prompts) == 13 and len(set(prompts)) == 13
    assert run.to_json()["partial"] is None


async def test_processes_follow_one_open_loop_schedule() -> None:
    script = Script(persona="vllm", ttft_s=0.005, itl_s=0.002)
    async with ScriptedServer(script) as server:
        wl = Workload(concurrency=(0,), rate=40.0, requests=16, warmup=0, max_tokens=4, seed=7)
        result = await bench_target(target_for(server), wl, processes=3)
    run = result.runs[0]
    assert run.summary.ok == 16 and run.partial is None
    sched = [t.scheduled_ns for t in run.timelines]
    assert all(s is not None for s in sched)
    offsets = list(arrival_offsets_s(40.0, 1.0, 7, count=16, duration_s=None))
    t0 = sched[0]
    assert t0 is not None
    # The same arrival times one process would use, whichever process sent each request.
    for s, offset in zip(sched, offsets, strict=True):
        assert s is not None
        assert abs((s - t0) / 1e9 - offset) < 1e-6
    # Each request's lag behind its arrival time is measured (how small it is on a quiet box
    # is benchmarks/timing_accuracy.py's figure, not a timed assertion on a shared machine).
    assert all(m.dispatch_lag_s is not None for m in run.requests)


async def test_a_process_that_dies_makes_the_run_partial() -> None:
    script = Script(persona="vllm", ttft_s=0.01, itl_s=0.05)
    async with ScriptedServer(script) as server:
        wl = Workload(concurrency=(4,), requests=8, warmup=0, max_tokens=40)

        async def kill_the_second() -> None:
            for _ in range(1000):  # until the processes are sending
                if server.log:
                    break
                await asyncio.sleep(0.02)
            victim = next(p for p in multiprocessing.active_children() if p.name.endswith("-2"))
            assert victim.pid is not None
            os.kill(victim.pid, signal.SIGKILL)

        killer = asyncio.create_task(kill_the_second())
        result = await bench_target(target_for(server), wl, processes=2)
        await killer
    run = result.runs[0]
    assert run.partial == (
        "partial: slice 2 of 2: the process was killed by SIGKILL (out of memory?) "
        "before it sent its records"
    )
    assert len(run.requests) == 4  # the first slice's, said to be partial
    assert run.to_json()["partial"] == run.partial
