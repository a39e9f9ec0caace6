"""The seal on a bench record (engine/record_seal.py) and what a comparison says beside its
figures (engine/compare_notes.py): edits refused, big and non-ASCII records round-trip, and
failed shares, machines, addresses, temperatures and warm-ups said."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from felab_core.engine.compare import compare_records
from felab_core.engine.record_reading import load_record
from felab_core.engine.record_requests import CompareError
from felab_core.engine.record_seal import SEAL_STATE, SealState, seal_of, sealed_text
from felab_core.engine.results import _clean
from tests.engine.test_compare import _record, _requests, write_record


def _big(n: int, seed: int = 3) -> dict[str, Any]:
    """A record of n requests with full-precision floats, chunk times and server timings (the
    keys the reader drops while parsing) and model and server names in other scripts."""
    rng = random.Random(seed)
    requests = _requests([0.05 + rng.random() / 1000 for _ in range(n)])
    for r in requests:
        r["e2e_s"] += rng.random() / 1e6
        gaps = [0.01 + rng.random() / 1e5 for _ in range(7)]
        r["itl_s"], r["tpot_s"] = gaps, sum(gaps) / 7
        r["writing_tps"] = 7 / sum(gaps)
        r["e2e_s"] = r["ttft_s"] + sum(gaps)
        r["chunk_times_s"] = [r["ttft_s"] + sum(gaps[:i]) for i in range(8)]
        r["server_timings"] = {"prompt_ms": rng.random() * 10, "predicted_n": 8}
    record = _record([(4, requests)])
    record["target"]["model"] = "Qwen-千问/模型-ü-🚀"
    record["server"]["version"] = "b1 – ß"
    record["notes"] = ["température élevée", "\u0000 and \u2028 in a note"]
    return record


def test_a_record_of_10k_requests_and_non_ascii_names_round_trips(tmp_path: Path) -> None:
    record = _big(10_000)
    path = write_record(tmp_path / "big.json", record)
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["seal"] == seal_of(written)
    loaded = load_record(path)  # refused were the seal not to hold
    assert loaded[SEAL_STATE] is SealState.sealed
    assert len(loaded["runs"][0]["requests"]) == 10_000
    assert loaded["target"]["model"] == "Qwen-千问/模型-ü-🚀"


def test_a_record_reformatted_but_not_changed_keeps_its_seal(tmp_path: Path) -> None:
    """An editor's "format document" changes the layout, not the record: read the slow way."""
    path = write_record(tmp_path / "a.json", _big(50))
    record = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(dict(reversed(record.items())), indent=4), encoding="utf-8")
    assert load_record(path)[SEAL_STATE] is SealState.sealed


def test_one_float_changed_in_a_dropped_list_breaks_the_seal(tmp_path: Path) -> None:
    """The chunk times are never read by compare, yet an edit of one is still seen."""
    path = write_record(tmp_path / "a.json", _big(50))
    text = path.read_text(encoding="utf-8")
    record = json.loads(text)
    record["runs"][0]["requests"][7]["chunk_times_s"][3] += 1e-12
    path.write_text(json.dumps(record, indent=1), encoding="utf-8")
    with pytest.raises(CompareError, match=re.escape("(its seal does not match its contents)")):
        load_record(path)


def test_an_edited_float_is_refused_naming_the_seal(tmp_path: Path) -> None:
    path = write_record(tmp_path / "a.json", _record([(4, _requests([0.05] * 8))]))
    record = json.loads(path.read_text(encoding="utf-8"))
    record["runs"][0]["requests"][2]["ttft_s"] = 0.05 + 1e-9  # a 1 ns nudge
    path.write_text(json.dumps(record, indent=1), encoding="utf-8")
    with pytest.raises(CompareError) as caught:
        load_record(path)
    said = str(caught.value)
    assert "a.json: changed after felab wrote it (its seal does not match its contents)" in said
    assert "run the bench again" in said and "pass --unsealed" in said
    assert load_record(path, unsealed=True)[SEAL_STATE] is SealState.changed


def test_a_record_without_a_seal_is_refused_naming_unsealed(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps(_record([(4, _requests([0.05] * 8))])), encoding="utf-8")
    with pytest.raises(CompareError, match=r"old.json: has no seal, and felab seals every"):
        load_record(path)
    with pytest.raises(CompareError, match="--unsealed"):
        load_record(path)
    assert load_record(path, unsealed=True)[SEAL_STATE] is SealState.unsealed


def test_a_seal_state_written_in_the_file_is_not_believed(tmp_path: Path) -> None:
    path = tmp_path / "sly.json"
    record = {**_record([(4, _requests([0.05] * 8))]), SEAL_STATE: "sealed"}
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(CompareError, match="has no seal"):
        load_record(path)


def test_an_unsealed_comparison_carries_the_note(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    a.write_text(json.dumps(_record([(4, _requests([0.05] * 8))])), encoding="utf-8")
    b = write_record(tmp_path / "b.json", _record([(4, _requests([0.05] * 8))]))
    result = compare_records(
        load_record(a, unsealed=True), load_record(b, unsealed=True), a_name="a.json"
    )
    assert result.unsealed == ("A",)
    assert any(
        "A (a.json) is unsealed (it has no seal)" in c and "not proven unchanged" in c
        for c in result.caveats
    )
    assert not any("B (" in c for c in result.caveats)


def test_the_text_felab_writes_is_the_record_with_its_seal_last() -> None:
    record = {**_record([(1, _requests([0.05]))]), "seal": "sha256:old", "t": (1, 2)}
    record['k\\é"x'] = {"10": 1, "2": [{"b": 1, "a": 2}]}  # a key read the slow way
    text = sealed_text(record)
    back = json.loads(text)
    assert next(iter(back)) == "schema" and list(back)[-1] == "seal"
    assert back["seal"] == seal_of(back) != "sha256:old"
    del record['k\\é"x']
    again = json.loads(sealed_text(record))
    assert again["seal"] == seal_of(again)
    with pytest.raises(ValueError):
        sealed_text({"x": float("nan")})


def test_keys_that_are_not_strings_are_written_as_json_reads_them_back(tmp_path: Path) -> None:
    """JSON sorts int keys 2 before 10; read back as strings, "10" comes first."""
    record = _record([(4, _requests([0.05] * 8))])
    record["runs"][0]["summary"]["errors"] = {10: 1, 2: 3, True: 1, None: 2, 0.5: 1}
    path = tmp_path / "keys.json"
    path.write_text(sealed_text(_clean(record)), encoding="utf-8")
    loaded = load_record(path)
    assert loaded[SEAL_STATE] is SealState.sealed
    assert set(loaded["runs"][0]["summary"]["errors"]) == {"10", "2", "true", "null", "0.5"}


def _with(requests: list[dict[str, Any]], ok: int, failed: int, **top: Any) -> dict[str, Any]:
    record = _record([(4, requests)])
    record["runs"][0]["summary"].update(ok=ok, failed=failed)
    for key, value in top.items():
        part, _, name = key.partition("__")
        if name:
            record[part][name] = value
        else:
            record[part] = value
    return record


def test_failed_shares_are_said_when_any_request_failed() -> None:
    a = _with(_requests([0.05] * 8), ok=8, failed=0)
    b = _with(_requests([0.05] * 8), ok=8, failed=8)
    said = " | ".join(compare_records(a, b).caveats)
    assert "requests failed: 0 of 8 (0%) in A, 8 of 16 (50%) in B" in said
    assert not any("requests failed" in c for c in compare_records(a, a).caveats)


def test_another_machine_address_temperature_or_warmup_is_said() -> None:
    a = _with(_requests([0.05] * 20), ok=20, failed=0, host="box-a", target__url="http://a:8080",
              workload__temperature=0.0, workload__warmup=2)  # fmt: skip
    b = _with(_requests([0.05] * 20), ok=20, failed=0, host="box-b", target__url="http://b:8080",
              workload__temperature=0.7, workload__warmup=0)  # fmt: skip
    said = " | ".join(compare_records(a, b).caveats)
    assert "host (the machine felab ran on) differs: 'box-a' in A, 'box-b' in B" in said
    assert "target url differs: 'http://a:8080' in A, 'http://b:8080' in B" in said
    assert "workload temperature differs: 0.0 in A, 0.7 in B" in said
    assert "workload warm-up (--warmup) differs: 2 in A, 0 in B" in said
    assert not compare_records(a, a).caveats  # the same settings (20 requests): not a word
