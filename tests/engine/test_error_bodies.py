"""A server's error body is read for its first 64 KiB and shown from its first 8 KiB (fourteenth
sweep: a 100 MB 400 took 1.4 GB and 22 s; a 100 kB 404 page, 34 s of redaction past --timeout)."""

from __future__ import annotations

import asyncio
import time

from felab_core.bounded_get import first_bytes
from felab_core.engine import client as engine_client
from felab_core.engine.stream_shape import shown_text


async def _serve(answer: bytes) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        try:
            writer.write(answer)
            await writer.drain()
        except ConnectionError:
            pass  # felab stopped reading: what this test is about
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_only_the_start_of_a_huge_error_body_is_read() -> None:
    import httpx

    body = b"x" * (50 * 1024 * 1024)
    head = b"HTTP/1.1 400 Bad Request\r\ncontent-length: %d\r\n\r\n" % len(body)
    server, port = await _serve(head + body)
    try:
        async with (
            httpx.AsyncClient() as http,
            http.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions") as resp,
        ):
            got = await first_bytes(resp, engine_client._ERROR_BODY_BYTES)
        assert len(got) == 64 * 1024
    finally:
        server.close()
        await server.wait_closed()


def test_a_long_page_is_cut_before_it_is_redacted() -> None:
    """A hang guard with a wide margin (it took 34 s for 100 kB); what is shown is unchanged."""
    page = "<html>" + "x" * 2_000_000
    started = time.monotonic()
    shown = shown_text(page)
    assert time.monotonic() - started < 10
    assert shown.startswith("<html>xxx") and len(shown) == 300
    assert shown_text("db password=letmein here") == "db password=*** here"


def test_a_bare_404_says_the_path_is_not_the_servers() -> None:
    """Twentieth sweep (a) A08: a FastAPI 404 said only "HTTP 404: Not Found"; a 404 that names
    what is missing (Ollama's model) keeps its own words."""
    from felab_core.engine.request_errors import server_error_message

    said = server_error_message(404, b'{"detail":"Not Found"}')
    assert said.startswith("HTTP 404: Not Found; the server has no endpoint at the path")
    assert "base address" in said
    assert (
        server_error_message(404, b'{"error":"model x not found"}') == "HTTP 404: model x not found"
    )
