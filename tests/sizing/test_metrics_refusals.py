"""A /metrics page that cannot be this server's figures: behind credentials, or another
engine's counters (twentieth sweep (a) A02, A17)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from felab_core.engine.runner import _metrics_snapshot
from felab_core.engine.targets import DEFAULT_TARGETS
from felab_core.sizing.errors import SizingError
from felab_core.sizing.metrics_scrape import scrape

VLLM_PAGE = "vllm:prompt_tokens_total 30\nvllm:generation_tokens_total 24\n"


def _client(status: int, body: str) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(lambda _r: httpx.Response(status, text=body)))


@pytest.mark.parametrize("status", [401, 403])
def test_metrics_behind_credentials_are_not_called_switched_off(status: int) -> None:
    """A17: a 401 got "llama-server needs --metrics, SGLang --enable-metrics" advice."""
    with pytest.raises(SizingError, match="wants credentials for its /metrics") as err:
        scrape("http://h:1", client=_client(status, '{"error":"Unauthorized"}'))
    assert "--metrics" not in str(err.value)


def test_another_engines_counters_are_not_used() -> None:
    """A02: llama.cpp by /props, vLLM's counters at /metrics: "the vllm server" figures were
    saved in a llama.cpp run's record."""
    with pytest.raises(SizingError, match=r"serves vllm's counters, but the server is llama\.cpp"):
        scrape("http://h:1", client=_client(200, VLLM_PAGE), kind="llamacpp")
    assert scrape("http://h:1", client=_client(200, VLLM_PAGE), kind="vllm").engine == "vllm"
    assert scrape("http://h:1", client=_client(200, VLLM_PAGE)).engine == "vllm"


async def test_a_run_notes_another_engines_counters_and_keeps_none() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = VLLM_PAGE.encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        from dataclasses import replace

        target = replace(DEFAULT_TARGETS["llamacpp"], url=f"http://127.0.0.1:{port}")
        notes: list[str] = []
        assert await _metrics_snapshot(target, notes) is None
    finally:
        server.close()
        await server.wait_closed()
    assert len(notes) == 1 and "serves vllm's counters" in notes[0], notes
