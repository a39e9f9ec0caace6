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


def test_sizing_reads_go_straight_to_the_server_never_through_a_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eighteenth sweep (a) M6: /metrics went through HTTP_PROXY while the timing client did
    not: the proxy was sent the URL's password as Basic auth, and its 403 blamed the server."""
    from felab_core.lab.scripted_server import Script, ScriptedServer
    from felab_core.sizing import SizingError, metrics_scrape, slots_live, vllm_live

    seen: list[bytes] = []

    class _Proxy(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.requestline.encode())
            self.send_response(403)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.server_port}")
    monkeypatch.setenv("NO_PROXY", "")

    class _Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"llamacpp:tokens_predicted_total 8\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    metrics = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=metrics.serve_forever, daemon=True).start()
    server = ScriptedServer(Script(persona="llamacpp")).start_in_thread()
    try:
        assert metrics_scrape.scrape(f"http://u:pw@127.0.0.1:{metrics.server_port}").engine
        assert slots_live.read_live(server.base_url.replace("//", "//u:pw@")).slots >= 1
        with pytest.raises(SizingError):  # llama.cpp's figures are not vLLM's; no proxy asked
            vllm_live.read_live_vllm(f"http://u:pw@127.0.0.1:{metrics.server_port}")
    finally:
        server.stop_thread()
        metrics.shutdown()
        proxy.shutdown()
    assert seen == []


class _Silent(httpx.AsyncBaseTransport):
    """A transport that never answers; `connects` says whether its TCP handshake is done."""

    def __init__(self, connects: bool) -> None:
        self.connects = connects

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        import asyncio

        trace = request.extensions.get("trace")
        if self.connects and trace is not None:
            await trace("connection.connect_tcp.complete", {})
        await asyncio.sleep(60)
        raise AssertionError("the deadline should have come first")


async def test_a_connection_never_made_is_a_connect_timeout_not_a_silent_server() -> None:
    """Twentieth sweep (a) A07: a host whose connect never completed (a dropped SYN, an IPv6
    zone id) was said to have "taken the connection but sent no whole answer"."""
    async with httpx.AsyncClient(transport=_Silent(connects=False)) as client:
        with pytest.raises(httpx.ConnectTimeout, match="no connection to"):
            await aget_bounded(client, "http://h:1/", deadline_s=0.2)
    async with httpx.AsyncClient(transport=_Silent(connects=True)) as client:
        with pytest.raises(httpx.ReadTimeout, match="no answer from"):
            await aget_bounded(client, "http://h:1/", deadline_s=0.2)
