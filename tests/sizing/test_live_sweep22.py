"""Sweep 22 (c) C12: a llama-server's /v1/models n_ctx_train and size are bounded like its other
figures ("the model was trained for -5 tokens" had been said)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from felab_core.sizing import slots_live, vllm_live
from felab_core.sizing.errors import BadAnswer


def _llama(meta: dict[str, Any]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/props":
            body: Any = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 4}
            return httpx.Response(200, json=body)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "meta": meta}]})
        return httpx.Response(404)

    return httpx.Client(transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("meta", "says"),
    [
        ({"n_ctx_train": -5}, "n_ctx_train = -5 in /v1/models"),
        ({"n_ctx_train": 0}, "n_ctx_train = 0 in /v1/models"),
        ({"n_ctx_train": 10**30}, "n_ctx_train = 1000000000000000000000000000000"),
        ({"n_ctx_train": 8192, "size": -100}, "size = -100 in /v1/models"),
    ],
    ids=["negative", "zero", "huge", "size"],
)
def test_an_impossible_trained_length_or_size_is_refused(meta: dict[str, Any], says: str) -> None:
    with pytest.raises(BadAnswer, match=says):
        slots_live.read_slots("http://llama", client=_llama(meta))


def test_a_real_trained_length_and_size_still_read() -> None:
    live = slots_live.read_slots("http://llama", client=_llama({"n_ctx_train": 8192, "size": 7}))
    assert (live.n_ctx_train, live.model_bytes) == (8192, 7)


def test_a_concurrency_far_from_the_models_length_is_not_called_the_one_to_trust() -> None:
    """C11: /v1/models' 131,072 beside 19.53x of 160,000 tokens (8,192's figure, 16x apart)
    had been "a hybrid-model effect ... its own figure is the one to trust"."""
    metrics = (
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="10000",'
        'kv_cache_size_tokens="160000",kv_cache_max_concurrency="19.53"} 1.0\n'
    )
    reading = vllm_live.reading_from_metrics(metrics, max_len=131_072)
    notes = " ".join(reading.consistency_notes())
    assert "one to trust" not in notes
    assert "16.0x apart" in notes and "131,072 is not the length vLLM printed" in notes
    assert reading.capacity().whole_requests == 1
