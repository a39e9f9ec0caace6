"""Independent sweep 23 (s1) LOWs in the engine's words: a count of one, a 401's why agreeing
with the failure line, Ollama advice naming no flag the user may not have given, a results CSV
whose last row is cut short even with its line end."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pydantic import ValidationError

from felab_core.engine.apis import Ollama, StreamProtocolError
from felab_core.engine.framing import Frame
from felab_core.engine.metrics import RunSummary
from felab_core.engine.probe import identify
from felab_core.engine.rate_search import judge
from felab_core.engine.results import ResultsFileError, append_csv, check_destinations
from felab_core.failures import settings_messages
from felab_core.settings import Settings
from felab_core.sizing.errors import SizingError
from felab_core.sizing.metrics_scrape import scrape


def _summary(ok: int, failed: int) -> RunSummary:
    return RunSummary(
        ok=ok,
        failed=failed,
        duration_s=1,
        ttft_s=None,
        tpot_s=None,
        itl_s=None,
        e2e_s=None,
        writing_tps=None,
        ttft_from_schedule_s=None,
        e2e_from_schedule_s=None,
        connect_s=None,
        server_tps=None,
        output_tokens=0,
        output_tps=0,
        request_tps=0,
        token_source="usage",
        counted_chunks=0,
        prompt_tokens_mean=None,
        errors={"HTTP 401": failed},
    )


def test_one_failed_request_is_not_all_1_requests() -> None:
    """LOW 7: "all 1 requests failed (HTTP 401)"."""
    from felab_core.text import counted

    assert judge(1.0, _summary(0, 1), ()).misses == ["the one request failed (HTTP 401)"]
    assert judge(1.0, _summary(0, 3), ()).misses == ["all 3 requests failed (HTTP 401)"]
    assert (counted(1, "request"), counted(1000, "request")) == ("1 request", "1,000 requests")


def test_a_setting_that_says_unset_it_is_not_told_twice() -> None:
    """LOW 5: "...or unset it for the default (...). Fix it, or unset it for the default."."""
    with pytest.raises(ValidationError) as caught:
        Settings(results_dir=" ")
    (line,) = settings_messages(caught.value.errors())  # type: ignore[arg-type]
    assert line.count("unset it") == 1, line


class _Refuses(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = b'{"error": "no"}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def refusing() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_401_note_agrees_with_what_was_sent(refusing: int) -> None:
    """LOW 2: the notes said the server wants "credentials felab does not send" while the
    failure line said the URL's user and password were sent as Basic auth."""
    with_login = asyncio.run(identify(f"http://bob:pw@127.0.0.1:{refusing}")).evidence
    assert "refused the user and password in the URL" in with_login
    assert "does not send" not in with_login
    without = asyncio.run(identify(f"http://127.0.0.1:{refusing}")).evidence
    assert "they want credentials, which felab does not send" in without
    with pytest.raises(SizingError) as said:
        scrape(f"http://bob:pw@127.0.0.1:{refusing}")
    assert "refused the user and password" in str(said.value) and "pw" not in str(said.value)


def test_openai_stream_read_as_ollama_names_no_kind_flag() -> None:
    """LOW 3: `--api ollama` alone was told "(or drop --kind ollama)"."""
    with pytest.raises(StreamProtocolError) as said:
        Ollama().interpret(Frame('data: {"choices": []}'))
    assert "--api openai-chat" in str(said.value) and "--kind" not in str(said.value)


HEADER_ROW = "timestamp,x"


def test_a_cut_last_row_with_its_line_end_is_refused(tmp_path: Path) -> None:
    """LOW 4: a last row cut short that still ends its line got a row appended below it."""
    whole = tmp_path / "whole.csv"
    from felab_core.engine.results import CSV_COLUMNS

    row = dict.fromkeys(CSV_COLUMNS, "1")
    append_csv(whole, [row, row])
    lines = whole.read_bytes().splitlines(keepends=True)
    cut = tmp_path / "cut.csv"
    cut.write_bytes(lines[0] + lines[1] + lines[2][:40] + b"\r\n")
    for attempt in (lambda: check_destinations(cut, None), lambda: append_csv(cut, [row])):
        with pytest.raises(ResultsFileError, match=r"last line is cut short \(line 3: "):
            attempt()
    assert cut.read_bytes().endswith(lines[2][:40] + b"\r\n")
    append_csv(whole, [row])  # a whole file still takes a row
    assert len(whole.read_bytes().splitlines()) == 4
