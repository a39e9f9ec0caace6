"""People, course content, drills and daily posts.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "cohorts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("guild_id", sa.String(length=32), nullable=True),
        sa.Column("channel_id", sa.String(length=32), nullable=True),
        sa.Column("post_time", sa.Time(), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("start_date", sa.Date(), nullable=False),
        sa.Column("advance", sa.String(length=16), nullable=False),
        sa.Column("manual_day", sa.Integer(), nullable=False),
        sa.Column("join_mode", sa.String(length=16), nullable=False),
        sa.Column("join_code", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "advance IN ('daily', 'weekdays', 'manual')", name=op.f("ck_cohorts_advance")
        ),
        sa.CheckConstraint(
            "join_mode IN ('open', 'code', 'invite')", name=op.f("ck_cohorts_join_mode")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cohorts")),
        sa.UniqueConstraint("guild_id", "channel_id", name=op.f("uq_cohorts_guild_id_channel_id")),
    )
    op.create_table(
        "content_packs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("source_path", sa.String(length=500), nullable=False),
        sa.Column("checksum", sa.String(length=64), nullable=False),
        sa.Column("loaded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retired", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_content_packs")),
        sa.UniqueConstraint("key", name=op.f("uq_content_packs_key")),
    )
    op.create_table(
        "content_days",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("pack_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("minutes", sa.Integer(), nullable=True),
        sa.Column("done_when", sa.JSON(), nullable=False),
        sa.Column("retired", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.ForeignKeyConstraint(
            ["pack_id"],
            ["content_packs.id"],
            name=op.f("fk_content_days_pack_id_content_packs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_content_days")),
        sa.UniqueConstraint("number", name=op.f("uq_content_days_number")),
    )
    op.create_table(
        "members",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cohort_id", sa.Integer(), nullable=False),
        sa.Column("discord_id", sa.String(length=32), nullable=False),
        sa.Column("display_name", sa.String(length=100), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("chip", sa.String(length=64), nullable=True),
        sa.Column("bandwidth_gb_s", sa.Float(), nullable=True),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("streak_current", sa.Integer(), server_default="0", nullable=False),
        sa.Column("streak_best", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_review_day", sa.Date(), nullable=True),
        sa.Column("reviews_total", sa.Integer(), server_default="0", nullable=False),
        sa.Column("recall_tries", sa.Integer(), server_default="0", nullable=False),
        sa.Column("recalled", sa.Integer(), server_default="0", nullable=False),
        sa.CheckConstraint("role IN ('student', 'instructor')", name=op.f("ck_members_role")),
        sa.ForeignKeyConstraint(
            ["cohort_id"],
            ["cohorts.id"],
            name=op.f("fk_members_cohort_id_cohorts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_members")),
        sa.UniqueConstraint(
            "cohort_id", "discord_id", name=op.f("uq_members_cohort_id_discord_id")
        ),
    )
    op.create_index(
        "ix_members_cohort_reviews", "members", ["cohort_id", "reviews_total"], unique=False
    )
    op.create_index(
        "ix_members_cohort_streak", "members", ["cohort_id", "streak_current"], unique=False
    )
    op.create_table(
        "posts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cohort_id", sa.Integer(), nullable=False),
        sa.Column("day_number", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("local_date", sa.Date(), nullable=False),
        sa.Column("message_id", sa.String(length=32), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["cohort_id"],
            ["cohorts.id"],
            name=op.f("fk_posts_cohort_id_cohorts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_posts")),
        sa.UniqueConstraint(
            "cohort_id", "day_number", "kind", name=op.f("uq_posts_cohort_id_day_number_kind")
        ),
    )
    op.create_table(
        "content_steps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("day_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("retired", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.ForeignKeyConstraint(
            ["day_id"],
            ["content_days.id"],
            name=op.f("fk_content_steps_day_id_content_days"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_content_steps")),
        sa.UniqueConstraint("key", name=op.f("uq_content_steps_key")),
    )
    op.create_table(
        "member_servers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("member_id", sa.Integer(), nullable=False),
        sa.Column("server", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=300), nullable=False),
        sa.Column("model_bytes", sa.BigInteger(), nullable=True),
        sa.Column("model_label", sa.String(length=100), nullable=True),
        sa.ForeignKeyConstraint(
            ["member_id"],
            ["members.id"],
            name=op.f("fk_member_servers_member_id_members"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_member_servers")),
        sa.UniqueConstraint("member_id", "server", name=op.f("uq_member_servers_member_id_server")),
    )
    op.create_table(
        "cards",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("day_id", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.Integer(), nullable=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("retired", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.ForeignKeyConstraint(
            ["day_id"],
            ["content_days.id"],
            name=op.f("fk_cards_day_id_content_days"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["step_id"],
            ["content_steps.id"],
            name=op.f("fk_cards_step_id_content_steps"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cards")),
        sa.UniqueConstraint("key", name=op.f("uq_cards_key")),
    )
    op.create_index("ix_cards_day_position", "cards", ["day_id", "position"], unique=False)
    op.create_table(
        "number_fields",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("day_id", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.Integer(), nullable=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("server", sa.String(length=32), nullable=False),
        sa.Column("metric", sa.String(length=32), nullable=False),
        sa.Column("unit", sa.String(length=32), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("retired", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.ForeignKeyConstraint(
            ["day_id"],
            ["content_days.id"],
            name=op.f("fk_number_fields_day_id_content_days"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["step_id"],
            ["content_steps.id"],
            name=op.f("fk_number_fields_step_id_content_steps"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_number_fields")),
        sa.UniqueConstraint("key", name=op.f("uq_number_fields_key")),
    )
    op.create_table(
        "speak_prompts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("day_id", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.Integer(), nullable=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("seconds", sa.Integer(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("retired", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.ForeignKeyConstraint(
            ["day_id"],
            ["content_days.id"],
            name=op.f("fk_speak_prompts_day_id_content_days"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["step_id"],
            ["content_steps.id"],
            name=op.f("fk_speak_prompts_step_id_content_steps"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_speak_prompts")),
        sa.UniqueConstraint("key", name=op.f("uq_speak_prompts_key")),
    )
    op.create_table(
        "whiteboards",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("day_id", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.Integer(), nullable=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("retired", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.ForeignKeyConstraint(
            ["day_id"],
            ["content_days.id"],
            name=op.f("fk_whiteboards_day_id_content_days"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["step_id"],
            ["content_steps.id"],
            name=op.f("fk_whiteboards_step_id_content_steps"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_whiteboards")),
        sa.UniqueConstraint("key", name=op.f("uq_whiteboards_key")),
    )
    op.create_table(
        "card_states",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("member_id", sa.Integer(), nullable=False),
        sa.Column("card_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("stability", sa.Float(), nullable=True),
        sa.Column("difficulty", sa.Float(), nullable=True),
        sa.Column("due", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_review", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reps", sa.Integer(), nullable=False),
        sa.Column("lapses", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["card_id"], ["cards.id"], name=op.f("fk_card_states_card_id_cards"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["member_id"],
            ["members.id"],
            name=op.f("fk_card_states_member_id_members"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_card_states")),
        sa.UniqueConstraint("member_id", "card_id", name=op.f("uq_card_states_member_id_card_id")),
    )
    op.create_index("ix_card_states_card", "card_states", ["card_id"], unique=False)
    op.create_index("ix_card_states_member_due", "card_states", ["member_id", "due"], unique=False)
    op.create_table(
        "reviews",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("member_id", sa.Integer(), nullable=False),
        sa.Column("card_id", sa.Integer(), nullable=False),
        sa.Column("rating", sa.Integer(), nullable=False),
        sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("local_day", sa.Date(), nullable=False),
        sa.Column("state_before", sa.Integer(), nullable=False),
        sa.Column("due_after", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=True),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.CheckConstraint("rating BETWEEN 1 AND 4", name=op.f("ck_reviews_rating")),
        sa.ForeignKeyConstraint(
            ["card_id"], ["cards.id"], name=op.f("fk_reviews_card_id_cards"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["member_id"],
            ["members.id"],
            name=op.f("fk_reviews_member_id_members"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reviews")),
    )
    op.create_index("ix_reviews_card", "reviews", ["card_id"], unique=False)
    op.create_index("ix_reviews_member_day", "reviews", ["member_id", "local_day"], unique=False)
    op.create_table(
        "spoken_answers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("member_id", sa.Integer(), nullable=False),
        sa.Column("prompt_id", sa.Integer(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("self_rating", sa.Integer(), nullable=False),
        sa.Column("recording_ref", sa.String(length=500), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "self_rating BETWEEN 1 AND 5", name=op.f("ck_spoken_answers_self_rating")
        ),
        sa.ForeignKeyConstraint(
            ["member_id"],
            ["members.id"],
            name=op.f("fk_spoken_answers_member_id_members"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["prompt_id"],
            ["speak_prompts.id"],
            name=op.f("fk_spoken_answers_prompt_id_speak_prompts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_spoken_answers")),
    )
    op.create_index("ix_spoken_answers_member", "spoken_answers", ["member_id"], unique=False)
    op.create_table(
        "peer_ratings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("answer_id", sa.Integer(), nullable=False),
        sa.Column("rater_id", sa.Integer(), nullable=False),
        sa.Column("rating", sa.Integer(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("rating BETWEEN 1 AND 5", name=op.f("ck_peer_ratings_rating")),
        sa.ForeignKeyConstraint(
            ["answer_id"],
            ["spoken_answers.id"],
            name=op.f("fk_peer_ratings_answer_id_spoken_answers"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["rater_id"],
            ["members.id"],
            name=op.f("fk_peer_ratings_rater_id_members"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_peer_ratings")),
        sa.UniqueConstraint(
            "answer_id", "rater_id", name=op.f("uq_peer_ratings_answer_id_rater_id")
        ),
    )
    op.create_index("ix_peer_ratings_rater", "peer_ratings", ["rater_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_peer_ratings_rater", table_name="peer_ratings")
    op.drop_table("peer_ratings")
    op.drop_index("ix_spoken_answers_member", table_name="spoken_answers")
    op.drop_table("spoken_answers")
    op.drop_index("ix_reviews_member_day", table_name="reviews")
    op.drop_index("ix_reviews_card", table_name="reviews")
    op.drop_table("reviews")
    op.drop_index("ix_card_states_member_due", table_name="card_states")
    op.drop_index("ix_card_states_card", table_name="card_states")
    op.drop_table("card_states")
    op.drop_table("whiteboards")
    op.drop_table("speak_prompts")
    op.drop_table("number_fields")
    op.drop_index("ix_cards_day_position", table_name="cards")
    op.drop_table("cards")
    op.drop_table("member_servers")
    op.drop_table("content_steps")
    op.drop_table("posts")
    op.drop_index("ix_members_cohort_streak", table_name="members")
    op.drop_index("ix_members_cohort_reviews", table_name="members")
    op.drop_table("members")
    op.drop_table("content_days")
    op.drop_table("content_packs")
    op.drop_table("cohorts")
