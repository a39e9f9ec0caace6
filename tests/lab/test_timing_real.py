"""The timing engine against real engines: counts, identity, server figures, and agreement with
llama.cpp's own decode timings."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from felab_core.engine.apis import Api
from felab_core.engine.probe import IdentityError, identify
from felab_core.engine.runner import bench_target
from felab_core.engine.server_kinds import ServerKind
from felab_core.engine.targets import DEFAULT_TARGETS, Target
from felab_core.engine.workloads import Workload
from tests.lab_fixtures import RunningServer


def target(server: RunningServer, name: str, api: Api = Api.OPENAI_CHAT) -> Target:
    model = None if server.engine == "llamacpp" else server.model
    return replace(DEFAULT_TARGETS[name], url=server.base_url, model=model, api=api, note=None)


@pytest.mark.parametrize("api", [Api.OPENAI_CHAT, Api.OPENAI_COMPLETIONS])
async def test_llamacpp_counts_match_usage_and_chunks(
    llama_server: RunningServer, api: Api
) -> None:
    wl = Workload(concurrency=(1, 2), requests=4, warmup=1, max_tokens=48)
    result = await bench_target(target(llama_server, "llamacpp", api), wl)
    assert result.identity is not None and result.identity.kind is ServerKind.LLAMACPP
    for run in result.runs:
        assert run.summary.failed == 0
        assert run.summary.token_source == "usage"
        for m in run.requests:
            assert m.output_tokens == 48 == m.counted_chunks
        # /metrics was scraped around the run and saw what the client saw.
        assert run.server_metrics is not None
        assert run.server_metrics["generation_tokens"] == 4 * 48


async def test_mlx_counts_and_identity(mlx_server: RunningServer) -> None:
    wl = Workload(requests=3, warmup=1, max_tokens=32)
    result = await bench_target(target(mlx_server, "mlx"), wl)
    assert result.identity is not None and result.identity.kind is ServerKind.MLX, result.notes
    s = result.runs[0].summary
    assert (s.ok, s.failed, s.token_source) == (3, 0, "usage")
    assert all(m.output_tokens == 32 == m.counted_chunks for m in result.runs[0].requests)


async def test_the_same_greedy_text_from_both_engines(
    llama_server: RunningServer, mlx_server: RunningServer
) -> None:
    wl = Workload(requests=1, warmup=0, max_tokens=24)
    texts = []
    for server, name in ((llama_server, "llamacpp"), (mlx_server, "mlx")):
        result = await bench_target(target(server, name), wl)
        texts.append("".join(c.text for c in result.runs[0].timelines[0].content_chunks()))
    assert texts[0] == texts[1] == llama_server.tiny.expected_text(24)


async def test_a_real_server_is_not_timed_under_another_name(
    llama_server: RunningServer, mlx_server: RunningServer
) -> None:
    assert (await identify(llama_server.base_url)).kind is ServerKind.LLAMACPP
    assert (await identify(mlx_server.base_url)).kind is ServerKind.MLX
    with pytest.raises(IdentityError, match=r"is llama\.cpp"):
        await bench_target(target(llama_server, "mlx"), Workload(requests=1))
    with pytest.raises(IdentityError, match="is MLX"):
        await bench_target(target(mlx_server, "llamacpp"), Workload(requests=1))


async def test_writing_speed_agrees_with_llamacpp_timings(slow_llama_server: RunningServer) -> None:
    """On a model where decoding dominates, the client's writing speed is within 5 % of the
    server's own predicted_per_second."""
    wl = Workload(requests=5, warmup=1, max_tokens=96)
    result = await bench_target(target(slow_llama_server, "llamacpp"), wl)
    requests = result.runs[0].requests
    client = statistics.median(m.writing_tps for m in requests if m.writing_tps)
    server = statistics.median(m.server_tps for m in requests if m.server_tps)
    assert client == pytest.approx(server, rel=0.05), (client, server)
