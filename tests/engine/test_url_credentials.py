"""A URL's own password never comes back out of felab, even when the server repeats it
(seventeenth sweep, a2 H1/M1): "credentials alice:Sup3rSecretPw rejected" had been printed and
written to the --json record, beside advice that felab had sent no credentials."""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from felab.cli.main import app
from felab_core.engine.request_errors import credentials_refused

PASSWORD = "Sup3rSecretPw"
BASIC = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()


@pytest.fixture
def refusing_server() -> Iterator[int]:
    """Answers GETs as an OpenAI-style server, and every POST with a 401 that repeats the
    credentials it was sent (as text and as the Basic header)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def answer(conn: socket.socket) -> None:
        with conn:
            asked = conn.recv(65536)
            if asked.startswith(b"GET"):
                body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]})
                status = "200 OK"
            else:
                said = f"credentials alice:{PASSWORD} rejected (Basic {BASIC})"
                body = json.dumps({"error": said})
                status = "401 Unauthorized"
            conn.sendall(
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}".encode()
            )

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    stop.set()
    thread.join(2)
    listener.close()


def _bench_once(url: str, record: Path) -> Result:
    """One request to `url` with felab bench, its record written to `record`."""
    return CliRunner().invoke(
        app,
        ["bench", "--url", url, "--api", "openai-chat", "--model", "m", "-n", "1",
         "--warmup", "0", "--no-check", "--no-csv", "--json", str(record)],
    )  # fmt: skip


def test_a_password_the_server_repeats_is_masked_everywhere(
    refusing_server: int, tmp_path: Path
) -> None:
    record = tmp_path / "r.json"
    url = f"http://alice:{PASSWORD}@127.0.0.1:{refusing_server}"
    result = _bench_once(url, record)
    said = result.output + (record.read_text() if record.exists() else "")
    assert "401" in said, said
    assert PASSWORD not in said and BASIC not in said, said
    assert "refused the user and password in the URL (sent as Basic auth)" in " ".join(
        result.output.split()
    )


def test_a_url_with_a_user_and_no_password_is_said_so(refusing_server: int, tmp_path: Path) -> None:
    """`http://alice@host` sent no password: a 401 said "refused the user and password ...
    check them", a password never given; the notes said so too."""
    result = _bench_once(f"http://alice@127.0.0.1:{refusing_server}", tmp_path / "r.json")
    flat = " ".join(result.output.split())
    assert "refused the user in the URL (no password was given; sent as Basic auth)" in flat
    assert "user and password" not in flat
    assert credentials_refused("http://alice@h:1").startswith("refused the user in the URL (no")
    assert "user and password" in credentials_refused("http://alice:pw@h:1")


def test_a_key_in_the_urls_path_is_masked_in_the_record_and_on_screen(
    refusing_server: int, tmp_path: Path
) -> None:
    """Twentieth sweep, a2 A2-6: `http://HOST:PORT/sk-.../v1` (a gateway's key in the path) was
    written whole into the --json record's url, though felab masks the same key elsewhere."""
    key = "sk-abcdefghijklmnopqrstuvwx12345"
    record = tmp_path / "r.json"
    url = f"http://127.0.0.1:{refusing_server}/{key}/v1"
    result = _bench_once(url, record)
    assert record.exists(), result.output
    stored = json.loads(record.read_text())
    assert f"127.0.0.1:{refusing_server}/***" in json.dumps(stored), stored
    assert key not in result.output + record.read_text()
