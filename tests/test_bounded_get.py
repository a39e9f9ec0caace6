"""A GET that reads at most so many bytes: an endless body is cut, a small one read whole."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from felab_core.bounded_get import aget_bounded, get_bounded


class _Endless(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        if self.path == "/small":
            self.wfile.write(b'{"data": []}')
            return
        try:
            while True:
                self.wfile.write(b"x" * 65536)
        except OSError:
            return

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_an_endless_body_is_cut_at_the_limit(base: str) -> None:
    start = time.monotonic()
    with httpx.Client(timeout=5) as client:
        answer = get_bounded(client, base + "/endless", limit=1 << 20)
        small = get_bounded(client, base + "/small")
    assert answer.cut and len(answer.content) == 1 << 20
    with pytest.raises(ValueError, match="too long"):
        answer.json()
    assert time.monotonic() - start < 5
    assert not small.cut and small.json() == {"data": []}


async def test_the_async_get_is_cut_too(base: str) -> None:
    async with httpx.AsyncClient(timeout=5) as client:
        answer = await aget_bounded(client, base + "/endless", limit=1 << 20)
    assert answer.cut and answer.status_code == 200
