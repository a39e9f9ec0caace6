"""Multi-turn sessions (`felab bench --sessions N --turns T`): the history grows every turn, and
against a server with a known prefill cost and prefix cache, TTFT falls by exactly what the
cached history no longer costs."""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.lab.scripted_server import Script, ScriptedServer
from tests.engine.scripted_bench import bench

runner = CliRunner()
PREFILL_S = 0.0004  # a token of prompt not in the cache


def _sessions(cache: bool, tmp_path: Path) -> tuple[dict[str, Any], ScriptedServer]:
    script = Script(
        persona="llamacpp",
        ttft_s=0.004,
        itl_s=0.001,
        prefill_s_per_token=PREFILL_S,
        prefix_cache=cache,
        cache_block=16,
    )
    flags = ("--sessions", "4", "--turns", "4", "-c", "2", "--think-time", "0.01")
    done = bench(script, tmp_path / f"sessions-{cache}.json", *flags,
                 "--prompt-tokens", "48", "--max-tokens", "8")  # fmt: skip
    return done.record, done.server


def test_each_turn_carries_the_whole_history(tmp_path: Path) -> None:
    record, server = _sessions(cache=False, tmp_path=tmp_path)
    timed = server.log[1:]  # the first is the warm-up
    assert len(timed) == 16
    by_session: dict[str, list[list[dict[str, str]]]] = {}
    for entry in timed:
        messages = entry.body["messages"]
        session = messages[0]["content"].split(" turn ")[0]
        by_session.setdefault(session, []).append(messages)
    assert len(by_session) == 4
    for turns in by_session.values():
        assert [len(m) for m in turns] == [1, 3, 5, 7]  # user, then + answer + user per turn
        for earlier, later in itertools.pairwise(turns):
            assert later[: len(earlier)] == earlier  # the history is sent as it was
            assert later[len(earlier)]["role"] == "assistant"
            assert later[len(earlier)]["content"].split() == [f"w{k}" for k in range(8)]
    assert record["workload"]["sessions"] == 4 and record["workload"]["turns"] == 4
    (run,) = record["runs"]
    assert [t["turn"] for t in run["summary"]["per_turn"]] == [1, 2, 3, 4]
    assert all(t["requests"] == 4 for t in run["summary"]["per_turn"])


def test_the_cached_history_takes_its_prefill_off_ttft(tmp_path: Path) -> None:
    cached_run, _ = _sessions(cache=True, tmp_path=tmp_path)
    plain_run, _ = _sessions(cache=False, tmp_path=tmp_path)
    cached = cached_run["runs"][0]
    plain = plain_run["runs"][0]
    shares = [t["cached_share"] for t in cached["summary"]["per_turn"]]
    assert shares[0] == 0 and shares == sorted(shares) and shares[-1] > 0.6, shares
    for turn in (2, 3, 4):
        hits = [r for r in cached["requests"] if r["turn"] == turn]
        misses = [r for r in plain["requests"] if r["turn"] == turn]
        saved_tokens = statistics.median(r["cached_tokens"] for r in hits)
        assert [r["prompt_tokens"] for r in hits] == [r["prompt_tokens"] for r in misses]
        saved_ms = (
            statistics.median(r["ttft_s"] for r in misses)
            - statistics.median(r["ttft_s"] for r in hits)
        ) * 1e3
        expected_ms = saved_tokens * PREFILL_S * 1e3
        # a shared 2-core box: the server is a thread under the client's GIL
        assert saved_ms == pytest.approx(expected_ms, abs=3.0 + 0.1 * expected_ms), turn


def test_bad_session_flags_are_refused(tmp_path: Path) -> None:
    for flags, said in (
        (["--sessions", "0"], "--sessions must be from 1 to 1,000,000"),
        (["--sessions", "2", "--turns", "0"], "--turns must be 1-1000"),
        (["--sessions", "2", "--think-time", "-1"], "--think-time must be 0-3600"),
        (["--sessions", "2", "--rate", "3"], "drop --rate"),
    ):
        result = runner.invoke(app, ["bench", "--url", "http://127.0.0.1:9", *flags])
        assert result.exit_code == 2, result.output
        assert said in " ".join(result.output.split())


def test_a_history_past_any_context_ends_its_conversation_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eighteenth sweep (a) H6, (a2) H1: a server sending pages for every answer grew each
    session's history, and felab's memory, without bound (4 GB in 50 s). A conversation whose
    history passes what any model's context holds ends there, and the run says so."""
    from felab_core.engine import measure

    monkeypatch.setattr(measure, "MOST_HISTORY_CHARS", 200)  # a few turns of 8 short words
    script = Script(persona="llamacpp", ttft_s=0.002, itl_s=0.0005)
    done = bench(script, tmp_path / "long.json", "--sessions", "3", "--turns", "50", "-c", "3",
                 "--prompt-tokens", "16", "--max-tokens", "8")  # fmt: skip
    timed = done.server.log[1:]
    assert 3 <= len(timed) < 3 * 50
    stopped = done.run["summary"]["stopped"]
    assert stopped.startswith("3 conversation(s) ended early (conversation ")
    assert "more than any model's context holds" in stopped
    assert "the user's messages are long (lower --prompt-tokens" in stopped  # 16-token prompts
    assert "ended early" in done.output
