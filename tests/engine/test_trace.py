"""Trace replay (felab_core.engine.trace): a Mooncake-format file sent again on its own times,
with prompts that share exactly what the trace's users shared."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.trace import TraceError, TracePrompts, load_trace, parse_trace
from felab_core.lab.scripted_server import Script, ScriptedServer

runner = CliRunner()


def _jsonl(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_the_published_format_reads_with_its_aliases() -> None:
    text = _jsonl(
        [
            {"timestamp": 1000, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]},
            {"timestamp": 1250.5, "input_tokens": 600, "output_tokens": 5, "hash_ids": [0, 2]},
            {"delay": 100, "input_length": 30},
        ]
    )
    trace = parse_trace(text, name="t.jsonl", speed=2)
    assert [r.at_s for r in trace.requests] == [0.0, 0.2505, 0.3505]
    assert trace.offsets_s() == [0.0, 0.12525, 0.17525]
    assert trace.requests[2].output_tokens is None and trace.requests[2].hash_ids == ()
    assert trace.summary()["with_hash_ids"] == 2


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("not json", "line 1: not JSON"),
        ("[1, 2]", "line 1: expected an object"),
        ('{"timestamp": 0}', "line 1: no input_length"),
        ('{"timestamp": 0, "input_length": -5}', "line 1: input_length must be a whole number"),
        ('{"timestamp": "soon", "input_length": 5}', "line 1: timestamp must be milliseconds"),
        ('{"timestamp": NaN, "input_length": 5}', "line 1: timestamp must be finite"),
        ('{"timestamp": 0, "input_length": 5, "hash_ids": [1, "x"]}', "line 1: hash_ids"),
        (
            '{"timestamp": 0, "input_length": 100, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8]}',
            "block-size",
        ),
        ("", "no requests"),
        # Fourteenth sweep L2: json kept the last of two (20 tokens sent where 10 came first).
        ('{"timestamp": 0, "input_length": 10, "input_length": 20}', "gives input_length twice"),
        # seventeenth sweep (a2) H5, L4: a 2,000,000-token line grew felab past 1.4 GB
        ('{"timestamp": 0, "input_length": 2000000}', "input_length must be 1-262,144"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1000000}', "1-262,144"),
        # eighteenth sweep (a2) M4: the first of two names was taken, the other ignored
        ('{"timestamp": 0, "input_length": 20, "input_tokens": 200000}', "gives both input_le"),
        ('{"timestamp": 0, "input_length": 2, "output_length": 4, "output_tokens": 9}', "both"),
        ('{"timestamp": 0, "created_time": 5e9, "input_length": 20}', "gives both timestamp"),
        ('{"timestamp": 10, "delay": 99999999, "input_length": 20}', "both timestamp and delay"),
        # nineteenth sweep (a2) M2: a misspelled output_len was dropped; 256 tokens asked
        ('{"timestamp": 0, "input_length": 5, "output_len": 4}', "did you mean output_length"),
        # twentieth sweep (a2) A2-4: other tools' names for the answer's length were dropped
        ('{"timestamp": 0, "input_length": 5, "max_tokens": 4}', "given as output_length"),
        ('{"timestamp": 0, "input_length": 5, "osl": 4}', "given as output_length"),
        ('{"timestamp": 0, "isl": 5, "output_length": 4}', "given as input_length"),
        # (a2) L5: "", 0 or false had read as no ids; L4: 309 digits of span
        ('{"timestamp": 0, "input_length": 5, "hash_ids": ""}', "line 1: hash_ids"),
        ('{"timestamp": 0, "input_length": 5, "hash_ids": false}', "line 1: hash_ids"),
        (
            '{"timestamp": 0, "input_length": 5}\n{"timestamp": 1e308, "input_length": 5}',
            "spans 1e",
        ),
        (  # twentieth sweep (a2) A2-5: "spans 86,400 s ... more than a day (86,400 s)"
            '{"timestamp": 0, "input_length": 5}\n{"timestamp": 86400001, "input_length": 5}',
            "spans 86,400.001 s",
        ),
    ],
)
def test_a_bad_trace_is_refused_naming_its_line(line: str, said: str) -> None:
    with pytest.raises(TraceError, match=said.replace("(", r"\(")):
        parse_trace(line + "\n", block_size=16)


def test_a_line_separator_inside_a_json_string_does_not_split_the_line() -> None:
    """Eighteenth sweep (a2) L6: a raw U+2028 inside a string (legal JSON) split the line, and
    the trace was "not JSON"; lines end at a newline only (and \\r\\n)."""
    trace = parse_trace(
        '{"timestamp": 0, "input_length": 5, "note": "a\u2028b"}\r\n{"timestamp": 1, '
        '"input_length": 6}\n',
        block_size=16,
    )
    assert [r.input_tokens for r in trace.requests] == [5, 6]


def test_shared_hash_ids_give_shared_prompt_blocks_and_nothing_more() -> None:
    trace = parse_trace(
        _jsonl(
            [
                {"timestamp": 0, "input_length": 40, "hash_ids": [7, 8, 9]},
                {"timestamp": 1, "input_length": 40, "hash_ids": [7, 8, 5]},
                {"timestamp": 2, "input_length": 40, "hash_ids": [6, 8, 9]},
                {"timestamp": 3, "input_length": 40},
                {"timestamp": 4, "input_length": 40},
            ]
        ),
        block_size=16,
    )
    prompts = TracePrompts(trace, seed=3)
    words = [prompts.prompt(i).split() for i in range(5)]
    assert all(len(w) == 40 for w in words)
    assert words[0][:32] == words[1][:32] and words[0][32:] != words[1][32:]
    assert words[0][:16] != words[2][:16]  # another first block: no shared prefix at all
    assert words[0][16:32] == words[2][16:32]  # the same block id is the same words
    assert words[3] != words[4]  # requests without ids share nothing
    assert TracePrompts(trace, seed=3).prompt(1) == prompts.prompt(1)  # reproducible


def test_a_missing_file_is_said(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"none\.jsonl does not exist"):
        load_trace(tmp_path / "none.jsonl")


def _replay(server: ScriptedServer, trace: Path, *extra: str) -> dict[str, object]:
    out = trace.with_suffix(".result.json")
    result = runner.invoke(
        app,
        [
            "bench",
            "llamacpp",
            "--url",
            server.base_url,
            "--trace",
            str(trace),
            "--warmup",
            "1",
            "--no-csv",
            "--json",
            str(out),
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    record: dict[str, object] = json.loads(out.read_text())
    return record


def _replay_notes(trace: Path) -> list[str]:
    """The notes of the record a replay of `trace` writes, on a quick scripted llama.cpp."""
    server = ScriptedServer(Script(persona="llamacpp", ttft_s=0.002, itl_s=0.001))
    server.start_in_thread()
    try:
        record = _replay(server, trace)
    finally:
        server.stop_thread()
    notes = record["notes"]
    assert isinstance(notes, list)
    return notes


def test_a_trace_replays_on_its_times_scaled(tmp_path: Path) -> None:
    """Arrival at the server against the trace's times at 2x: the gaps hold to about 1 ms."""
    rows = [
        {"timestamp": 37 * i + (i % 3) * 11, "input_length": 20, "output_length": 4}
        for i in range(40)
    ]
    path = tmp_path / "arrivals.jsonl"
    path.write_text(_jsonl(rows))
    server = ScriptedServer(Script(persona="llamacpp", ttft_s=0.005, itl_s=0.002))
    server.start_in_thread()
    try:
        record = _replay(server, path, "--trace-speed", "2")
    finally:
        server.stop_thread()
    timed = server.log[1:]  # the first is the warm-up
    assert len(timed) == 40
    assert [entry.body["max_tokens"] for entry in timed] == [4] * 40
    want = [r["timestamp"] / 2 / 1000 for r in rows]  # type: ignore[operator]
    got = [entry.received_ns / 1e9 for entry in timed]
    offset = statistics.median(g - w for g, w in zip(got, want, strict=True))
    errors_ms = sorted(abs(g - w - offset) * 1e3 for g, w in zip(got, want, strict=True))
    # The server runs in this process (a thread under the same GIL as the client), so its own
    # stamps carry some of its wait for the GIL; the client's are checked exactly below.
    assert errors_ms[len(errors_ms) // 2] < 1.0, errors_ms
    assert errors_ms[int(0.9 * len(errors_ms))] < 5.0, errors_ms
    (run,) = record["runs"]  # type: ignore[misc]
    lags_ms = sorted(r["dispatch_lag_s"] * 1e3 for r in run["requests"])
    assert lags_ms[len(lags_ms) // 2] < 1.0, lags_ms
    workload = record["workload"]
    assert isinstance(workload, dict)
    assert workload["trace"]["requests"] == 40 and workload["trace"]["speed"] == 2
    assert workload["preset"] == "trace:arrivals.jsonl"


def test_the_prefix_cache_sees_what_the_trace_shared(tmp_path: Path) -> None:
    """A server with a known prefill cost and prefix cache: requests whose hash_ids repeat an
    earlier request's blocks get those tokens cached, and their TTFT falls by the prefill those
    tokens no longer cost (0.2 ms a token here)."""
    rows = []
    for i in range(12):
        shared = [100, 101, 102] if i % 2 else []  # odd requests share three 64-token blocks
        rows.append(
            {
                "timestamp": 120 * i,
                "input_length": 256,
                "output_length": 3,
                "hash_ids": shared + [1000 + 4 * i + k for k in range(4 - len(shared))],
            }
        )
    path = tmp_path / "cache.jsonl"
    path.write_text(_jsonl(rows))
    script = Script(
        persona="llamacpp",
        ttft_s=0.005,
        itl_s=0.002,
        prefill_s_per_token=0.0002,
        prefix_cache=True,
        cache_block=16,
    )
    server = ScriptedServer(script).start_in_thread()
    try:
        record = _replay(server, path, "--trace-block-size", "64")
    finally:
        server.stop_thread()
    (run,) = record["runs"]  # type: ignore[misc]
    requests = sorted(run["requests"], key=lambda r: r["index"])
    assert [r["prompt_tokens"] for r in requests] == [256] * 12
    cached = [r["cached_tokens"] for r in requests]
    assert cached[1] == 0  # the first to use blocks 100-102 finds nothing
    assert cached[3::2] == [192] * 5  # later ones find all three blocks
    assert cached[0::2] == [0] * 6  # unshared requests find nothing
    hit = statistics.median(r["ttft_s"] for r in requests[3::2])
    miss = statistics.median(r["ttft_s"] for r in requests[0::2])
    assert (miss - hit) * 1e3 == pytest.approx(192 * 0.2, abs=3.0)  # 38.4 ms of prefill saved
    assert run["summary"]["cached_share"] == pytest.approx(5 * 192 / (12 * 256))


def test_a_replay_preset_fits_a_results_row_whatever_the_file_is_called() -> None:
    from felab_core.engine.trace import preset_name

    assert preset_name("mooncake.jsonl") == "trace:mooncake.jsonl"
    long = preset_name("x" * 300 + ".jsonl")
    assert len(long) == 64 and long.startswith("trace:xxx")
    assert preset_name("a\u202eb.jsonl") == "trace:a?b.jsonl"


def test_rebuilt_blocks_are_kept_within_a_word_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seventeenth sweep (a2) H5: every block of a replay was kept for the whole run (12,400
    blocks of 65,536 words: GBs). At most MOST_KEPT_WORDS are kept; a block used again is the
    same words, rebuilt from its id."""
    import felab_core.engine.trace as trace_module

    monkeypatch.setattr(trace_module, "MOST_KEPT_WORDS", 64)
    lines = [
        json.dumps({"timestamp": i, "input_length": 32, "hash_ids": [i, i + 1]}) for i in range(20)
    ]
    prompts = TracePrompts(parse_trace("\n".join(lines) + "\n", block_size=16))
    first = prompts.prompt(0)
    for i in range(1, 20):
        prompts.prompt(i)
        assert len(prompts._blocks) <= 4  # 64 words of 16-word blocks
    assert prompts.prompt(0) == first  # block 0, rebuilt, is the same


def test_a_trace_line_is_held_to_bench_s_own_token_bound() -> None:
    """trace.py keeps its own copy (workloads imports trace for its types)."""
    from felab_core.engine import trace, workloads

    assert trace.MAX_INPUT_TOKENS == trace.MAX_OUTPUT_TOKENS == workloads.MAX_TOKENS


def test_another_tools_name_beside_felabs_own_is_the_traces_own_field(tmp_path: Path) -> None:
    """A2-4's refusal is for a figure given only under another tool's name: beside felab's own
    name for it, the other is the trace's own field and left alone."""
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 5, "prompt_tokens": 7, "output_length": 3}\n')
    (request,) = load_trace(path).requests
    assert (request.input_tokens, request.output_tokens) == (5, 3)


def test_a_trace_out_of_time_order_is_replayed_in_order_and_said(tmp_path: Path) -> None:
    """Twentieth sweep (a2) A2-21: two traces joined (times going back at line 4) were laid
    over each other and replayed at twice the load without a word."""
    rows = [{"timestamp": t, "input_length": 20, "output_length": 2} for t in (0, 20, 40) * 2]
    assert parse_trace(_jsonl(rows[:3])).goes_back_at is None
    assert parse_trace(_jsonl(rows[:3])).order_note is None
    path = tmp_path / "joined.jsonl"
    path.write_text(_jsonl(rows))
    assert load_trace(path).goes_back_at == 4
    notes = _replay_notes(path)
    assert any("line 4's time is before the line above it" in note for note in notes), notes


def test_a_trace_in_seconds_is_said_and_how_to_replay_it(tmp_path: Path) -> None:
    """Sweep 22 (a2) A2-9: timestamps in seconds (0, 1.5, 3.2) were read as milliseconds, so
    30 minutes replayed in 1.8 s without a word. They are still replayed (an honest trace that
    busy is rare, not wrong), with a note that says what felab reads and how to replay them."""
    seconds = [0, 1.5, 3.2, 4.1, 6.0, 7.25]
    rows = [{"timestamp": t, "input_length": 20, "output_length": 2} for t in seconds]
    note = parse_trace(_jsonl(rows), name="s.jsonl").unit_note
    assert note == (
        "trace s.jsonl: its requests are a median 1.5 ms apart (6 in 0.00725 s): felab reads "
        "timestamp and delay as milliseconds; if this file's times are seconds, replay it with "
        "--trace-speed 0.001 (or multiply them by 1000)"
    )
    assert parse_trace(_jsonl(rows), speed=0.001).unit_note is None  # read as seconds: said
    delays = [{"delay": 0.8, "input_length": 20}] * 4  # the gaps given as delays alike
    assert parse_trace(_jsonl(delays)).unit_note is not None
    # Honest milliseconds: Mooncake's pace (tens of ms apart), a burst at once, one gap.
    mooncake = [{"timestamp": 37 * i + (i % 3) * 11, "input_length": 20} for i in range(30)]
    assert parse_trace(_jsonl(mooncake)).unit_note is None
    at_once = [{"timestamp": 0, "input_length": 20}] * 5
    assert parse_trace(_jsonl(at_once)).unit_note is None
    assert parse_trace(_jsonl(rows[:2])).unit_note is None
    path = tmp_path / "seconds.jsonl"
    path.write_text(_jsonl(rows))
    notes = _replay_notes(path)
    assert any("--trace-speed 0.001" in note for note in notes), notes
