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
        if self.path == "/drip":  # headers a byte at a time: each read is quick, none ends
            try:
                for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" * 100:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        if self.path == "/small":
            self.wfile.write(b'{"data": []}')
            return
        if self.path == "/deep":
            self.wfile.write(b"[" * 100_000)
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


def test_headers_dripped_a_byte_at_a_time_end_at_the_deadline(base: str) -> None:
    """Thirteenth sweep: a server sending a byte a second held `felab bench`'s server check
    (and `size slots --url`) for good: httpx times each read, and each read was quick."""
    with httpx.Client(timeout=5) as client:
        start = time.monotonic()
        with pytest.raises(httpx.ReadTimeout, match="within 1 s"):
            get_bounded(client, base + "/drip", deadline_s=1.0)
        assert time.monotonic() - start < 3
        assert get_bounded(client, base + "/small").json() == {"data": []}  # the client still works


async def test_the_async_get_ends_dripped_headers_at_the_deadline(base: str) -> None:
    async with httpx.AsyncClient(timeout=5) as client:
        start = time.monotonic()
        with pytest.raises(httpx.ReadTimeout, match="within 1 s"):
            await aget_bounded(client, base + "/drip", deadline_s=1.0)
        assert time.monotonic() - start < 3


def test_json_nested_past_recursion_is_a_value_error(base: str) -> None:
    """Fifteenth sweep H5: `[[[[...` from a server crashed bench and size slots (RecursionError);
    every caller already reads ValueError as "not JSON"."""
    with httpx.Client() as client:
        answer = get_bounded(client, f"{base}/deep")
    with pytest.raises(ValueError, match="nested too deeply"):
        answer.json()
