"""Ollama's native API and SGLang, which cannot run on this machine.

By default each test talks to the scripted server playing that engine's documented response
shapes. On a machine that has the real thing, name its URL and the same tests time it:
FELAB_TEST_OLLAMA_URL (and FELAB_TEST_OLLAMA_MODEL), FELAB_TEST_SGLANG_URL.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

import pytest

from felab_core.engine.apis import Api
from felab_core.engine.runner import bench_target
from felab_core.engine.server_kinds import ServerKind
from felab_core.engine.targets import DEFAULT_TARGETS
from felab_core.engine.workloads import Workload
from felab_core.lab.scripted_server import Script, ScriptedServer


@dataclass
class Endpoint:
    url: str
    model: str | None
    real: bool


async def _endpoint(env: str, persona: str, model: str | None) -> AsyncIterator[Endpoint]:
    url = os.environ.get(env)
    if url:
        yield Endpoint(url, os.environ.get(env.replace("_URL", "_MODEL"), model), real=True)
        return
    async with ScriptedServer(Script(persona=persona, itl_s=0.002, cold_load_s=1.5)) as server:
        yield Endpoint(server.base_url, model, real=False)


@pytest.fixture
async def ollama() -> AsyncIterator[Endpoint]:
    async for endpoint in _endpoint("FELAB_TEST_OLLAMA_URL", "ollama", "llama3.1:8b"):
        yield endpoint


@pytest.fixture
async def sglang() -> AsyncIterator[Endpoint]:
    async for endpoint in _endpoint("FELAB_TEST_SGLANG_URL", "sglang", None):
        yield endpoint


async def test_ollama_native_api(ollama: Endpoint) -> None:
    target = replace(DEFAULT_TARGETS["ollama"], url=ollama.url, model=ollama.model, note=None)
    result = await bench_target(target, Workload(requests=3, warmup=1, max_tokens=24))
    assert result.identity is not None and result.identity.kind is ServerKind.OLLAMA
    run = result.runs[0]
    assert run.summary.failed == 0
    assert run.summary.token_source == "eval_count"
    for m in run.requests:
        # Ollama cannot be forced past an end token: num_predict is a cap.
        assert m.output_tokens is not None and 0 < m.output_tokens <= 24
        assert m.server_timings is not None and "eval_duration" in m.server_timings
        assert m.server_tps is not None and m.server_tps > 0
    if not ollama.real:
        # The scripted server loads the model on its first request, as a cold Ollama does.
        assert any("cold start in warm-up" in n for n in result.notes)


async def test_sglang_openai_api(sglang: Endpoint) -> None:
    target = replace(DEFAULT_TARGETS["sglang"], url=sglang.url, model=sglang.model, note=None)
    result = await bench_target(target, Workload(requests=3, warmup=0, max_tokens=24))
    assert result.identity is not None and result.identity.kind is ServerKind.SGLANG
    run = result.runs[0]
    assert run.summary.failed == 0 and run.summary.token_source == "usage"
    assert all(m.output_tokens == 24 for m in run.requests)  # ignore_eos forces the length
    assert result.model  # taken from /v1/models when not given
    assert target.api is Api.OPENAI_CHAT
