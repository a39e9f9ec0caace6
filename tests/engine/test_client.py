"""The client against a streaming server on loopback that stamps its own sends.

The server and the client stamp on the same monotonic clock, so felab's TTFT and ITL can be
compared with the truth. The tolerance is loose enough for a loaded CI machine; the tight
figures are measured by benchmarks/timing_accuracy.py.
"""

from __future__ import annotations

import asyncio
import statistics

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from felab_core.engine.apis import Api, GenerationRequest, adapter_for
from felab_core.engine.client import ClientLimits, make_client, stream_request
from felab_core.engine.event_loop import run_sync
from felab_core.engine.metrics import request_metrics
from felab_core.engine.timeline import RequestTimeline
from felab_core.lab.scripted_server import Script, ScriptedServer

TOLERANCE_S = 0.005


async def one(
    server: ScriptedServer,
    api: Api = Api.OPENAI_CHAT,
    max_tokens: int = 12,
    limits: ClientLimits | None = None,
    base_url: str | None = None,
) -> RequestTimeline:
    adapter = adapter_for(api)
    limits = limits or ClientLimits(total=10, stall=2, connect=2)
    payload = adapter.payload(GenerationRequest("hello", max_tokens=max_tokens, model="m"))
    async with make_client(1, limits) as client:
        url = (base_url or server.base_url) + adapter.path
        return await stream_request(client, url, adapter, payload, RequestTimeline(0), limits)


@pytest.mark.parametrize("api", list(Api))
async def test_ttft_and_itl_match_the_servers_own_send_stamps(api: Api) -> None:
    script = Script(ttft_s=0.03, itl_s=0.01, default_max_tokens=20, persona="ollama")
    async with ScriptedServer(script) as server:
        timelines = [await one(server, api, max_tokens=20) for _ in range(5)]
    for tl, log in zip(timelines, server.log, strict=True):
        assert tl.ok, tl.error
        m = request_metrics(tl, api_is_ollama=api is Api.OLLAMA)
        assert m.output_tokens == 20
        assert m.counted_chunks == 20
        assert tl.sent_ns is not None
        true_ttft = (log.sends_ns[0] - tl.sent_ns) / 1e9
        true_itl = [(b - a) / 1e9 for a, b in zip(log.sends_ns, log.sends_ns[1:], strict=False)]
        assert m.ttft_s is not None
        assert abs(m.ttft_s - true_ttft) < TOLERANCE_S
        assert abs(statistics.median(m.itl_s) - statistics.median(true_itl)) < TOLERANCE_S
        # And the server kept its schedule: never early (late is the shared box's doing, and
        # the comparison with its own send stamps above is what the client is held to).
        assert m.ttft_s >= 0.03 - 0.002
        assert statistics.median(m.itl_s) == pytest.approx(0.01, abs=0.003)


async def test_always_asks_for_usage_and_the_length() -> None:
    async with ScriptedServer() as server:
        tl = await one(server, Api.OPENAI_CHAT, max_tokens=5)
    body = server.log[0].body
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 5 and body["stream"] is True
    assert tl.usage == {"prompt_tokens": 7, "completion_tokens": 5}


async def test_keepalive_comments_and_role_chunk_are_not_tokens() -> None:
    script = Script(keepalive_comments=3, role_chunk=True, finish_on_last_content=False)
    async with ScriptedServer(script) as server:
        tl = await one(server, max_tokens=4)
    assert tl.ok
    assert tl.sse_comments == 3
    assert len(tl.content_chunks()) == 4
    assert tl.chunks[0].text == ""  # the role-only chunk
    assert tl.finish_reason == "length"


async def test_llamacpp_timings_are_kept() -> None:
    async with ScriptedServer(Script(persona="llamacpp")) as server:
        tl = await one(server)
    assert tl.server_timings is not None
    assert tl.server_timings["predicted_n"] == 12


async def test_connection_refused_is_named(unused_tcp_port: int) -> None:
    async with ScriptedServer() as server:
        tl = await one(server, base_url=f"http://127.0.0.1:{unused_tcp_port}")
    assert tl.error is not None and tl.error.startswith("connection refused")
    assert "felab serve" in tl.error


async def test_dns_failure_is_named() -> None:
    async with ScriptedServer() as server:
        tl = await one(server, base_url="http://no-such-host.invalid:8080")
    assert tl.error is not None and tl.error.startswith("DNS failure"), tl.error


@pytest.mark.parametrize(
    ("fault", "api", "expected"),
    [
        ("http500", Api.OPENAI_CHAT, "HTTP 500: scripted failure: out of memory"),
        ("http404", Api.OLLAMA, "HTTP 404: model 'x' not found, try pulling it first"),
        ("malformed", Api.OPENAI_CHAT, "malformed stream"),
        ("malformed", Api.OLLAMA, "malformed stream"),
        ("truncate", Api.OPENAI_CHAT, "truncated: the stream ended without its final message"),
        ("truncate", Api.OLLAMA, "truncated"),
        ("disconnect", Api.OPENAI_COMPLETIONS, "disconnected"),
        ("error_event", Api.OPENAI_CHAT, "server error in stream: scripted: the model crashed"),
        ("error_event", Api.OLLAMA, "server error in stream: scripted: model runner stopped"),
    ],
)
async def test_broken_responses_become_recorded_errors(fault: str, api: Api, expected: str) -> None:
    async with ScriptedServer(Script(fault=fault, fault_after=2)) as server:
        tl = await one(server, api)
    assert tl.error is not None
    assert tl.error.startswith(expected), tl.error
    assert tl.end_ns is not None
    if fault not in ("http500", "http404"):
        # What arrived before the fault is kept.
        assert len(tl.content_chunks()) == 2


async def test_bytes_that_hold_no_message_are_not_a_stream_not_a_truncated_one() -> None:
    """3 KB of binary with no line end: said as what it is, not as a stream cut short."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = bytes(range(256)).replace(b"\n", b"").replace(b"\r", b"") * 12
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: "
        writer.write(head + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        adapter = adapter_for(Api.OPENAI_CHAT)
        limits = ClientLimits(total=10, stall=2, connect=2)
        payload = adapter.payload(GenerationRequest("hello", max_tokens=4, model="m"))
        async with make_client(1, limits) as client:
            url = f"http://127.0.0.1:{port}" + adapter.path
            tl = await stream_request(client, url, adapter, payload, RequestTimeline(0), limits)
    finally:
        server.close()
        await server.wait_closed()
    assert tl.error is not None and tl.error.startswith("not a token stream"), tl.error


async def _raw_answer(
    body: bytes, *, hold_open: bool, api: Api = Api.OPENAI_CHAT, max_tokens: int = 4
) -> RequestTimeline:
    """One request to a server that answers 200 text/event-stream with `body` as it is."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
    return await _raw_response(head + body, hold_open=hold_open, api=api, max_tokens=max_tokens)


async def _raw_response(
    response: bytes,
    *,
    hold_open: bool = False,
    api: Api = Api.OPENAI_CHAT,
    asked: list[bytes] | None = None,
    max_tokens: int = 4,
) -> RequestTimeline:
    """One request to a server that writes `response` (status line and all) as it is; the
    request's head goes into `asked`."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if asked is not None:
            asked.append(head)
        writer.write(response)
        await writer.drain()
        if hold_open:
            await asyncio.sleep(30)
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        adapter = adapter_for(api)
        limits = ClientLimits(total=20, stall=3, connect=2)
        payload = adapter.payload(GenerationRequest("hello", max_tokens=max_tokens, model="m"))
        async with make_client(1, limits) as client:
            url = f"http://127.0.0.1:{port}" + adapter.path
            return await stream_request(client, url, adapter, payload, RequestTimeline(0), limits)
    finally:
        server.close()


def test_a_line_past_the_frame_limit_is_named_not_a_stall() -> None:
    """17 MiB without a line end, the connection held open: the client reads past its 1 MiB
    back-pressure mark, pauses, drains, and must start reading again (on uvloop, as `felab
    bench` runs, it used to wait out the stall timeout with the bytes unread, and call the
    server stalled)."""
    tl = run_sync(_raw_answer(b"data: " + b"x" * (17 << 20), hold_open=True))
    assert tl.error is not None and tl.error.startswith("not a token stream"), tl.error
    assert "without ending a line" in tl.error


async def test_a_stream_far_past_the_read_ahead_mark_is_read_whole() -> None:
    """Eight MiB of real chunks sent at once (eight times the read-ahead mark): every chunk
    is counted, none lost to a pause."""
    event = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"y" * 1000 + b'"}}]}\n\n'
    count = (8 << 20) // len(event)
    tl = await _raw_answer(event * count + b"data: [DONE]\n\n", hold_open=False, max_tokens=count)
    assert tl.error is None, tl.error
    assert len(tl.content_chunks()) == count


async def test_a_stream_that_never_stops_is_ended_by_its_count() -> None:
    """Sixteenth sweep (a) H3: a server that ignored max_tokens and never ended was read to
    --timeout (1.5 GB after 20 s). 4 tokens asked: past 4 x 4 + 256 messages it is a failure."""
    event = b'data: {"choices":[{"index":0,"delta":{"content":"t "}}]}\n\n'
    tl = await _raw_answer(event * 5000, hold_open=True)
    assert tl.error is not None and tl.error.startswith("the server did not stop: over 272"), (
        tl.error
    )
    assert "4 tokens asked" in tl.error and len(tl.chunks) == 273


async def test_tokens_counted_but_no_text_read_points_at_the_api() -> None:
    """A chat stream read as completions: forty messages, usage says 40 tokens, no text the
    completions reader knows. Not an "ok" request with no TTFT: a failure naming --api."""
    delta = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":40}}\n\n'
    body = delta * 40 + usage + b"data: [DONE]\n\n"
    tl = await _raw_answer(body, hold_open=False, api=Api.OPENAI_COMPLETIONS)
    # the first chat delta already names the API to use (twentieth sweep, a A14)
    assert tl.error is not None and "streams delta.content (the chat API)" in tl.error, tl.error
    assert "use --api openai-chat" in tl.error
    right = await _raw_answer(body, hold_open=False, api=Api.OPENAI_CHAT)
    assert right.error is None and len(right.content_chunks()) == 40
    # One token and no text: a model that stopped at once, not the wrong --api.
    stopped = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n'
    empty = await _raw_answer(stopped + b"data: [DONE]\n\n", hold_open=False)
    assert empty.error is not None and empty.error.startswith("empty answer"), empty.error


async def test_a_status_line_that_is_not_http_is_named_not_a_disconnect() -> None:
    tl = await _raw_response(b"HTTP/1.1 abc OK\r\n\r\n")
    assert tl.error is not None and tl.error.startswith("not HTTP:"), tl.error
    assert "'HTTP/1.1 abc OK'" in tl.error and "bytearray" not in tl.error


async def test_a_stall_fails_after_the_stall_timeout() -> None:
    limits = ClientLimits(total=10, stall=0.3, connect=2)
    async with ScriptedServer(Script(fault="stall", fault_after=3)) as server:
        tl = await one(server, limits=limits)
    assert tl.error is not None and tl.error.startswith("stalled"), tl.error
    assert "after 3 content chunks" in tl.error


async def test_the_total_timeout_is_enforced() -> None:
    limits = ClientLimits(total=0.2, stall=5, connect=2)
    async with ScriptedServer(Script(itl_s=0.05)) as server:
        tl = await one(server, max_tokens=100, limits=limits)
    assert tl.error is not None and tl.error.startswith("timeout"), tl.error
    assert tl.end_ns is not None and tl.sent_ns is not None
    assert (tl.end_ns - tl.sent_ns) / 1e9 < 1.0


async def test_connection_setup_is_timed_apart_from_ttft() -> None:
    async with ScriptedServer() as server:
        tl = await one(server)
    assert tl.connect_start_ns is not None and tl.connect_end_ns is not None
    assert tl.sent_ns is not None and tl.connect_end_ns <= tl.sent_ns


async def test_a_keepalive_connection_closed_by_the_server_is_replaced() -> None:
    """The lean network backend must report a closed idle socket so httpcore reconnects."""
    limits = ClientLimits(total=10, stall=2, connect=2)
    adapter = adapter_for(Api.OPENAI_CHAT)
    payload = adapter.payload(GenerationRequest("hi", max_tokens=3, model="m"))
    first = ScriptedServer()
    await first.start()
    port = first.port
    async with make_client(1, limits) as client:
        url = first.base_url + adapter.path
        tl1 = await stream_request(client, url, adapter, payload, RequestTimeline(0), limits)
        await first.stop()
        async with ScriptedServer(port=port) as second:
            tl2 = await stream_request(client, url, adapter, payload, RequestTimeline(1), limits)
    assert tl1.ok and tl2.ok, (tl1.error, tl2.error)
    assert tl2.connect_start_ns is not None  # a new connection, timed on its own
    assert len(second.log) == 1


class _RawBodyServer:
    """Answers every request with 200 and whatever body bytes the test sets, then closes."""

    def __init__(self) -> None:
        self.body = b""
        self.content_type = b"text/event-stream"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n" % (self.content_type, len(self.body)) + self.body
        )
        await writer.drain()
        writer.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.binary(max_size=300), api=st.sampled_from(list(Api)))
def test_any_body_bytes_become_a_timeline_never_an_exception(body: bytes, api: Api) -> None:
    raw = _RawBodyServer()
    raw.body = body

    async def go() -> RequestTimeline:
        server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            adapter = adapter_for(api)
            limits = ClientLimits(total=5, stall=2, connect=2)
            payload = adapter.payload(GenerationRequest("x", max_tokens=2))
            async with make_client(1, limits) as client:
                url = f"http://127.0.0.1:{port}{adapter.path}"
                return await stream_request(
                    client, url, adapter, payload, RequestTimeline(0), limits
                )
        finally:
            server.close()

    tl = asyncio.run(go())
    assert tl.end_ns is not None and tl.sent_ns is not None
    assert not tl.ok or tl.done  # ok only when the stream ended with its final message
    if tl.done and not tl.ok:  # ended, but with nothing to time, or the server's own error
        assert tl.error is not None
        assert tl.error.startswith(("empty answer", "server error in stream")), tl.error


async def test_a_request_lost_to_the_keepalive_race_is_sent_again_once() -> None:
    limits = ClientLimits(total=10, stall=2, connect=2)
    adapter = adapter_for(Api.OPENAI_CHAT)
    payload = adapter.payload(GenerationRequest("hi", max_tokens=3, model="m"))
    async with ScriptedServer(Script(one_request_per_connection=True)) as server:
        url = server.base_url + adapter.path
        async with make_client(1, limits) as client:
            first = await stream_request(client, url, adapter, payload, RequestTimeline(0), limits)
            second = await stream_request(client, url, adapter, payload, RequestTimeline(1), limits)
    assert first.ok and second.ok, (first.error, second.error)
    assert (first.retries, second.retries) == (0, 1)
    assert second.connect_start_ns is not None  # the retry went out on a new connection
    assert len(server.log) == 2  # the dropped attempt never reached a handler


async def test_felab_asks_for_an_uncompressed_stream_and_names_a_compressed_one() -> None:
    """Timing needs each chunk's bytes as they arrive: felab asks for no compression, and a
    server (or proxy) that compresses anyway is named, not read as "not a token stream"."""
    import gzip

    asked: list[bytes] = []
    body = gzip.compress(b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n')

    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
        b"content-length: %d\r\n\r\n" % len(body)
    )
    tl = await _raw_response(head + body, asked=asked)
    assert b"accept-encoding: identity" in asked[0].lower()
    assert tl.error is not None and tl.error.startswith("compressed: "), tl.error
    assert "gzip-compressed" in tl.error


def test_a_status_says_what_it_usually_means_for_a_benchmark() -> None:
    from felab_core.engine.request_errors import server_error_message

    said = server_error_message(401, b'{"error": {"message": "Unauthorized"}}')
    assert said.startswith("HTTP 401: Unauthorized; the server wants an API key")
    busy = server_error_message(429, b"slow down", retry_after="120")
    assert busy.endswith("lower -c or --rate; it asked to wait 120 s")
    assert server_error_message(500, b"boom") == "HTTP 500: boom"


def test_a_proxys_html_error_page_is_named_by_its_title_not_echoed() -> None:
    """A seventeenth-sweep low: nginx's 502 page was repeated as the server's words, markup and
    all; the page is named by its title, with what a 502 or 504 from a proxy means."""
    from felab_core.engine.request_errors import server_error_message

    page = (
        b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502"
        b" Bad Gateway</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body></html>"
    )
    said = server_error_message(502, page)
    assert said.startswith("HTTP 502: an HTML page ('502 Bad Gateway'); a proxy or gateway")
    assert "<" not in said
    untitled = server_error_message(504, b"<!DOCTYPE html><p>timeout</p>")
    assert untitled.startswith("HTTP 504: an HTML page; a proxy or gateway in front")
    assert server_error_message(500, b"<b>not a page</b>") == "HTTP 500: <b>not a page</b>"


def test_a_tls_handshake_that_never_finishes_is_named_with_its_fix() -> None:
    from felab_core.engine.request_errors import connect_failure

    said = connect_failure(
        httpx.ConnectError("_ssl.c:989: The handshake operation timed out"), "https://h:1"
    )
    assert said.startswith("TLS failed: https://h:1 took the connection") and "http://" in said


@pytest.mark.parametrize(
    ("exc", "says"),
    [
        # seventeenth sweep (a2) M4: OpenSSL writes UNEXPECTED_EOF; the hint was lost
        (
            httpx.ConnectError("[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred (_ssl.c:1006)"),
            "TLS failed: https://h:1 does not answer https://",
        ),
        (httpx.ConnectError(""), "connect error: https://h:1: ConnectError"),  # was empty
        # (a2) M5, (a) M7: http:// to a TLS server
        (
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
            "no HTTP answer: https://h:1 hung up without answering",
        ),
    ],
)
def test_connect_failures_are_said_with_their_fix(exc: Exception, says: str) -> None:
    from felab_core.engine.request_errors import connect_failure

    assert connect_failure(exc, "https://h:1").startswith(says)


@pytest.mark.parametrize(
    "exc",
    [
        httpx.RemoteProtocolError(
            "Invalid URL in location header: Invalid non-printable ASCII character in URL"
        ),
        type("IDNAError", (Exception,), {})("Invalid A-label"),
    ],
)
def test_a_redirect_felab_cannot_read_is_called_a_redirect(exc: Exception) -> None:
    """Seventeenth sweep (a) M3, (a2) M2, M3: "not HTTP ... check the port" and "client
    error: IDNAError" for a server that did answer HTTP, with a 302."""
    from felab_core.engine.request_errors import describe_error

    said = describe_error(exc, "http://h:1", RequestTimeline(index=0), ClientLimits())
    assert said.startswith("redirect: h:1 answered with a redirect whose Location is not")


def test_a_hang_up_before_any_answer_is_not_mid_stream() -> None:
    from felab_core.engine.request_errors import describe_error

    exc = httpx.RemoteProtocolError("Server disconnected without sending a response.")
    said = describe_error(exc, "http://h:1", RequestTimeline(index=0), ClientLimits())
    assert said.startswith("no HTTP answer: h:1 hung up") and "mid-stream" not in said


@pytest.mark.parametrize(
    ("piece", "said"),
    [
        (b": ping\n\n", "stalled: only keep-alive comments, no message,"),
        # eighteenth sweep (a) L6: a line dripped a byte at a time was called keep-alive
        (b"d", "stalled: bytes but no whole message (a line dripped"),
        # twentieth sweep (a) A22: messages that carry nothing reset the stall clock, and a
        # run hung to --timeout
        (b"data: {}\n\n", "stalled: only messages that carry nothing"),
        (b'data: {"choices":[{"delta":{}}]}\n\n', "stalled: only messages that carry nothing"),
        (
            b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n',
            "stalled: only messages that carry nothing",
        ),
        (b'event: ping\ndata: {"type":"ping"}\n\n', "stalled: only messages that carry nothing"),
    ],
)
async def test_keep_alive_comments_alone_are_a_stall(piece: bytes, said: str) -> None:
    """Ninth sweep: a gateway that only sends ': ping' kept each request for the whole
    --timeout (600 s), since the comments reset the read timeout."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        for _ in range(200):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    limits = ClientLimits(total=20, stall=0.3, connect=2)
    adapter = adapter_for(Api.OPENAI_CHAT)
    payload = adapter.payload(GenerationRequest("hello", max_tokens=4, model="m"))
    try:
        async with make_client(1, limits) as client:
            url = f"http://127.0.0.1:{port}" + adapter.path
            tl = await stream_request(client, url, adapter, payload, RequestTimeline(0), limits)
    finally:
        server.close()
    assert tl.error is not None and tl.error.startswith(said), tl.error
    assert tl.end_ns is not None and tl.sent_ns is not None
    assert (tl.end_ns - tl.sent_ns) / 1e9 < 2


async def test_a_body_held_open_after_done_is_named_for_what_it_is() -> None:
    """Ninth sweep: a Content-Length three times the body: "stalled ... raise --stall-timeout",
    though [DONE] had come."""
    body = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n"
    tl = await _raw_response(head % (3 * len(body)) + body, hold_open=True)
    assert tl.error is not None and tl.error.startswith("stalled: the server ended the stream")
    assert "Content-Length" in tl.error


async def test_a_redirects_location_is_shown_without_control_characters() -> None:
    """Sixteenth sweep (a) H2: a Location of 8-bit CSI codes (U+009B) reached the terminal and
    the record as sent; every other server word is shown plainly."""
    location = "\u009b31mRED\u009b0m [bold]x[/bold] http://u:pw@h/".encode()
    tl = await _raw_response(
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: " + location + b"\r\n\r\n"
    )
    assert tl.error is not None and tl.error.startswith("redirect: the server answered HTTP 307")
    assert "\u009b" not in tl.error and "?31mRED?0m" in tl.error and "pw" not in tl.error


async def test_a_stream_that_goes_on_after_its_end_marker_is_said_so() -> None:
    """Seventeenth sweep (a) M6: 3,000 chunks after [DONE] read as "the server did not stop
    ... is it ignoring max_tokens?"; the stream did end, then went on."""
    chunk = b'data: {"choices":[{"delta":{"content":"tok "}}]}\n\n'
    body = chunk * 4 + b"data: [DONE]\n\n" + chunk * 3000
    tl = await _raw_answer(body, hold_open=False)
    assert tl.error is not None
    assert tl.error.startswith("malformed stream: the server kept sending after its end marker")


def test_an_ndjson_stream_under_the_openai_api_is_named() -> None:
    """Seventeenth sweep (a) M8: Ollama's NDJSON read as --api openai-chat was "one JSON
    answer instead of a stream"; it streamed, in another framing."""
    from felab_core.engine.stream_shape import not_a_stream

    lines = b'{"message": {"role": "assistant", "content": "tok "}, "done": false}\n' * 3
    for content_type in ("application/x-ndjson", ""):
        said = not_a_stream(lines, content_type)
        assert said is not None and said.startswith("an NDJSON stream") and "--api ollama" in said
    one = not_a_stream(b'{"choices": [{"message": {"content": "hi"}}]}', "application/json")
    assert one is not None and one.startswith("not streaming")


async def test_text_far_past_the_tokens_asked_stops_the_stream() -> None:
    """Seventeenth sweep (a2) H9: 60 chunks of 15 MB for 64 tokens took 2.7 GB, past 30 s."""
    huge = b'data: {"choices":[{"delta":{"content":"' + b"x" * 300_000 + b'"}}]}\n\n'
    tl = await _raw_answer(huge * 4, hold_open=False, max_tokens=4)
    assert tl.error is not None
    assert tl.error.startswith("malformed stream: the server sent over 69,632 characters")


async def test_two_ollama_objects_on_one_line_are_not_told_to_use_ollama() -> None:
    """Nineteenth sweep (a) M6: with --api ollama, two JSON objects glued on one line were
    answered "use --api ollama", the flag already given."""
    body = b'{"message":{"content":"ab"},"done":false}{"message":{"content":"cd"},"done":true}\n'
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ncontent-length: %d\r\n\r\n"
    tl = await _raw_response(head % len(body) + body, api=Api.OLLAMA)
    assert tl.error is not None and "use --api ollama" not in tl.error, tl.error
    assert "not JSON" in tl.error or "Extra data" in tl.error, tl.error
