"""Workloads end to end against the scripted server: closed loop, open loop, warm-up, sweep."""

from __future__ import annotations

import pytest

from felab_core.engine.apis import Api
from felab_core.engine.measure import client_check
from felab_core.engine.metrics import RequestMetrics
from felab_core.engine.probe import IdentityError
from felab_core.engine.runner import bench_target
from felab_core.engine.server_kinds import ServerKind
from felab_core.engine.targets import DEFAULT_TARGETS, Target, resolve_target
from felab_core.engine.trace import Trace, TraceRequest
from felab_core.engine.workloads import PromptPlan, Workload, arrival_offsets_s
from felab_core.lab.scripted_server import Script, ScriptedServer


def target_for(server: ScriptedServer, name: str = "llamacpp", api: Api | None = None) -> Target:
    return resolve_target(name, targets=DEFAULT_TARGETS, url=server.base_url, api=api)


async def test_closed_loop_sweep_holds_the_asked_concurrency() -> None:
    script = Script(persona="llamacpp", ttft_s=0.01, itl_s=0.005)
    async with ScriptedServer(script) as server:
        peaks = []
        runs = []
        for c in (1, 4):
            server.max_active_streams = 0
            result = await bench_target(
                target_for(server), Workload(concurrency=(c,), requests=12, warmup=0, max_tokens=8)
            )
            peaks.append(server.max_active_streams)
            runs.extend(result.runs)
    assert peaks == [1, 4]
    assert [r.summary.ok for r in runs] == [12, 12]
    assert all(r.summary.token_source == "usage" for r in runs)


async def test_warmup_requests_are_sent_but_not_counted() -> None:
    async with ScriptedServer(Script(persona="llamacpp")) as server:
        result = await bench_target(
            target_for(server), Workload(requests=3, warmup=2, max_tokens=4)
        )
    assert len(server.log) == 5
    assert len(result.warmup) == 2
    assert result.runs[0].summary.ok == 3


async def test_two_quick_runs_have_two_start_times() -> None:
    """Fifteenth sweep M1: `bench --repeat 3` on a fast server began its runs in one second;
    stamped to the second, their rows read as one run edited, and felab's own CSV would not
    import."""
    async with ScriptedServer(Script(persona="llamacpp", ttft_s=0.001, itl_s=0.001)) as server:
        work = Workload(requests=1, warmup=0, max_tokens=2)
        first = await bench_target(target_for(server), work)
        second = await bench_target(target_for(server), work)
    assert first.started_at != second.started_at
    assert len(first.started_at.split("T")[1].split("+")[0]) == len("10:00:00.123")


async def test_forces_the_length_on_servers_that_allow_it() -> None:
    async with ScriptedServer(Script(persona="llamacpp")) as server:
        await bench_target(target_for(server), Workload(requests=1, warmup=0, max_tokens=9))
    assert server.log[0].body["ignore_eos"] is True
    async with ScriptedServer(Script(persona="ollama")) as server:
        await bench_target(
            target_for(server, "ollama"), Workload(requests=1, warmup=0, max_tokens=9)
        )
    body = server.log[0].body
    assert body["options"]["num_predict"] == 9
    assert "ignore_eos" not in body
    assert body["model"] == "llama3.1:8b"


async def test_open_loop_sends_on_an_absolute_schedule() -> None:
    script = Script(persona="vllm", ttft_s=0.005, itl_s=0.002)
    async with ScriptedServer(script) as server:
        wl = Workload(concurrency=(0,), rate=50.0, requests=20, warmup=0, max_tokens=4, seed=7)
        result = await bench_target(target_for(server, "vllm"), wl)
    run = result.runs[0]
    assert run.summary.ok == 20
    # Sends follow the seeded schedule: lateness small, never cumulative.
    lags = [m.dispatch_lag_s for m in run.requests]
    assert all(lag is not None and lag < 0.02 for lag in lags), lags
    assert run.summary.ttft_from_schedule_s is not None
    assert run.summary.e2e_from_schedule_s is not None
    offsets = list(arrival_offsets_s(50.0, 1.0, 7, count=20, duration_s=None))
    sched = [t.scheduled_ns for t in run.timelines]
    assert sched[0] is not None and sched[-1] is not None
    assert (sched[-1] - sched[0]) / 1e9 == pytest.approx(offsets[-1], abs=1e-6)
    # vLLM needs a model name: taken from /v1/models.
    assert server.log[0].body["model"] == "felab-scripted"


async def test_open_loop_cap_makes_queueing_visible() -> None:
    script = Script(persona="vllm", ttft_s=0.05, itl_s=0.01)
    async with ScriptedServer(script) as server:
        wl = Workload(concurrency=(1,), rate=100.0, requests=6, warmup=0, max_tokens=5)
        result = await bench_target(target_for(server, "vllm"), wl)
    run = result.runs[0]
    assert server.max_active_streams == 1
    assert run.client.queued_requests >= 4
    assert any("waited for a free slot" in w for w in run.client.warnings)
    s = run.summary
    assert s.e2e_s is not None and s.e2e_from_schedule_s is not None
    assert s.e2e_from_schedule_s.max > s.e2e_s.max + 0.1


async def test_duration_ends_a_run() -> None:
    async with ScriptedServer(Script(persona="llamacpp", ttft_s=0.01, itl_s=0.01)) as server:
        wl = Workload(requests=None, duration_s=0.5, warmup=0, max_tokens=5)
        result = await bench_target(target_for(server), wl)
    s = result.runs[0].summary
    assert 3 <= s.ok <= 12
    assert s.duration_s < 1.0


async def test_failures_are_counted_and_the_run_goes_on() -> None:
    async with ScriptedServer(Script(persona="llamacpp", fault="http500")) as server:
        result = await bench_target(target_for(server), Workload(requests=4, warmup=0))
    s = result.runs[0].summary
    assert (s.ok, s.failed) == (0, 4)
    assert s.errors == {"HTTP 500": 4}
    assert result.failed == 4


async def test_refuses_to_time_one_server_under_another_name() -> None:
    async with ScriptedServer(Script(persona="ollama")) as server:
        with pytest.raises(IdentityError, match=r"is Ollama .* not MLX"):
            await bench_target(target_for(server, "mlx"), Workload(requests=1))
    assert server.log == []  # nothing was timed


async def test_ollama_cold_load_in_warmup_is_reported() -> None:
    script = Script(persona="ollama", cold_load_s=3.0)
    async with ScriptedServer(script) as server:
        result = await bench_target(
            target_for(server, "ollama"), Workload(requests=2, warmup=1, max_tokens=3)
        )
    assert any("cold start in warm-up" in n for n in result.notes)
    assert result.runs[0].summary.cold_starts == []


async def test_generic_openai_target_is_not_identity_checked() -> None:
    async with ScriptedServer(Script(persona="none")) as server:
        t = Target("custom", ServerKind.OPENAI, server.base_url, Api.OPENAI_COMPLETIONS, "m")
        result = await bench_target(t, Workload(requests=2, warmup=0, max_tokens=3))
    assert result.runs[0].summary.ok == 2
    assert server.log[0].path == "/v1/completions"


def test_prompts_are_seeded_with_a_shared_prefix_and_a_nonce() -> None:
    plan = PromptPlan(prompt_tokens=100, shared_prefix_tokens=40, seed=5)
    a, b = (p for p, _ in zip(plan.prompts(), range(2), strict=False))
    prefix_a = " ".join(a.split()[:40])
    assert b.startswith(prefix_a)
    assert a != b
    again = next(PromptPlan(prompt_tokens=100, shared_prefix_tokens=40, seed=5).prompts())
    assert again == a
    assert 90 <= len(a.split()) <= 110


def test_poisson_arrivals_have_the_asked_mean_rate() -> None:
    offsets = list(arrival_offsets_s(20.0, 1.0, 1, count=4000, duration_s=None))
    assert offsets[-1] / (len(offsets) - 1) == pytest.approx(1 / 20.0, rel=0.05)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"concurrency": (0,)}, "concurrency"),
        ({"requests": 0}, "--requests"),
        ({"requests": None, "duration_s": None}, "--requests N or --duration"),
        ({"prompt_tokens": 10, "shared_prefix_tokens": 10}, "smaller than --prompt-tokens"),
        ({"rate": -1.0}, "--rate"),
    ],
)
def test_bad_workloads_are_refused_with_the_flag_to_fix(
    changes: dict[str, object], message: str
) -> None:
    from dataclasses import replace

    with pytest.raises(ValueError, match=message):
        replace(Workload(), **changes).validate()  # type: ignore[arg-type]


def test_the_comma_advice_is_given_only_where_a_comma_split_the_number() -> None:
    """Eighteenth sweep (a) L3: -c 0 was told "write 1000, not 1,000"."""
    from dataclasses import replace

    with pytest.raises(ValueError) as alone:
        replace(Workload(), concurrency=(0,)).validate()
    assert "1,000" not in str(alone.value)
    with pytest.raises(ValueError, match="write 1000, not 1,000"):
        replace(Workload(), concurrency=(1, 0)).validate()


async def test_per_chunk_usage_makes_the_first_chunk_count_exact() -> None:
    # A first chunk with 5 tokens, then one per chunk: 20 tokens in 16 chunks, 10 ms apart.
    script = Script(persona="vllm", ttft_s=0.01, itl_s=0.01, first_chunk_tokens=5)
    wl = Workload(requests=2, warmup=0, max_tokens=20)
    async with ScriptedServer(script) as server:
        vllm = await bench_target(target_for(server, "vllm"), wl)
        generic = await bench_target(
            Target("custom", ServerKind.OPENAI, server.base_url, Api.OPENAI_CHAT, "m"), wl
        )
    assert server.log[0].body["stream_options"]["continuous_usage_stats"] is True
    exact = vllm.runs[0].requests[0]
    assert exact.first_chunk_tokens == 5
    assert exact.tpot_s == pytest.approx(0.010, rel=0.15)
    # Without per-chunk usage n1 is estimated (20 / 16 chunks) and TPOT comes out short.
    estimated = generic.runs[0].requests[0]
    assert estimated.first_chunk_tokens == pytest.approx(1.25)
    assert estimated.tpot_s is not None and estimated.tpot_s < 0.0085


def test_a_machine_without_a_name_writes_a_host_rows_can_be_imported_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import platform

    from felab_core.engine.runner import this_host

    monkeypatch.setattr(platform, "node", lambda: "")
    assert this_host() == "unnamed-host"
    monkeypatch.setattr(platform, "node", lambda: "  mac-mini ")
    assert this_host() == "mac-mini"


async def test_a_server_that_never_answers_the_warm_up_is_not_sent_the_run() -> None:
    """Keep-alive comments and then silence (a queue that never moves): the warm-up runs out of
    time without a token, and the run's requests are not each held as long (eighth sweep: 9 x
    --timeout, 90 minutes on the defaults)."""
    from felab_core.engine.client import ClientLimits

    script = Script(persona="llamacpp", fault="stall", fault_after=0, keepalive_comments=3)
    limits = ClientLimits(total=0.3, stall=5, connect=2)
    async with ScriptedServer(script) as server:
        with pytest.raises(IdentityError, match=r"the warm-up got no token .*\(timeout:") as no:
            await bench_target(
                target_for(server), Workload(requests=8, warmup=1, max_tokens=4), limits=limits
            )
        assert len(server.log) == 1  # the warm-up only
    # thirteenth sweep: it answered, so "takes a request and never answers" misled
    assert "answered (HTTP 200) and then sent only keep-alive comments (3)" in str(no.value)


def test_a_late_or_waiting_replay_is_told_of_what_it_had() -> None:
    """Eighteenth sweep (a2) L11: a trace replay with no cap was told it 'could not keep up with
    --rate' and that requests 'waited for a free slot under the --concurrency cap'."""
    late = [
        RequestMetrics(index=i, ok=True, error=None, dispatch_lag_s=0.5, queue_wait_s=0.01)
        for i in range(4)
    ]
    trace = Trace("t.jsonl", "0" * 64, (TraceRequest(0.0, 5, 2, ()),))
    replay = " | ".join(client_check([], late, [], Workload(trace=trace), 0).warnings)
    assert "keep up with the trace's times" in replay and "--rate" not in replay
    assert "4 requests waited to leave after their send time (no --concurrency cap" in replay
    assert "free slot" not in replay
    rate = " | ".join(client_check([], late, [], Workload(rate=5.0), 2).warnings)
    assert "keep up with --rate" in rate and "free slot under the --concurrency cap" in rate


async def test_llamacpp_timed_under_a_name_it_does_not_serve_is_filed_under_its_own() -> None:
    """Twentieth sweep (a) A09: llama-server answers with the model it loaded whatever the
    request names; `--model llama-3.1-70b` filed a small model's speed under a 70B name."""
    from dataclasses import replace

    script = Script(persona="llamacpp", model="qwen2.5-0.5b-q4.gguf")
    async with ScriptedServer(script) as server:
        workload = Workload(requests=1, warmup=0, max_tokens=4)
        wrong = replace(target_for(server), model="llama-3.1-70b")
        result = await bench_target(wrong, workload)
        right = await bench_target(replace(wrong, model="/models/Qwen2.5-0.5B-q4.gguf"), workload)
    assert result.model == "qwen2.5-0.5b-q4.gguf"
    assert result.to_json()["target"]["model"] == "qwen2.5-0.5b-q4.gguf"
    assert any("not the model given ('llama-3.1-70b')" in n for n in result.notes), result.notes
    assert right.model == "/models/Qwen2.5-0.5B-q4.gguf"  # the same file, named by its path
    assert not any("not the model given" in n for n in right.notes)
