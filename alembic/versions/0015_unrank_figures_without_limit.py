"""Figures ranked with no speed limit behind them are judged again: 'ok' becomes 'unverified'.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06

Before 35dfc02 a typed-in writing speed was stored 'ok' whenever it was not above the limit,
also when no limit could be computed (the member's chip or the server's model size unknown),
and 0007 gave every figure stored before it 'ok' unjudged: such rows were still ranked on the
leaderboards (sweep 22 b B2). Today felab stores them 'unverified' with what is missing
(felab_core.numbers.recording.limit_verdict on speed_limit_for's words), lists them apart, and
judges them again once the chip or size is set (verdict.rejudge_waiting, which looks for notes
beginning "felab does not know "). This moves the old rows there, with speed_limit_for's words.

Self-contained SQL, not a call of speed_limit_for: a migration runs on the schema of its own
revision, and felab's ORM models are those of the newest one (a column added later would be
selected from a table that lacks it while an old database is upgraded through here). The SQL
is speed_limit_for's first two tests (no chip and no bandwidth; no model size for that server),
and tests/db/test_unrank_without_limit.py holds it to speed_limit_for on the same rows.

The model a measured figure reported is not compared (speed_limit_for's third test): a measured
'ok' figure since 0007 was judged against its own model's size, and the member recording another
model for that server later must not unrank it (felab keeps a verdict when the limit changes,
sweep 22 b B5). Downgrade keeps the new verdicts: every revision since 0007 reads 'unverified'.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: speed_limit_for's words for a machine felab does not know (as of this revision).
NO_MACHINE = (
    "felab does not know your machine yet: set your chip (such as M4 Pro) or its memory "
    "bandwidth to see the speed limit"
)
#: ... and for a server whose model size it does not know, around the server's name.
NO_SIZE = ("felab does not know the size of the model file ", " runs: record it (such as 4.9GB) "
           "to see the speed limit")  # fmt: skip

_RANKED_SPEED = "verdict = 'ok' AND metric = 'writing_tps' AND source IN ('entered', 'measured')"


def upgrade() -> None:
    # bandwidth_bytes_per_s: a chip, else a bandwidth; '' and 0 are none.
    no_machine = (
        "SELECT id FROM members WHERE (chip IS NULL OR chip = '') AND "
        "(bandwidth_gb_s IS NULL OR bandwidth_gb_s = 0)"
    )
    op.execute(
        sa.text(
            "UPDATE numbers SET verdict = 'unverified', verdict_note = :note "
            f"WHERE {_RANKED_SPEED} AND member_id IN ({no_machine})"
        ).bindparams(note=NO_MACHINE)
    )
    # The rest: a machine known, no model size recorded for that server.
    sized = (
        "SELECT 1 FROM member_servers s WHERE s.member_id = numbers.member_id AND "
        "s.server = numbers.server AND s.model_bytes IS NOT NULL AND s.model_bytes <> 0"
    )
    op.execute(
        sa.text(
            "UPDATE numbers SET verdict = 'unverified', verdict_note = "
            "CAST(:before AS VARCHAR) || server || CAST(:after AS VARCHAR) "
            f"WHERE {_RANKED_SPEED} AND NOT EXISTS ({sized})"
        ).bindparams(before=NO_SIZE[0], after=NO_SIZE[1])
    )


def downgrade() -> None:
    pass  # 'unverified' is a verdict every revision since 0007 holds; nothing to undo
