"""A server's answer that felab's own limits cut (its size, its deadline) or a server error is
the server's fault, exit 3, never "not llama-server" or a parse error of the part that came
(the eighteenth sweep, group c: M5)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from felab_core import bounded_get
from felab_core.sizing import slots_live, vllm_live
from felab_core.sizing.errors import BadAnswer

PROPS = b'{"total_slots": 4, "default_generation_settings": {"n_ctx": 2048}}'
METRICS = (
    b'# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size="16",'
    b'num_gpu_blocks="8234",kv_cache_size_tokens="131744"} 1.0\n'
)


class _Drip(httpx.SyncByteStream):
    """A whole answer sent a few bytes at a time, slower than the deadline."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def __iter__(self) -> Iterator[bytes]:
        for start in range(0, len(self.body), 8):
            time.sleep(0.05)
            yield self.body[start : start + 8]


def _server(path: str, make: Callable[[], httpx.Response]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == path:
            return make()
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": []})
        return httpx.Response(404)

    return httpx.Client(transport=httpx.MockTransport(handler))


def _too_long(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body + b" " * (bounded_get.MAX_ANSWER_BYTES + 1))


def _dripped(body: bytes) -> httpx.Response:
    return httpx.Response(200, stream=_Drip(body))


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (_too_long, "more than 8 MiB"),
        (_dripped, "still coming after"),
        (lambda body: httpx.Response(500, text="boom"), "answered HTTP 500 (a server error)"),
    ],
    ids=["too-long", "too-slow", "http-500"],
)
def test_props_and_metrics_cut_or_failing_are_the_servers_fault(
    monkeypatch: pytest.MonkeyPatch, answer: Callable[[bytes], httpx.Response], says: str
) -> None:
    """M5: /props dripped past the deadline was "does not look like llama-server" (exit 2);
    /metrics so was "could not be parsed as Prometheus format", and its HTTP 500 exit 2."""
    monkeypatch.setattr(bounded_get, "WHOLE_ASK_S", 0.3)
    with pytest.raises(BadAnswer) as props:
        slots_live.read_slots("http://llama", client=_server("/props", lambda: answer(PROPS)))
    assert str(props.value).startswith("http://llama/props ") and says in str(props.value)
    with pytest.raises(BadAnswer) as metrics:
        vllm_live.read_live_vllm("http://vllm", client=_server("/metrics", lambda: answer(METRICS)))
    assert str(metrics.value).startswith("http://vllm/metrics ") and says in str(metrics.value)


def test_slots_not_enabled_is_still_no_fault() -> None:
    """llama-server answers /slots with 501 unless started with --slots: not a failure."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/props":
            return httpx.Response(200, content=PROPS)
        if request.url.path == "/slots":
            return httpx.Response(501, json={"error": {"message": "not supported"}})
        return httpx.Response(404)

    live = slots_live.read_slots(
        "http://llama", client=httpx.Client(transport=httpx.MockTransport(handler))
    )
    assert (live.total_slots, live.slots_endpoint) == (4, False)


@pytest.mark.parametrize("status", [401, 403])
def test_props_behind_an_api_key_says_so(status: int) -> None:
    """Twentieth sweep (c) C13: llama-server --api-key answers /props with 401, which was "does
    not look like llama-server" (exit 2) with advice about vLLM and Ollama."""
    client = _server("/props", lambda: httpx.Response(status, json={"error": "Invalid API Key"}))
    with pytest.raises(BadAnswer, match=f"answered HTTP {status}: the server wants an API key"):
        slots_live.read_slots("http://llama", client=client)


@pytest.mark.parametrize(
    "body", ["garbage {{{ not prometheus\n", 'vllm:cache_config_info{block_size="16" 1.0\n']
)
def test_metrics_that_are_not_prometheus_text_are_the_servers_fault(body: str) -> None:
    """Sweep 20 (c) C19: exit 2 (fix the input) with "could not convert string to float:
    '{{{'", and no address; a NaN counter on the same endpoint was already exit 3."""
    answer = httpx.Response(200, text=body)
    with pytest.raises(BadAnswer) as caught:
        vllm_live.read_live_vllm("http://vllm", client=_server("/metrics", lambda: answer))
    said = str(caught.value)
    assert said.startswith("http://vllm/metrics answered text that is not Prometheus text"), said
    assert "float" not in said
