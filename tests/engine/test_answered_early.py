"""A server that answers before felab finished sending the request (sweep 22 a A14).

The answer's bytes reach the kernel before the request's last byte went out, so every time
measured from the send is negative or meaningless: the request fails with words, and no time
to first token (or chunk time) is written for it.
"""

from __future__ import annotations

import asyncio
import json

from felab_core.engine.apis import Api, GenerationRequest, adapter_for
from felab_core.engine.client import ClientLimits, make_client, stream_request
from felab_core.engine.metrics import request_metrics
from felab_core.engine.timeline import RequestTimeline


def _answer() -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    delta = {"choices": [{"index": 0, "delta": {"content": "w "}, "finish_reason": None}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 4}}
    events = [json.dumps(delta)] * 4 + [json.dumps(usage), "[DONE]"]
    return head + b"".join(f"data: {e}\n\n".encode() for e in events)


async def test_an_answer_before_the_request_was_sent_is_no_ttft() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")  # the head only: the body is left unread
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        writer.write(_answer())
        await writer.drain()
        await asyncio.sleep(0.1)  # the client is still sending its body meanwhile
        await reader.readexactly(length)
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    adapter = adapter_for(Api.OPENAI_CHAT)
    limits = ClientLimits(total=20, stall=5, connect=2)
    # Larger than what the loopback's socket buffers hold, so the send waits on the server.
    payload = adapter.payload(GenerationRequest("w " * 20_000_000, max_tokens=4, model="m"))
    try:
        async with make_client(1, limits) as client:
            url = f"http://127.0.0.1:{port}" + adapter.path
            tl = await stream_request(client, url, adapter, payload, RequestTimeline(0), limits)
    finally:
        server.close()
    assert tl.error is not None
    assert "answered before felab finished sending the request" in tl.error
    m = request_metrics(tl)
    assert not m.ok and m.ttft_s is None
    assert all(t >= 0 for t in m.chunk_times_s)
    assert m.e2e_s is None or m.e2e_s >= 0
