"""SSE events ended by a bare CR are read when they arrive (sweep 22 a A18).

The SSE rules end a line with CRLF, LF or CR. felab held a trailing CR back in case an LF
followed, so a "data: ...\\r\\r" event was read only when the next read came: the whole gap to
the next token was added to the time to first token.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from felab_core.engine.apis import Api, GenerationRequest, adapter_for
from felab_core.engine.client import ClientLimits, make_client, stream_request
from felab_core.engine.framing import NDJSONDecoder, SSEDecoder
from felab_core.engine.metrics import request_metrics
from felab_core.engine.timeline import RequestTimeline


def test_a_cr_cr_event_is_whole_when_it_arrives() -> None:
    dec = SSEDecoder()
    assert [f.data for f in dec.feed(b"data: a\r\r")] == ["a"]
    assert [f.data for f in dec.feed(b"data: b\r\r")] == ["b"]


@pytest.mark.parametrize(
    "pieces",
    [
        [b"data: a\r", b"\n\r\n", b"data: b\r\n\r\n"],  # a CRLF split over two reads
        [b"data: a\r\n\r", b"\n", b"data: b\r\n\r", b"\n"],
        [b"data: a\r", b"\n", b"\r", b"\n", b"data: b\r\n", b"\r\n"],
    ],
)
def test_a_crlf_split_over_reads_is_one_line_end(pieces: list[bytes]) -> None:
    dec = SSEDecoder()
    got = [f.data for piece in pieces for f in dec.feed(piece)]
    assert got == ["a", "b"]
    assert dec.close() is None


def test_ndjson_lines_ended_by_cr_lf_split_are_not_doubled() -> None:
    dec = NDJSONDecoder()
    got = [f.data for piece in (b'{"a":1}\r', b'\n{"b":2}\r', b"\n") for f in dec.feed(piece)]
    assert got == ['{"a":1}', '{"b":2}']


async def test_a_cr_only_stream_has_its_first_token_timed_when_it_came() -> None:
    gap_s = 0.3

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        delta = {"choices": [{"index": 0, "delta": {"content": "w "}, "finish_reason": None}]}
        usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}}
        for event in [delta] * 3 + [usage]:
            writer.write(f"data: {json.dumps(event)}\r\r".encode())
            await writer.drain()
            await asyncio.sleep(gap_s)
        writer.write(b"data: [DONE]\r\r")
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    adapter = adapter_for(Api.OPENAI_CHAT)
    limits = ClientLimits(total=20, stall=5, connect=2)
    payload = adapter.payload(GenerationRequest("hello", max_tokens=3, model="m"))
    try:
        async with make_client(1, limits) as client:
            url = f"http://127.0.0.1:{port}" + adapter.path
            tl = await stream_request(client, url, adapter, payload, RequestTimeline(0), limits)
    finally:
        server.close()
    assert tl.ok, tl.error
    m = request_metrics(tl)
    assert m.ttft_s is not None and m.ttft_s < gap_s / 2
