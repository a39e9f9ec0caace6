"""Answers no model wrote as asked: choices of another index than the integer 0 (A02), and
tokens that came faster than any one stream writes (A01, A12)."""

from __future__ import annotations

import json
from csv import DictReader
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.apis import Api, StreamProtocolError, adapter_for
from felab_core.engine.event_loop import run_sync
from felab_core.engine.framing import Frame
from felab_core.engine.metrics import request_metrics, summarize
from felab_core.engine.timeline import Chunk, RequestTimeline
from felab_core.lab.scripted_server import Script, ScriptedServer
from tests.engine.test_client import _raw_answer


def _sse(*messages: object) -> bytes:
    return b"".join(b"data: " + json.dumps(m).encode() + b"\n\n" for m in messages) + (
        b"data: [DONE]\n\n"
    )


def _chunk(text: str, **choice: object) -> dict[str, object]:
    return {"choices": [{**choice, "delta": {"content": text}}]}


@pytest.mark.parametrize("index", [1.0, "1", "0", 0.0, None, True, False, [0]])
def test_only_the_integer_0_is_the_first_choice(index: object) -> None:
    chat = adapter_for(Api.OPENAI_CHAT)
    with pytest.raises(StreamProtocolError, match="choice index"):
        chat.interpret(Frame(data=json.dumps(_chunk("t", index=index))))


def test_two_choices_in_one_message_are_refused_even_without_an_index() -> None:
    chat = adapter_for(Api.OPENAI_CHAT)
    two = {"choices": [{"delta": {"content": "a"}}, {"delta": {"content": "b"}}]}
    with pytest.raises(StreamProtocolError, match="2 choices in one message"):
        chat.interpret(Frame(data=json.dumps(two)))


def test_a_second_answer_with_index_1_0_fails_the_request_with_words() -> None:
    body = _sse(_chunk("a", index=0), _chunk("b", index=1.0), _chunk("c", index=0))
    tl = run_sync(_raw_answer(body, hold_open=False))
    assert tl.error is not None and "choice index 1.0" in tl.error, tl.error


def test_choices_with_and_without_an_index_are_two_answers() -> None:
    body = _sse(_chunk("a", index=0), _chunk("b"), _chunk("c", index=0), _chunk("d"))
    tl = run_sync(_raw_answer(body, hold_open=False))
    assert tl.error is not None and "others no index" in tl.error, tl.error


def test_unindexed_text_after_the_answer_ended_is_a_second_answer() -> None:
    body = _sse(
        _chunk("a", finish_reason=None),
        _chunk("b", finish_reason="length"),
        _chunk("c", finish_reason=None),
        _chunk("d", finish_reason="length"),
    )
    tl = run_sync(_raw_answer(body, hold_open=False))
    assert tl.error is not None and "after the answer ended" in tl.error, tl.error


def test_an_honest_stream_without_indexes_is_timed() -> None:
    """A gateway that leaves index out of a one-choice stream is still one answer."""
    body = _sse(
        _chunk("a", finish_reason=None),
        _chunk("b", finish_reason="length"),
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
    )
    tl = run_sync(_raw_answer(body, hold_open=False))
    assert tl.error is None and tl.ok, tl.error
    assert "".join(c.text for c in tl.content_chunks()) == "ab"


def _burst(tokens: int, e2e_ms: float) -> RequestTimeline:
    tl = RequestTimeline(index=0, asked_tokens=tokens)
    tl.sent_ns = 1_000_000_000
    tl.end_ns = tl.sent_ns + int(e2e_ms * 1e6)
    tl.chunks = [Chunk(t_ns=tl.end_ns, nbytes=10, text="w " * tokens)]
    tl.usage = {"completion_tokens": tokens}
    tl.done = True
    return tl


def test_an_answer_faster_than_any_stream_fails_with_words() -> None:
    m = request_metrics(_burst(4000, 10.0))
    assert not m.ok and m.error is not None and m.error.startswith("faster than any stream")
    summary = summarize([m], duration_s=0.02)
    assert summary.ok == 0 and summary.output_tps is None
    assert summary.errors == {"faster than any stream": 1}


def test_an_answer_within_one_stream_s_speed_is_kept() -> None:
    m = request_metrics(_burst(16, 1.0))  # 15 tokens after the first in 1 ms: 15,000 tok/s
    assert m.ok, m.error


def test_a_bench_of_a_burst_writes_no_speed_past_one_stream(tmp_path: Path) -> None:
    """Twenty-first sweep A01: one stream's 175,371 tok/s was written as output_tps."""
    script = Script(ttft_s=0.0, itl_s=0.0, tokens_per_chunk=4000, persona="llamacpp")
    server = ScriptedServer(script).start_in_thread()
    out, csv = tmp_path / "r.json", tmp_path / "r.csv"
    try:
        args = ["bench", "llamacpp", "--url", server.base_url, "--requests", "1"]
        args += ["--max-tokens", "4000", "--csv", str(csv), "--json", str(out)]
        result = CliRunner().invoke(app, args)
    finally:
        server.stop_thread()
    assert result.exit_code != 0
    assert "faster than any stream" in " ".join(result.output.split())
    (run,) = json.loads(out.read_text())["runs"]
    assert run["summary"]["ok"] == 0 and run["summary"]["output_tps"] is None, run["summary"]
    (row,) = list(DictReader(csv.open()))  # a run with nothing answered: a row of no speed
    assert row["ok"] == "0" and row["output_tps"] == "" and row["writing_tps_p50"] == ""


def test_a_run_with_no_answered_request_writes_no_throughput(tmp_path: Path) -> None:
    """Twenty-first sweep A12: an all-429 run appended a row of 0 tok/s to the results CSV."""
    server = ScriptedServer(Script(fault="http500")).start_in_thread()
    csv = tmp_path / "r.csv"
    try:
        args = ["bench", "llamacpp", "--url", server.base_url, "--requests", "2"]
        result = CliRunner().invoke(app, [*args, "--csv", str(csv), "--no-check"])
    finally:
        server.stop_thread()
    assert result.exit_code != 0
    (row,) = list(DictReader(csv.open()))
    assert (row["ok"], row["failed"], row["output_tps"]) == ("0", "2", ""), row
