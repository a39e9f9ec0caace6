"""felab_core.engine.compare: a change is named only when it is beyond the runs' own noise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from felab_core.engine.compare import compare_records, compare_runs
from felab_core.engine.measure import SCHEMA
from felab_core.engine.record_reading import load_record
from felab_core.engine.record_requests import CompareError
from felab_core.engine.record_seal import sealed_text


def _requests(ttfts: list[float], gap: float = 0.01, tokens: int = 8) -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "ok": True,
            "cold": False,
            "ttft_s": t,
            "tpot_s": gap,
            "e2e_s": t + gap * (tokens - 1),
            "writing_tps": 1 / gap,
            "itl_s": [gap] * (tokens - 1),
            "output_tokens": tokens,
            "first_chunk_tokens": 1.0,
        }
        for i, t in enumerate(ttfts)
    ]


def _record(runs: list[tuple[int, list[dict[str, Any]]]], **workload: Any) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "target": {"model": "m", "api": "openai-chat"},
        "server": {"kind": "llamacpp", "version": "b1"},
        "workload": {"preset": "sweep", "prompt_tokens": 256, "max_tokens": 8, **workload},
        "runs": [
            {"concurrency": c, "rate": None, "requests": reqs, "summary": _summary(reqs)}
            for c, reqs in runs
        ],
    }


def _summary(requests: list[dict[str, Any]]) -> dict[str, Any]:
    """What bench writes beside every run that compare reads: how long it lasted (here as if
    one stream had sent the requests back to back)."""
    return {"duration_s": sum(r.get("e2e_s") or 0.0 for r in requests)}


def write_record(path: Path, record: dict[str, Any]) -> Path:
    """A record as felab bench writes it: sealed (a hand-edited one is written with json.dumps
    and read with unsealed=True, its fields checked one by one)."""
    path.write_text(sealed_text(record), encoding="utf-8")
    return path


def _by_key(changes: list[Any]) -> dict[str, Any]:
    return {c.figure.key: c for c in changes}


def test_the_same_requests_are_within_noise() -> None:
    rng = np.random.default_rng(1)
    reqs = _requests(list(0.05 + rng.normal(0, 0.002, 200)))
    for change in compare_runs(reqs, reqs):
        assert change.verdict == "within noise", change
        assert change.diff == 0
        assert change.low is not None and change.high is not None
        assert change.low <= 0 <= change.high


def test_a_slower_first_token_is_named_worse_with_an_interval_around_the_truth() -> None:
    rng = np.random.default_rng(2)
    a = _requests(list(0.050 + rng.normal(0, 0.003, 300)))
    b = _requests(list(0.060 + rng.normal(0, 0.003, 300)))
    c = _by_key(compare_runs(a, b))
    ttft = c["ttft_p50"]
    assert ttft.verdict == "worse"
    assert ttft.low < 10.0 < ttft.high  # milliseconds: the true shift is 10 ms
    assert 8.5 < ttft.diff < 11.5
    assert c["itl_p50"].verdict == "within noise"  # the gaps did not change
    faster = _by_key(compare_runs(b, a))["ttft_p50"]
    assert faster.verdict == "better" and faster.diff < 0


def test_a_tiny_real_shift_is_not_worth_naming() -> None:
    rng = np.random.default_rng(3)
    base = 0.050 + rng.normal(0, 0.0002, 2000)
    a, b = _requests(list(base)), _requests(list(base + 0.0003))  # +0.6 %, tightly measured
    ttft = _by_key(compare_runs(a, b))["ttft_p50"]
    assert ttft.low is not None and ttft.low > 0  # statistically real...
    assert ttft.verdict == "within noise"  # ...but under the 2 % worth naming
    named = _by_key(compare_runs(a, b, min_effect=0.001))["ttft_p50"]
    assert named.verdict == "worse"


def test_writing_speed_higher_is_better() -> None:
    a = _requests([0.05] * 50, gap=0.010)
    b = _requests([0.05] * 50, gap=0.008)
    c = _by_key(compare_runs(a, b))
    assert c["writing_tps_p50"].verdict == "better"
    assert c["itl_p50"].verdict == "better"


def test_failed_and_cold_requests_are_left_out() -> None:
    a = _requests([0.05] * 30)
    odd = [{"ok": False, "ttft_s": 9.0}, {"ok": True, "cold": True, "ttft_s": 9.0}]
    b = [*_requests([0.05] * 30), *odd]
    comparison = compare_records(_record([(4, a)]), _record([(4, b)]))
    (pair,) = comparison.runs
    assert (pair.requests_a, pair.requests_b) == (30, 30)
    assert _by_key(pair.changes)["ttft_p95"].verdict == "within noise"


def test_runs_are_matched_by_load_and_differences_are_said() -> None:
    a = _record([(1, _requests([0.05] * 10)), (4, _requests([0.05] * 10))])
    b = _record([(4, _requests([0.05] * 10)), (16, _requests([0.05] * 10))], max_tokens=64)
    comparison = compare_records(a, b)
    assert [p.load for p in comparison.runs] == ["4 streams"]
    said = " ".join(comparison.caveats)
    assert "max_tokens differs: 8 in A, 64 in B" in said
    assert "1 stream is only in A" in said and "16 streams is only in B" in said
    with pytest.raises(CompareError, match="share no load"):
        compare_records(
            _record([(1, _requests([0.05] * 5))]), _record([(2, _requests([0.05] * 5))])
        )


def test_files_that_are_not_records_are_refused_in_words(tmp_path: Path) -> None:
    with pytest.raises(CompareError, match="does not exist"):
        load_record(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CompareError, match="not a JSON file"):
        load_record(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text(json.dumps({"schema": "aiperf/1"}))
    with pytest.raises(CompareError, match="not a felab bench record"):
        load_record(tmp_path / "other.json")


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.floats(0.001, 5.0), min_size=2, max_size=40),
    st.floats(0.0, 0.5),
)
def test_a_constant_shift_is_found_exactly(values: list[float], shift: float) -> None:
    """The reported change is exactly the shift of each figure, whatever the data."""
    a = _requests(values)
    b = _requests([v + shift for v in values])
    ttft = _by_key(compare_runs(a, b))["ttft_p50"]
    assert ttft.diff == pytest.approx(shift * 1e3, abs=1e-6)
    assert ttft.a == pytest.approx(float(np.quantile(values, 0.5)) * 1e3)


def test_a_record_s_words_are_shown_without_escape_codes() -> None:
    """Sixteenth sweep H6: a server kind's escape code and U+202E reached the terminal."""
    a = _record([(4, _requests([0.05] * 5))])
    b = {**a, "server": {"kind": "vllm\x1b[2J\u202e", "version": "0.6"}}
    b["target"] = {"model": "m\x1b[31m" + "x" * 500, "api": "openai-chat"}
    notes = " | ".join(compare_records(a, b).caveats)
    assert "\x1b" not in notes and "\u202e" not in notes
    assert "server differs: llamacpp b1 in A, vllm?[2J? 0.6 in B" in notes
    assert "target model differs: 'm' in A, 'm?[31mxxx" in notes and len(notes) < 300


def test_one_request_a_side_is_too_few_for_an_interval_not_unmeasured() -> None:
    """Seventeenth sweep (a) M10: both figures shown, yet "not measured in both"."""
    a = _record([(4, _requests([0.05] * 5))])
    b = _record([(4, _requests([0.06]))])
    ttft = _by_key(compare_records(a, b).runs[0].changes)["ttft_p50"]
    assert ttft.a is not None and ttft.b is not None
    assert ttft.verdict == "too few requests to tell"


TOO_FEW = "too few requests to tell"


@pytest.mark.parametrize(
    ("count", "median", "p95"),
    [(2, TOO_FEW, TOO_FEW), (9, TOO_FEW, TOO_FEW), (10, "worse", TOO_FEW), (20, "worse", "worse")],
)
def test_a_verdict_needs_enough_requests_a_side(count: int, median: str, p95: str) -> None:
    """Sweep 22 (a2) A2-14: 2 requests a side were called better or worse, with a "95 %"
    interval from the 3 distinct resamples 2 requests have. A median needs 10 a side, a p95
    20 (under 20 it is the slowest request, not a percentile); the figures are still shown."""
    a = _record([(4, _requests([0.050 + 0.0001 * i for i in range(count)]))])
    b = _record([(4, _requests([0.090 + 0.0001 * i for i in range(count)]))])
    comparison = compare_records(a, b)
    changes = _by_key(comparison.runs[0].changes)
    assert (changes["ttft_p50"].verdict, changes["ttft_p95"].verdict) == (median, p95)
    assert changes["ttft_p50"].a is not None and changes["ttft_p50"].b is not None
    said = [n for n in comparison.caveats if "too few requests to tell" in n]
    if count < 10:
        assert said == [
            f"4 streams: too few requests to tell ({count} in A, {count} in B): a verdict needs "
            "10 a side (20 for a p95); run more (-n)"
        ]
    elif count < 20:
        assert said == [
            "4 streams: too few requests to tell for TTFT p95 (10 in A, 10 in B): a verdict "
            "needs 20 a side; run more (-n)"
        ]
    else:
        assert said == []


def test_two_replays_or_conversations_paced_otherwise_are_said() -> None:
    """Eighteenth sweep (a2) M7: two traces under one name (other sha256), another
    --trace-speed or block size, another --think-time: compared without a word."""
    trace = {"name": "t1.jsonl", "sha256": "f37bf6" + "0" * 58, "speed": 1.0, "block_size": 512}
    runs = [(0, _requests([0.05] * 20))]  # enough for a verdict: no note of too few
    a = _record(runs, preset="trace:t1.jsonl", prompt_tokens=None, trace=trace)
    other = {**trace, "block_size": 16}  # another trace or speed is another load: refused
    notes = " | ".join(
        compare_records(a, {**a, "workload": {**a["workload"], "trace": other}}).caveats
    )
    assert "workload --trace-block-size differs: 512 in A, 16 in B" in notes
    assert not compare_records(a, a).caveats
    chat = _record([(4, _requests([0.05] * 10))], sessions=4, turns=5, think_time_s=1.0)
    slow = {**chat, "workload": {**chat["workload"], "think_time_s": 30.0}}
    assert (
        "workload --think-time differs: 1.0 in A, 30.0 in B" in compare_records(chat, slow).caveats
    )


def test_another_burstiness_or_tools_is_noted() -> None:
    """Nineteenth sweep (a2) M5, M4: open-loop runs were matched by rate alone, a burstiness of
    0.05 against 1 and a --tools run against prose compared without a word."""
    from felab_core.engine.compare import _caveats

    a = _record([(0, _requests([0.05] * 4))], burstiness=1.0)
    b = _record([(0, _requests([0.05] * 4))], burstiness=0.05, tools=True)
    notes = _caveats(a, b)
    assert "workload burstiness differs: 1.0 in A, 0.05 in B" in notes
    assert "workload tools differs: False in A, True in B" in notes
    assert not any("tools" in n for n in _caveats(a, _record([(0, [])], burstiness=1.0)))


def test_another_trace_or_trace_speed_is_another_load() -> None:
    """Sweep 24 M3: a trace replayed at --trace-speed 1 and 20 (or another trace's contents)
    was matched as one load and given better/worse verdicts with only a note, while another
    --rate is refused; a replay's load was named "0 streams" (M2)."""
    trace = {"name": "t1.jsonl", "sha256": "f37bf6" + "0" * 58, "speed": 1.0, "block_size": 512}
    runs = [(0, _requests([0.05] * 20))]
    a = _record(runs, preset="trace:t1.jsonl", prompt_tokens=None, trace=trace)
    assert [p.load for p in compare_records(a, a).runs] == ["as traced"]
    fast = {**a, "workload": {**a["workload"], "trace": {**trace, "speed": 20.0}}}
    refused = (
        r"as traced is only in A; as traced x20 is only in B\): run both with the same --trace"
    )
    with pytest.raises(CompareError, match=refused):
        compare_records(a, fast)
    other = {**a, "workload": {**a["workload"], "trace": {**trace, "sha256": "98cb23" + "1" * 58}}}
    refused = r"replayed different traces \(sha256 f37bf6000000\.\.\. in A, 98cb23111111\.\.\. in B"
    with pytest.raises(CompareError, match=refused):
        compare_records(a, other)
    closed = _record([(1, _requests([0.05] * 20))])
    with pytest.raises(CompareError, match=r"as traced is only in A; 1 stream is only in B"):
        compare_records(a, closed)


def test_a_rate_with_several_caps_is_several_loads() -> None:
    """Sweep 24 M1: `-c 1,4 --rate 2` runs two loads, each capped otherwise in flight; both had
    been keyed "2 req/s" alone, so compare matched a cap-4 run with a cap-free one."""
    a = _record([(1, _requests([0.05] * 20)), (4, _requests([0.05] * 20))], rate=2.0)
    free = _record([(0, _requests([0.05] * 20))], rate=2.0)
    for run in a["runs"] + free["runs"]:
        run["rate"] = 2.0
    assert [p.load for p in compare_records(a, a).runs] == ["2 req/s, cap 1", "2 req/s, cap 4"]
    refused = r"2 req/s, cap 1 is only in A; 2 req/s, cap 4 is only in A; 2 req/s is only in B"
    with pytest.raises(CompareError, match=refused):
        compare_records(a, free)
