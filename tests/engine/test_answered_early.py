"""A server that answers before felab finished sending the request (sweep 22 a A14).

The answer's bytes reach the kernel before the request went out, so every time measured from
the send is negative or meaningless: the request fails with words, and no time to first token
(or chunk time) is written for it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest

from felab_core.engine import client as client_module
from felab_core.engine.apis import Api, GenerationRequest, adapter_for
from felab_core.engine.client import ClientLimits, make_client, stream_request
from felab_core.engine.metrics import request_metrics
from felab_core.engine.timeline import RequestTimeline

_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def _answer() -> bytes:
    delta = {"choices": [{"index": 0, "delta": {"content": "w "}, "finish_reason": None}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 4}}
    events = [json.dumps(delta)] * 4 + [json.dumps(usage), "[DONE]"]
    return _HEAD + b"".join(f"data: {e}\n\n".encode() for e in events)


async def _ask(port: int) -> RequestTimeline:
    adapter = adapter_for(Api.OPENAI_CHAT)
    limits = ClientLimits(total=20, stall=5, connect=2)
    payload = adapter.payload(GenerationRequest("hello", max_tokens=4, model="m"))
    async with make_client(1, limits) as client:
        url = f"http://127.0.0.1:{port}" + adapter.path
        return await stream_request(client, url, adapter, payload, RequestTimeline(0), limits)


async def _ask_stamped_late(monkeypatch: pytest.MonkeyPatch, body: bytes) -> RequestTimeline:
    """Ask a server that writes `body` once it has read the request's head, with felab's send
    stamped a second later than the kernel's arrival stamps (the answer reads as early)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(body)
        await writer.drain()
        writer.close()

    monkeypatch.setattr(client_module, "now_ns", lambda: time.monotonic_ns() + 10**9)
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        return await _ask(server.sockets[0].getsockname()[1])
    finally:
        server.close()


def _no_negative_time(tl: RequestTimeline) -> None:
    m = request_metrics(tl)
    assert m.ttft_s is None or m.ttft_s >= 0
    assert all(t >= 0 for t in m.chunk_times_s)
    assert m.e2e_s is None or m.e2e_s >= 0


async def test_an_answer_stamped_before_the_request_went_out_fails_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """felab's send stamps a second later than the kernel's arrival stamps: the answer was
    there before the request was sent (what a server that writes on connect looks like)."""
    tl = await _ask_stamped_late(monkeypatch, _answer())
    assert tl.error is not None
    assert "the server answered before felab finished sending the request" in tl.error
    m = request_metrics(tl)
    assert not m.ok and m.ttft_s is None and m.chunk_times_s == []
    _no_negative_time(tl)


_EARLY_SERVER = """
import socket, sys
answer = sys.stdin.buffer.read()
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    c.sendall(answer)  # at once, before reading the request
    c.shutdown(socket.SHUT_WR)
    while c.recv(65536):  # all of the request: a close with some unread would reset the
        pass              # connection and drop the answer from felab's buffer
    c.close()
"""


def test_a_server_that_writes_on_connect_gives_no_negative_ttft() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _EARLY_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_answer())
        proc.stdin.close()
        port = int(proc.stdout.readline())
        for _ in range(5):
            tl = asyncio.run(_ask(port))
            _no_negative_time(tl)
            if tl.error is not None:
                assert tl.error.startswith("answered early"), tl.error
    finally:
        proc.kill()
        proc.wait()


async def test_an_early_answer_cut_short_is_still_said_early(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The clean-clone CI of cd1590a: a server that writes on connect closed the connection
    under felab mid-answer, and the lost connection was said alone, its early chunks kept."""
    four_chunks_no_end = _answer().split(b'data: {"choices": []')[0]
    tl = await _ask_stamped_late(monkeypatch, four_chunks_no_end)
    assert tl.error is not None and tl.error.startswith("answered early"), tl.error
    assert "(then " in tl.error and tl.chunks == []
    _no_negative_time(tl)
