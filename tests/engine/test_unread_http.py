"""HTTP from the right port that felab's client cannot read is said so, not "not HTTP: check
the port" (twentieth sweep (a) A24)."""

from __future__ import annotations

import asyncio

import pytest

from felab_core.engine.client import ClientLimits
from felab_core.engine.probe import IdentityError, identify
from felab_core.engine.request_errors import describe_error
from felab_core.engine.timeline import RequestTimeline

GZIP_CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"
HUGE_HEADER = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 200_000 + b"\r\ncontent-length: 0\r\n\r\n"


@pytest.mark.parametrize(
    ("answer", "said"),
    [(GZIP_CHUNKED, "a Transfer-Encoding other than chunked"), (HUGE_HEADER, "run past 100 kB")],
)
async def test_http_felab_cannot_read_is_not_called_not_http(answer: bytes, said: str) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(IdentityError, match="unreadable HTTP: ") as err:
            await identify(f"http://127.0.0.1:{port}")
    finally:
        server.close()
        await server.wait_closed()
    assert said in str(err.value) and "check the port" not in str(err.value)


def test_a_request_answered_in_unread_http_says_so() -> None:
    import httpx

    exc = httpx.RemoteProtocolError("Only Transfer-Encoding: chunked is supported")
    text = describe_error(exc, "http://h:1/v1/chat/completions", RequestTimeline(0), ClientLimits())
    assert text.startswith("unreadable HTTP: h:1: it answered in HTTP"), text


def test_an_address_the_kernel_refuses_is_said_so() -> None:
    """Twentieth sweep (a) A07 (low part): http://[fe80::1%25eth0]:PORT with --no-check said
    "connect error: ...: [Errno 22] Invalid argument"."""
    import httpx

    from felab_core.engine.request_errors import connect_failure

    said = connect_failure(httpx.ConnectError("[Errno 22] Invalid argument"), "[fe80::1%25eth0]:1")
    assert said.startswith("bad address: this machine cannot connect to [fe80::1%25eth0]:1")
