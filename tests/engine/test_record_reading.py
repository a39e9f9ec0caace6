"""felab_core.engine.record_reading: a record's workload trace and each run's load as bench
writes them (twentieth sweep, a2)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from felab_core.engine.record_reading import load_record
from felab_core.engine.record_requests import CompareError
from tests.engine.test_compare import _record, _requests

_TRACE = {
    "name": "ok.jsonl",
    "sha256": "a8302af060398f3c4ae24a2715238006be8fba72ccaa71cc2d3834b1077c60ce",
    "requests": 6,
    "with_hash_ids": 0,
    "block_size": 512,
    "speed": 1.0,
    "span_s": 0.25,
}


def _load(tmp_path: Path, record: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(record))  # NaN written as JSON's NaN, as a hand edit would
    return load_record(path, unsealed=True)


@pytest.mark.parametrize(
    ("trace", "said"),
    [
        ("x", "workload trace is 'x', not the mapping felab bench writes"),
        ([1, 2], "workload trace is [1, 2], not the mapping"),
        ({**_TRACE, "speed": float("nan")}, "workload trace speed is nan, not a --trace-speed"),
        ({**_TRACE, "speed": 0}, "workload trace speed is 0, not a --trace-speed"),
        ({**_TRACE, "requests": "6"}, "workload trace requests is '6', not a count"),
        ({**_TRACE, "block_size": 0}, "workload trace block_size is 0, not a count"),
        ({**_TRACE, "sha256": "abc"}, "workload trace sha256 is 'abc', not a sha256"),
        ({**_TRACE, "name": "n" * 1000}, "workload trace name is 'nnnn"),
        ({**_TRACE, "span_s": -1}, "workload trace span_s is -1, not a trace's length"),
        ({**_TRACE, "requests": 1}, "run 1 lists 6 requests, and its workload sent 1 (the trace"),
    ],
)
def test_a_trace_felab_never_wrote_is_refused(tmp_path: Path, trace: Any, said: str) -> None:
    """A2-16: workload.trace as a string, a NaN speed, or "requests": 1 beside 6 listed passed
    compare without a word (A replayed a trace, B named none)."""
    record = _record([(4, _requests([0.05] * 6))], prompt_tokens=None, trace=_TRACE)
    assert len(_load(tmp_path, record)["runs"][0]["requests"]) == 6
    record["workload"]["trace"] = trace
    with pytest.raises(CompareError, match=re.escape(said)) as caught:
        _load(tmp_path, record)
    assert "edited or broken" in str(caught.value)


@pytest.mark.parametrize("users", [None, 0])
def test_a_run_with_no_streams_and_no_rate_is_refused(tmp_path: Path, users: Any) -> None:
    """A2-24: runs of concurrency null or 0 and no rate were compared as "None streams" /
    "0 streams"; only a trace's replay runs uncapped with no rate."""
    record = _record([(1, _requests([0.05] * 6))])
    record["runs"][0]["concurrency"] = users
    with pytest.raises(CompareError, match=re.escape(f"run 1 has concurrency {users} and no rate")):
        _load(tmp_path, record)
    record["workload"]["trace"] = _TRACE
    assert len(_load(tmp_path, record)["runs"][0]["requests"]) == 6
