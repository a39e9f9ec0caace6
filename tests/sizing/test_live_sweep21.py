"""Sweep 21 (c): what a live server says, held to the model (C6) and its refusals (C9); a log
in UTF-16 without a byte-order mark or appended to UTF-8 (C12, C13)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from felab_core.sizing import SizingError, slots_live, vllm_live, vllm_log
from felab_core.sizing.errors import BadAnswer
from felab_core.sizing.model_shape import resolve_shape


def _llama(per_slot: int, seats: int, train: int | None) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/props":
            body: Any = {
                "default_generation_settings": {"n_ctx": per_slot},
                "total_slots": seats,
            }
            return httpx.Response(200, json=body)
        if request.url.path == "/v1/models":
            meta = {} if train is None else {"n_ctx_train": train}
            return httpx.Response(200, json={"data": [{"id": "m", "meta": meta}]})
        return httpx.Response(404)

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_live_seats_past_the_servers_trained_context_are_said() -> None:
    """C6: seats of 32,768 tokens beside a model trained for 8,192 were promised unsaid."""
    v = slots_live.read_live("http://llama", need=20_000, client=_llama(32_768, 2, 8192))
    assert "reports seats of 32,768 tokens, and the model was trained for 8,192" in v.explanation
    assert "--need 20,000 is past it" in v.explanation


def test_live_seats_past_the_given_models_context_are_said() -> None:
    shape = resolve_shape(model="llama-3.1-8b")
    assert shape.context_length == 131_072
    v = slots_live.read_live("http://llama", shape=shape, client=_llama(262_144, 1, None))
    assert "trained for 131,072 tokens (Llama 3.1 8B's)" in v.explanation
    assert "is the server running Llama 3.1 8B?" in v.explanation


def test_live_seats_within_the_trained_context_say_nothing_of_it() -> None:
    v = slots_live.read_live("http://llama", client=_llama(8192, 2, 8192))
    assert "trained for" not in v.explanation


@pytest.mark.parametrize("status", [401, 403])
def test_metrics_behind_a_key_say_so_not_is_this_vllm(status: int) -> None:
    """C9: a /metrics 401 was "is this a vLLM server?"."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json={"error": "Unauthorized"})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    with pytest.raises(BadAnswer, match=f"HTTP {status}: the server .* wants an API key") as got:
        vllm_live.read_live_vllm("http://vllm", client=client)
    assert "is this" not in str(got.value) and "--vllm-log FILE" in str(got.value)


def test_a_401_to_a_urls_login_says_it_was_sent_not_none() -> None:
    """Sweep 27 M1: a 401 to http://admin:pw@host said "felab sends none", though httpx had sent
    the URL's user and password as Basic auth (bench already said so)."""

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers.get("authorization", "").startswith("Basic ")
        return httpx.Response(401, json={"error": "Unauthorized"})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    with pytest.raises(BadAnswer) as vllm:
        vllm_live.read_live_vllm("http://admin:hunter2-pw@vllm", client=client)
    with pytest.raises(BadAnswer) as llama:
        slots_live.read_live("http://admin:hunter2-pw@llama", client=client)
    for got in (vllm, llama):
        said = str(got.value)
        assert "refused the user and password in the URL (sent as Basic auth)" in said, said
        assert "sends none" not in said and "hunter2-pw" not in said


UTF8_LOG = (
    "INFO GPU KV cache size: 100,000 tokens\n"
    "INFO Maximum concurrency for 8,192 tokens per request: 12.21x\n"
)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_a_utf16_log_without_a_byte_order_mark_is_named(tmp_path: Path, encoding: str) -> None:
    """C13: no BOM, so every line read as noise: "no KV-cache lines"."""
    log = tmp_path / "vllm.log"
    log.write_bytes(UTF8_LOG.encode(encoding))
    with pytest.raises(SizingError, match=r"line 1, is UTF-16 text, not UTF-8: save it as UTF-8"):
        vllm_log.parse_log_file(log)


def test_a_utf16_restart_appended_to_a_utf8_log_is_named(tmp_path: Path) -> None:
    """C12: the restart's lines read as noise, and the first startup's cache was used unsaid."""
    log = tmp_path / "vllm.log"
    restart = UTF8_LOG.replace("100,000", "50,000").replace("12.21", "6.10")
    log.write_bytes(UTF8_LOG.encode() + "\ufeff".encode("utf-16-le") + restart.encode("utf-16-le"))
    with pytest.raises(SizingError, match=r"line 3, is UTF-16 text after lines of UTF-8"):
        vllm_log.parse_log_file(log)


def test_a_utf8_log_still_reads(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(UTF8_LOG + "INFO odd \x00 byte in a line of text\n")
    assert vllm_log.parse_log_file(log).tokens == 100_000
