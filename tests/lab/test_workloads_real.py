"""Workloads against the real llama-server of the lab: its prompt cache (reported as
`timings.cache_n`) sees the blocks a trace's requests share, and a conversation's history."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from typer.testing import CliRunner

from felab.cli.main import app
from tests.lab_fixtures import RunningServer

runner = CliRunner()


def test_shared_trace_blocks_are_served_from_llamas_cache(
    llama_server: RunningServer, tmp_path: Path
) -> None:
    rows = []
    for i in range(10):
        shared = [900, 901] if i % 2 else []  # odd requests open with the same two blocks
        own = [2000 + 3 * i + k for k in range(3 - len(shared))]
        hash_ids = shared + own
        rows.append(
            {"timestamp": 150 * i, "input_length": 48, "output_length": 2, "hash_ids": hash_ids}
        )
    trace = tmp_path / "shared.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run.json"
    result = runner.invoke(
        app,
        [
            "bench",
            "llamacpp",
            "--url",
            llama_server.base_url,
            "--trace",
            str(trace),
            "--trace-block-size",
            "16",
            "-c",
            "1",
            "--no-csv",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "of prompt tokens were cached" in result.output
    (run,) = json.loads(out.read_text())["runs"]
    requests = sorted(run["requests"], key=lambda r: r["index"])
    assert all(r["ok"] for r in requests)
    cached = [r["cached_tokens"] for r in requests]
    assert None not in cached, cached
    repeat_hits = statistics.median(cached[3::2])  # shared blocks seen before
    unique_hits = statistics.median(cached[0::2])  # only the chat template can match
    assert repeat_hits > unique_hits + 16, cached  # at least one 16-word block more


def test_a_conversations_history_is_served_from_llamas_cache(
    llama_server: RunningServer, tmp_path: Path
) -> None:
    out = tmp_path / "sessions.json"
    result = runner.invoke(
        app,
        [
            "bench",
            "llamacpp",
            "--url",
            llama_server.base_url,
            "--sessions",
            "2",
            "--turns",
            "4",
            "-c",
            "1",
            "--prompt-tokens",
            "24",
            "--max-tokens",
            "6",
            "--no-csv",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    (run,) = json.loads(out.read_text())["runs"]
    per_turn = run["summary"]["per_turn"]
    assert [t["turn"] for t in per_turn] == [1, 2, 3, 4]
    prompts = [t["prompt_tokens_mean"] for t in per_turn]
    assert prompts == sorted(prompts) and prompts[-1] > prompts[0]  # the history grows
    shares = [t["cached_share"] for t in per_turn]
    assert shares[-1] > shares[0] and shares[-1] > 0.5, shares  # and comes from the cache
