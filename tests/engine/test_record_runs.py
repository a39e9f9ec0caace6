"""felab_core.engine.record_runs and the request checks beside it: a run of a hand-edited
record held to its own length, workload and streams (twentieth sweep, a2)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from felab_core.engine.record_reading import load_record
from felab_core.engine.record_requests import CompareError
from tests.engine.test_compare import _record, _requests


def _load(tmp_path: Path, record: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(record))  # NaN and Infinity written as a hand edit would
    return load_record(path, unsealed=True)


def _refused(tmp_path: Path, record: dict[str, Any], said: str) -> str:
    with pytest.raises(CompareError, match=re.escape(said)) as caught:
        _load(tmp_path, record)
    assert "edited or broken" in str(caught.value)
    return str(caught.value)


def _run(users: int = 2, count: int = 20, lasted: float = 1.69) -> dict[str, Any]:
    record = _record([(users, _requests([0.05] * count))], requests=count)
    record["runs"][0]["summary"] = {"ok": count, "duration_s": lasted}
    return record


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda s: s.pop("duration_s"), "run 1 has no summary duration_s"),
        (lambda s: s.update(duration_s=None), "run 1 has no summary duration_s"),
        (lambda s: s.update(duration_s=-1), "run 1 has summary duration_s = -1, not how long"),
        (lambda s: s.update(duration_s="1.69"), "run 1 has summary duration_s = '1.69'"),
        (lambda s: s.update(duration_s=float("inf")), "summary duration_s = inf, not how long"),
        (lambda s: s.update(duration_s=float("nan")), "summary duration_s = nan, not how long"),
        (lambda s: s.update(duration_s=True), "run 1 has summary duration_s = True"),
    ],
)
def test_a_run_whose_length_is_missing_or_broken_is_refused(
    tmp_path: Path, edit: Any, said: str
) -> None:
    """A2-1: with summary.duration_s deleted, -1, a string or infinity, an end-to-end of
    80,000 s in a 1.7 s run was compared as "worse": the run's length switched its check off."""
    record = _run()
    for request in record["runs"][0]["requests"]:
        request["e2e_s"] = 80_000.0
    edit(record["runs"][0]["summary"])
    _refused(tmp_path, record, said)


def test_a_run_with_no_summary_is_refused_and_an_honest_one_is_read(tmp_path: Path) -> None:
    record = _run()
    assert len(_load(tmp_path, record)["runs"][0]["requests"]) == 20
    del record["runs"][0]["summary"]
    _refused(tmp_path, record, "run 1 has no summary: felab writes one for every run")


def test_an_answer_with_a_first_token_and_no_end_is_refused(tmp_path: Path) -> None:
    """A2-3: a TTFT of 86,000 s beside e2e_s null was compared ("worse", +1.5e9 %)."""
    record = _run()
    for request in record["runs"][0]["requests"]:
        request.update(ttft_s=86_000.0, e2e_s=None)
    _refused(tmp_path, record, "request 1 is answered, with a first token (ttft_s = 86000.0)")
    failed = _run()  # a request that failed has no figure compared: its TTFT alone is kept
    failed["runs"][0]["requests"][0] = {"index": 0, "ok": False, "ttft_s": 0.05}
    failed["runs"][0]["summary"]["ok"] = 19
    assert len(_load(tmp_path, failed)["runs"][0]["requests"]) == 19


@pytest.mark.parametrize("tiny", [1e-300, 1e-9, 5e-7])
def test_a_first_token_faster_than_any_round_trip_is_refused(tmp_path: Path, tiny: float) -> None:
    """A2-18: a TTFT of 1e-300 s (or 1 ns) was "TTFT p50 0.0 ms, better, -100 %"; numbers
    import already refused it under 1e-6 s."""
    record = _run()
    record["runs"][0]["requests"][0]["ttft_s"] = tiny
    _refused(tmp_path, record, f"ttft_s = {tiny!r}: no request of felab's is timed under 1e-06 s")


def _copied(record: dict[str, Any], times: int) -> list[dict[str, Any]]:
    requests = record["runs"][0]["requests"]
    copies = [copy.deepcopy(r) for _ in range(times) for r in requests]
    for index, request in enumerate(copies):
        request["index"] = index
    record["runs"][0]["requests"] = copies
    record["runs"][0]["summary"]["ok"] = len(copies)
    return copies


@pytest.mark.parametrize(
    "edit",
    [
        lambda w: w.update(requests=None),  # summary.ok set to match
        lambda w: w.pop("requests"),
        lambda w: w.update(duration_s=60.0, requests=None),
        lambda w: w.clear(),
    ],
)
def test_requests_copied_past_what_the_streams_could_send_are_refused(
    tmp_path: Path, edit: Any
) -> None:
    """A2-2: 20 requests copied 50 times and renumbered passed once workload.requests was
    null or missing or a duration was set: 1,000 requests of 0.12 s at 2 streams need 60 s,
    and the run lasted 1.69 s."""
    record = _run()
    _copied(record, 50)
    edit(record["workload"])
    _refused(tmp_path, record, "run 1 lists requests of 120 s end to end in all, and its 2 streams")


def test_a_workload_that_bounds_nothing_is_refused(tmp_path: Path) -> None:
    """A2-2: workload.requests null with no duration, sessions or trace: bench runs no such
    workload (it asks for --requests or --duration)."""
    record = _run()
    record["workload"].update(requests=None, duration_s=None, sessions=None, trace=None)
    _refused(tmp_path, record, "workload requests is None with no duration_s, sessions or trace")


def test_a_sessions_or_trace_run_holds_no_more_requests_than_its_workload_sent(
    tmp_path: Path,
) -> None:
    """A2-15: a 4 x 3 sessions record's 12 requests copied 50 times (600), and a 6-line
    trace's copied (300), passed: the -n bound was skipped whenever sessions or a trace was set."""
    record = _run(count=12, lasted=10_000.0)  # a run long enough for the copies' time
    record["workload"].update(requests=None, sessions=4, turns=3)
    assert len(_load(tmp_path, record)["runs"][0]["requests"]) == 12
    _copied(record, 50)
    _refused(tmp_path, record, "run 1 lists 600 requests, and its workload sent 12 (4 sessions")
    trace = _run(count=6, lasted=10_000.0)
    trace["workload"].update(requests=None, trace={"name": "t.jsonl", "requests": 6})
    assert len(_load(tmp_path, trace)["runs"][0]["requests"]) == 6
    _copied(trace, 50)
    _refused(tmp_path, trace, "run 1 lists 300 requests, and its workload sent 6 (the trace's 6")


@pytest.mark.parametrize("extra", [1, 400])
def test_gaps_beyond_the_chunks_counted_or_the_tokens_asked_are_refused(
    tmp_path: Path, extra: int
) -> None:
    """A2-17: zeros appended to itl_s made ITL p50 "0.00 ms, better, -100 %": a request of
    8 chunks has 7 gaps, and bench cuts a stream of max_tokens 8 at 4 x 8 + 256 messages."""
    record = _run()
    for request in record["runs"][0]["requests"]:
        request["counted_chunks"] = 8
    assert len(_load(tmp_path, record)["runs"][0]["requests"]) == 20
    record["runs"][0]["requests"][3]["itl_s"] += [0.0] * extra
    _refused(tmp_path, record, f"request 4 has {7 + extra} inter-token gaps and counted_chunks = 8")
    for request in record["runs"][0]["requests"]:
        del request["counted_chunks"]  # a record without the count: bounded by the tokens asked
    if extra == 400:
        _refused(tmp_path, record, "request 4 has 407 inter-token gaps: felab ends a stream long")
    else:
        assert len(_load(tmp_path, record)["runs"][0]["requests"]) == 20


def test_the_fastest_request_copied_under_new_indexes_is_refused(tmp_path: Path) -> None:
    """A2-2 (fourth way): all 20 requests made copies of the fastest, indexes 0..19, kept the
    count within every bound and turned "worse" verdicts into "within noise"."""
    record = _run()
    requests = record["runs"][0]["requests"]
    for j, request in enumerate(requests):
        gaps = [0.01 + 1e-6 * (j + 1)] + [0.01 + 2e-6 * k for k in range(6)]  # each its own
        request.update(itl_s=gaps, e2e_s=0.05 + sum(gaps), tpot_s=sum(gaps) / 7)
        request["writing_tps"] = 1 / request["tpot_s"]
    assert len(_load(tmp_path, record)["runs"][0]["requests"]) == 20
    for j in range(1, len(requests)):
        requests[j] = {**copy.deepcopy(requests[0]), "index": j}
    _refused(tmp_path, record, "request 2 has the same first token, end and 7 gaps as request 1")
