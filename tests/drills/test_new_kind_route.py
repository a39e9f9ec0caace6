"""The contributor page's route for a new drill kind, walked as a newcomer would: one module in
felab_core/drills/kinds/ and a pack that uses it, nothing else. On a copy of the code, a kind
the course does not have ("estimate": guess before you compute) is added as one file; the
pack format then takes its section, loading stores its items (no migration), and the daily
post and its reveal show them as the module says.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KIND_MODULE = '''
"""Estimate first: a number to guess on the post, the worked figure on the reveal."""

from felab_core.content.fields import ItemId, Strict, Text
from felab_core.drills.kinds import DrillKind, Item


class EstimateSpec(Strict):
    id: ItemId
    step: ItemId | None = None
    question: Text
    unit: Text
    answer: Text


KIND = DrillKind(
    name="estimate",
    section="estimates",
    spec=EstimateSpec,
    front=lambda item: [item.question, f"Answer in {item.body['unit']}."],
    back=lambda item: [f"**About** {item.answer}"],
    instruction="Write your guess down",
)
'''

PACK = """
format: felab.content/1
id: course.day-09
day: 9
title: Estimates
estimates:
  - id: d09.estimate.kv
    question: How much cache does one 8k conversation of Llama 3.1 8B take?
    unit: GiB
    answer: 1 GiB (128 KiB a token)
"""

SCRIPT = """
from pathlib import Path
from sqlalchemy import select
from felab_core.content.format import SECTIONS
from felab_core.content.store import load_folder
from felab_core.db import models as m
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade
from felab_core.drills.review import day_drill_items
from felab_bot.drills import board_post_text, board_reveal_text

assert "estimates" in SECTIONS, SECTIONS
engine = make_engine("sqlite:///" + str(Path("x.db").resolve()))
upgrade(engine)
with session_scope(session_factory(engine)) as s:
    report = load_folder(s, Path("packs"))
    print(report.lines())
    day = s.scalars(select(m.ContentDay).where(m.ContentDay.number == 9)).one()
    (item,) = day_drill_items(s, day)
    print(item.kind)
    print(board_post_text(item, 9, 1, 1))
    print(board_reveal_text(s, item.id))
"""


def test_a_new_drill_kind_is_one_module_and_a_pack(tmp_path: Path) -> None:
    for package in ("felab_core", "felab_bot"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copytree(
        ROOT / "alembic", tmp_path / "alembic", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "alembic.ini", tmp_path / "alembic.ini")
    # the route: one file in the kinds package ...
    (tmp_path / "felab_core" / "drills" / "kinds" / "estimate.py").write_text(KIND_MODULE)
    # ... and a pack that uses it
    (tmp_path / "packs").mkdir()
    (tmp_path / "packs" / "day-09.yaml").write_text(textwrap.dedent(PACK))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "estimate added: 1" in out
    assert "**Day 9 · estimate 1 of 1**" in out
    assert "How much cache does one 8k conversation" in out and "Answer in GiB." in out
    assert "*Write your guess down, then press" in out
    assert "**About** 1 GiB (128 KiB a token)" in out
