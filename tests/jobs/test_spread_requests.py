"""A spread run's slices' requests held to what a one-machine job's record is held to (the
twenty-second sweep, b, B7): a slice's row of 40 tok/s beside requests of 10,000 tok/s had been
merged and stored as the run's 10,000 tok/s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.lab.scripted_server import ScriptedServer
from tests.jobs.test_spread import _spread, servers  # noqa: F401 (the fixture)


def _faster(report: dict[str, Any]) -> None:
    """Every answered request of the slice made 250 times faster, each consistent in itself
    (gaps, TPOT and speed agree), its row left as measured."""
    for q in report["requests"]:
        gaps = q.get("itl_us") or []
        if not q.get("ok") or not gaps or q.get("tpot_s") is None:
            continue
        q["itl_us"] = [max(1, g // 250) for g in gaps]
        after = q["output_tokens"] - q["first_chunk_tokens"]
        q["tpot_s"] = sum(q["itl_us"]) / 1e6 / after
        q["writing_tps"] = 1 / q["tpot_s"]


def test_a_slice_whose_requests_are_not_its_rows_figures_fails_alone(
    db: Session,
    student: m.Member,
    tmp_path: Path,
    servers: tuple[ScriptedServer, ...],  # noqa: F811
) -> None:
    run, (honest, forged) = _spread(db, student, tmp_path, servers, tamper=_faster)
    assert forged.status == "failed", forged.error
    assert "its own requests give" in (forged.error or "")
    assert honest.status == "done"
    assert run.error is not None and run.error.startswith("partial: slice 2 of 2: ")
    listed = (run.record or {})["runs"][0]["requests"]
    speeds = [q["writing_tps"] for q in listed if q["ok"] and q["writing_tps"] is not None]
    assert speeds and max(speeds) < 1000  # only the honest slice's requests
