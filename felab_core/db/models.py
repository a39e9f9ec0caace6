"""The database tables, as typed SQLAlchemy 2 models.

Every change here needs an Alembic migration in `alembic/versions/` (tests/db checks that the
models and the migrations agree). Discord ids are strings: they are 64-bit snowflakes that
JavaScript and JSON tools would round if they were numbers.

Content rows (packs, days, steps, cards, prompts, drill items, number fields) carry the stable
`key` written in the content file, so editing a card updates its row in place and its review
history stays attached. Items removed from a file are retired, never deleted.

Long because it is every table in one place, which is what a migration is checked against
(tests/db compares them); each class is short.
"""

from __future__ import annotations

from datetime import date, datetime, time
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    Time,
    UniqueConstraint,
    false,
    text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from felab_core.db.types import UTCDateTime, utcnow

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

Json = dict[str, Any]


class Base(DeclarativeBase):
    """Declarative base with constraint names fixed, so migrations can name what they drop."""

    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        Json: JSON(),
        list[Any]: JSON(),
    }


# ----------------------------------------------------------------------------- people


class Cohort(Base):
    """One class of students on one Discord channel, with its own calendar."""

    __tablename__ = "cohorts"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    guild_id: Mapped[str | None] = mapped_column(String(32))
    channel_id: Mapped[str | None] = mapped_column(String(32))
    post_time: Mapped[time] = mapped_column(Time())
    timezone: Mapped[str] = mapped_column(String(64))
    start_date: Mapped[date] = mapped_column(Date())
    # daily: one course day per calendar day; weekdays: Saturday and Sunday do not count;
    # manual: an instructor advances `manual_day`.
    advance: Mapped[str] = mapped_column(String(16))
    manual_day: Mapped[int] = mapped_column(Integer, default=1)
    # open: anyone on the guild joins; code: needs join_code; invite: instructors add members.
    join_mode: Mapped[str] = mapped_column(String(16))
    join_code: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # a summary of the week in the channel each Monday (README "Discord bot")
    weekly_summary: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # the daily post in the channel (on by default; instructors may pause it)
    daily_post: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # a Discord role the daily post mentions (pinged); None: the post pings no one
    post_role_id: Mapped[str | None] = mapped_column(String(32))

    members: Mapped[list[Member]] = relationship(
        back_populates="cohort", cascade="all, delete-orphan", passive_deletes=True
    )

    __table_args__ = (
        UniqueConstraint("guild_id", "channel_id"),
        CheckConstraint("advance IN ('daily', 'weekdays', 'manual')", name="advance"),
        CheckConstraint("join_mode IN ('open', 'code', 'invite')", name="join_mode"),
    )


class Member(Base):
    """A person in a cohort: a student or an instructor, with their clock and their machine.

    The stat columns (streak, reviews, recalled) are kept up to date by each review in the same
    transaction, so leaderboards over thousands of members read one row each;
    `drills.review.recompute_stats` rebuilds them from the review log.
    """

    __tablename__ = "members"

    id: Mapped[int] = mapped_column(primary_key=True)
    cohort_id: Mapped[int] = mapped_column(ForeignKey("cohorts.id", ondelete="CASCADE"))
    discord_id: Mapped[str] = mapped_column(String(32))
    display_name: Mapped[str] = mapped_column(String(100), default="")
    role: Mapped[str] = mapped_column(String(16), default="student")
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    chip: Mapped[str | None] = mapped_column(String(64))
    bandwidth_gb_s: Mapped[float | None] = mapped_column(Float)
    public_numbers: Mapped[bool] = mapped_column(Boolean, server_default=true(), default=True)
    joined_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Review stats, maintained by every rating (see the class docstring).
    streak_current: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    streak_best: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_review_day: Mapped[date | None] = mapped_column(Date())
    reviews_total: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    recall_tries: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    recalled: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    cohort: Mapped[Cohort] = relationship(back_populates="members")
    servers: Mapped[list[MemberServer]] = relationship(
        back_populates="member", cascade="all, delete-orphan", passive_deletes=True
    )

    __table_args__ = (
        UniqueConstraint("cohort_id", "discord_id"),
        CheckConstraint("role IN ('student', 'instructor')", name="role"),
        Index("ix_members_cohort_streak", "cohort_id", "streak_current"),
        Index("ix_members_cohort_reviews", "cohort_id", "reviews_total"),
    )


class MemberServer(Base):
    """Which model file a member's server runs: the speed limit depends on its size."""

    __tablename__ = "member_servers"

    id: Mapped[int] = mapped_column(primary_key=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("members.id", ondelete="CASCADE"))
    server: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(300))
    model_bytes: Mapped[int | None] = mapped_column(BigInteger)
    # The same model under each server's own name ("llama3.1:8b", "Llama-3.1-8B-Instruct-4bit"):
    # runs whose servers share a label count as the same model.
    model_label: Mapped[str | None] = mapped_column(String(100))

    member: Mapped[Member] = relationship(back_populates="servers")

    __table_args__ = (UniqueConstraint("member_id", "server"),)


# ----------------------------------------------------------------------------- content


class ContentPack(Base):
    """One content file as last loaded (its key is written in the file)."""

    __tablename__ = "content_packs"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(100), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    source_path: Mapped[str] = mapped_column(String(500))
    checksum: Mapped[str] = mapped_column(String(64))
    loaded_at: Mapped[datetime] = mapped_column(default=utcnow)
    retired: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class ContentDay(Base):
    """A course day: its number, its wrap-up text and the "done when" check."""

    __tablename__ = "content_days"

    id: Mapped[int] = mapped_column(primary_key=True)
    pack_id: Mapped[int] = mapped_column(ForeignKey("content_packs.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer, unique=True)
    title: Mapped[str] = mapped_column(String(200))
    summary: Mapped[str] = mapped_column(Text, default="")
    minutes: Mapped[int | None] = mapped_column(Integer)
    done_when: Mapped[Json] = mapped_column(default=dict)
    retired: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class ContentStep(Base):
    """A step of a day (the page a question comes from)."""

    __tablename__ = "content_steps"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(100), unique=True)
    day_id: Mapped[int] = mapped_column(ForeignKey("content_days.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(String(200))
    retired: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class _AskedItem:
    """Columns every question-and-answer item of a pack has: cards, prompts, drill items.

    `key` is the stable id written in the content file, so an edit keeps its history.
    """

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(100), unique=True)
    day_id: Mapped[int] = mapped_column(ForeignKey("content_days.id", ondelete="CASCADE"))
    step_id: Mapped[int | None] = mapped_column(ForeignKey("content_steps.id", ondelete="SET NULL"))
    position: Mapped[int] = mapped_column(Integer)
    question: Mapped[str] = mapped_column(Text)
    answer: Mapped[str] = mapped_column(Text)


class Card(_AskedItem, Base):
    """A drill card. `body` holds everything shown after the question (see content/README.md)."""

    __tablename__ = "cards"

    body: Mapped[Json] = mapped_column(default=dict)
    retired: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    day: Mapped[ContentDay] = relationship()

    __table_args__ = (Index("ix_cards_day_position", "day_id", "position"),)


class SpeakPrompt(_AskedItem, Base):
    """A say-it-aloud prompt: a question a customer might ask, and one clear answer."""

    __tablename__ = "speak_prompts"

    seconds: Mapped[int] = mapped_column(Integer, default=20)
    body: Mapped[Json] = mapped_column(default=dict)
    retired: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class DrillItem(_AskedItem, Base):
    """An item of a drill kind (felab_core/drills/kinds/: the whiteboard is one), shown on the
    daily post with its reveal. `body` holds the kind's own fields."""

    __tablename__ = "drill_items"

    kind: Mapped[str] = mapped_column(String(32))
    body: Mapped[Json] = mapped_column(default=dict)
    retired: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    __table_args__ = (Index("ix_drill_items_day_kind", "day_id", "kind", "position"),)


class NumberField(Base):
    """A "your numbers" field a day asks for, with the course's sample figure as a hint."""

    __tablename__ = "number_fields"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(100), unique=True)
    day_id: Mapped[int] = mapped_column(ForeignKey("content_days.id", ondelete="CASCADE"))
    step_id: Mapped[int | None] = mapped_column(ForeignKey("content_steps.id", ondelete="SET NULL"))
    position: Mapped[int] = mapped_column(Integer)
    server: Mapped[str] = mapped_column(String(32))
    metric: Mapped[str] = mapped_column(String(32))
    unit: Mapped[str] = mapped_column(String(32))
    label: Mapped[str] = mapped_column(String(200))
    body: Mapped[Json] = mapped_column(default=dict)
    retired: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


# ----------------------------------------------------------------------------- drills


class CardState(Base):
    """Where one member stands with one card: the FSRS card, flattened into columns."""

    __tablename__ = "card_states"

    id: Mapped[int] = mapped_column(primary_key=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("members.id", ondelete="CASCADE"))
    card_id: Mapped[int] = mapped_column(ForeignKey("cards.id", ondelete="CASCADE"))
    state: Mapped[int] = mapped_column(Integer)
    step: Mapped[int | None] = mapped_column(Integer)
    stability: Mapped[float | None] = mapped_column(Float)
    difficulty: Mapped[float | None] = mapped_column(Float)
    due: Mapped[datetime] = mapped_column()
    last_review: Mapped[datetime | None] = mapped_column()
    reps: Mapped[int] = mapped_column(Integer, default=0)
    lapses: Mapped[int] = mapped_column(Integer, default=0)

    card: Mapped[Card] = relationship()

    __table_args__ = (
        UniqueConstraint("member_id", "card_id"),
        Index("ix_card_states_member_due", "member_id", "due"),
        Index("ix_card_states_card", "card_id"),
    )


class Review(Base):
    """Every rating ever given, never rewritten: the source of streaks and retention."""

    __tablename__ = "reviews"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("members.id", ondelete="CASCADE"))
    card_id: Mapped[int] = mapped_column(ForeignKey("cards.id", ondelete="CASCADE"))
    rating: Mapped[int] = mapped_column(Integer)
    reviewed_at: Mapped[datetime] = mapped_column()
    # The member's own calendar day when they rated: streaks count these.
    local_day: Mapped[date] = mapped_column(Date())
    # FSRS state before the rating; 0 = a card seen for the first time (nothing to recall yet).
    state_before: Mapped[int] = mapped_column(Integer)
    due_after: Mapped[datetime] = mapped_column()
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(16), default="cli")

    __table_args__ = (
        CheckConstraint("rating BETWEEN 1 AND 4", name="rating"),
        Index("ix_reviews_member_day", "member_id", "local_day"),
        Index("ix_reviews_card", "card_id"),
    )


class SpokenAnswer(Base):
    """One say-it-aloud attempt: how long it took and how the speaker rated it."""

    __tablename__ = "spoken_answers"

    id: Mapped[int] = mapped_column(primary_key=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("members.id", ondelete="CASCADE"))
    prompt_id: Mapped[int] = mapped_column(ForeignKey("speak_prompts.id", ondelete="CASCADE"))
    # None: not measured (timing "untimed"); never the prompt's limit standing in for it.
    duration_s: Mapped[float | None] = mapped_column(Float)
    # How the length was measured: voice, self-timed, prompt-to-click or untimed.
    timing: Mapped[str] = mapped_column(
        String(16), default="self-timed", server_default="self-timed"
    )
    self_rating: Mapped[int | None] = mapped_column(Integer)  # None: a voice answer not rated yet
    recording_ref: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    ratings: Mapped[list[PeerRating]] = relationship(
        back_populates="answer", cascade="all, delete-orphan", passive_deletes=True
    )

    __table_args__ = (
        CheckConstraint("self_rating BETWEEN 1 AND 5", name="self_rating"),
        CheckConstraint(
            "timing IN ('voice', 'self-timed', 'prompt-to-click', 'untimed')", name="timing"
        ),
        Index("ix_spoken_answers_member", "member_id"),
    )


class PeerRating(Base):
    """Another member's rating of a spoken answer (one per rater; rating again replaces it)."""

    __tablename__ = "peer_ratings"

    id: Mapped[int] = mapped_column(primary_key=True)
    answer_id: Mapped[int] = mapped_column(ForeignKey("spoken_answers.id", ondelete="CASCADE"))
    rater_id: Mapped[int] = mapped_column(ForeignKey("members.id", ondelete="CASCADE"))
    rating: Mapped[int] = mapped_column(Integer)
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    answer: Mapped[SpokenAnswer] = relationship(back_populates="ratings")

    __table_args__ = (
        UniqueConstraint("answer_id", "rater_id"),
        CheckConstraint("rating BETWEEN 1 AND 5", name="rating"),
        Index("ix_peer_ratings_rater", "rater_id"),
    )


# ----------------------------------------------------------------------------- measuring


class Worker(Base):
    """A student's machine that runs benchmark jobs, known by the public half of its key.

    The private half never leaves the machine, so the server stores nothing secret about it.
    """

    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(primary_key=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("members.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    public_key: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="paired")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[datetime | None] = mapped_column()
    # The owner's choice: may the cohort's instructors run jobs on this machine?
    allow_instructors: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # What the machine reported of its targets file (name -> kind, never a URL) when it paired
    # and with every heartbeat; None until it reports (then any target name is accepted).
    targets: Mapped[Json | None] = mapped_column()
    # The highest heartbeat sequence number accepted: a replayed heartbeat carries an old one.
    heartbeat_seq: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # The job the machine said (in its last heartbeat) it is running; None when idle.
    running_job_id: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (UniqueConstraint("member_id", "name"),)


class BrokerUser(Base):
    """A broker credential felab issued: the fleet's pairing user, or one machine's own (the
    broker's transport names the Redis user after the role and the worker id).

    A machine's password is kept only as its SHA-256 (Redis accepts `#<hash>`), so every user
    can be recreated after a Redis restart without the server holding a secret. The pairing
    password is kept as it is: every student is given it, and it can only push pairing requests.
    """

    __tablename__ = "broker_users"

    id: Mapped[int] = mapped_column(primary_key=True)
    role: Mapped[str] = mapped_column(String(16))  # "pairing" or "machine"
    worker_id: Mapped[int | None] = mapped_column(
        ForeignKey("workers.id", ondelete="CASCADE"), unique=True
    )
    secret_hash: Mapped[str] = mapped_column(String(64))
    shared_secret: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (
        CheckConstraint("role IN ('pairing', 'machine')", name="role"),
        Index(
            "uq_broker_users_pairing",
            "role",
            unique=True,
            postgresql_where=text("role = 'pairing'"),
            sqlite_where=text("role = 'pairing'"),
        ),
    )


JOB_STATUSES = ("queued", "running", "ready", "done", "failed", "cancelled", "expired")


class BenchJob(Base):
    """A benchmark a member asked for; the row, not the broker, is the truth about it.

    `member_id` is whose machine (and numbers) it is; `requested_by_id` who asked (the owner, or
    an instructor the owner allowed). `attempt` names the current delivery: a message that
    carries another attempt is late and is dropped.
    """

    __tablename__ = "bench_jobs"

    id: Mapped[int] = mapped_column(primary_key=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("members.id", ondelete="CASCADE"))
    worker_id: Mapped[int | None] = mapped_column(ForeignKey("workers.id", ondelete="SET NULL"))
    server: Mapped[str] = mapped_column(String(32))
    preset: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="queued")
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column()
    finished_at: Mapped[datetime | None] = mapped_column()
    requested_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("members.id", ondelete="SET NULL")
    )
    target: Mapped[str | None] = mapped_column(String(64))
    params: Mapped[Json] = mapped_column(default=dict, server_default="{}")
    attempt: Mapped[str | None] = mapped_column(String(32))
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    sent_at: Mapped[datetime | None] = mapped_column()
    expires_at: Mapped[datetime | None] = mapped_column()
    progress_done: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    progress_total: Mapped[int | None] = mapped_column(Integer)
    summary: Mapped[str | None] = mapped_column(Text)
    record: Mapped[Json | None] = mapped_column()
    chart_png: Mapped[bytes | None] = mapped_column(LargeBinary)
    # Sends the reconciler made because the machine never took the job (capped).
    resends: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # A run spread over several machines (jobs/spread.py): each slice is a job of its own that
    # names its parent; the parent, on no machine, holds the count and the shared start.
    spread_of: Mapped[int | None] = mapped_column(ForeignKey("bench_jobs.id", ondelete="CASCADE"))
    shard_index: Mapped[int | None] = mapped_column(Integer)
    shards: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    start_at: Mapped[datetime | None] = mapped_column()

    __table_args__ = (
        CheckConstraint(
            "status IN ('queued', 'running', 'ready', 'done', 'failed', 'cancelled', 'expired')",
            name="status",
        ),
        Index("ix_bench_jobs_member", "member_id"),
        Index("ix_bench_jobs_status", "status"),
        Index("ix_bench_jobs_spread_of", "spread_of"),
    )


class PairCode(Base):
    """A one-time code that pairs a machine; only its hash is kept, so a leak of the table
    pairs nothing."""

    __tablename__ = "pair_codes"

    id: Mapped[int] = mapped_column(primary_key=True)
    code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # What a pairing request names the code by (derived from its hash; the code itself never
    # travels on the broker).
    lookup: Mapped[str | None] = mapped_column(String(64), unique=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("members.id", ondelete="CASCADE"))
    worker_name: Mapped[str] = mapped_column(String(100))
    allow_instructors: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column()
    used_at: Mapped[datetime | None] = mapped_column()


class JobOutbox(Base):
    """A finished job waiting to be posted: the bot claims it, posts, and marks it posted once."""

    __tablename__ = "job_outbox"

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(
        ForeignKey("bench_jobs.id", ondelete="CASCADE"), unique=True
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    claimed_at: Mapped[datetime | None] = mapped_column()
    posted_at: Mapped[datetime | None] = mapped_column()
    message_ref: Mapped[str | None] = mapped_column(String(64))
    # A post Discord refused is tried again later, a few times, then set aside (dead) for an
    # instructor to see and retry.
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_error: Mapped[str | None] = mapped_column(Text)
    next_try_at: Mapped[datetime | None] = mapped_column()
    dead_at: Mapped[datetime | None] = mapped_column()

    __table_args__ = (Index("ix_job_outbox_posted", "posted_at"),)


class BenchResult(Base):
    """One run of a job: the headline figures as columns, the whole CSV row as JSON."""

    __tablename__ = "bench_results"

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("bench_jobs.id", ondelete="CASCADE"))
    server: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(300))
    preset: Mapped[str] = mapped_column(String(64))
    concurrency: Mapped[int] = mapped_column(Integer)
    writing_tps_p50: Mapped[float | None] = mapped_column(Float)
    ttft_p50_s: Mapped[float | None] = mapped_column(Float)
    row: Mapped[Json] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (Index("ix_bench_results_job", "job_id"),)


class Number(Base):
    """A figure a member entered or felab measured: server, metric, value and where it came from."""

    __tablename__ = "numbers"

    id: Mapped[int] = mapped_column(primary_key=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("members.id", ondelete="CASCADE"))
    server: Mapped[str] = mapped_column(String(32))
    metric: Mapped[str] = mapped_column(String(32))
    value: Mapped[float] = mapped_column(Float)  # in `unit` (tokens/s): what is compared
    unit: Mapped[str] = mapped_column(String(32))
    # A typed-in figure as typed: the number (digits kept) and its unit (tok/s or ms/token),
    # shown back so; None for measured figures and those typed before this was kept.
    typed_value: Mapped[str | None] = mapped_column(String(40))
    typed_unit: Mapped[str | None] = mapped_column(String(16))
    source: Mapped[str] = mapped_column(String(16))
    model: Mapped[str | None] = mapped_column(String(300))
    preset: Mapped[str | None] = mapped_column(String(64))
    job_id: Mapped[int | None] = mapped_column(ForeignKey("bench_jobs.id", ondelete="SET NULL"))
    field_key: Mapped[str | None] = mapped_column(String(100))
    recorded_at: Mapped[datetime] = mapped_column(default=utcnow)
    # A measured figure is ranked only once checked: "ok" (within the machine's speed limit and
    # its own request records), "unverified" (the chip or the model's size is unknown),
    # "flagged" (impossible: off the boards until an instructor approves it), "approved".
    verdict: Mapped[str] = mapped_column(String(16), default="ok", server_default="ok")
    verdict_note: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint("source IN ('entered', 'measured')", name="source"),
        CheckConstraint("verdict IN ('ok', 'unverified', 'flagged', 'approved')", name="verdict"),
        CheckConstraint("value > 0", name="positive"),
        Index("ix_numbers_member", "member_id", "server", "metric"),
        Index("ix_numbers_board", "server", "metric", "source"),
    )


# ----------------------------------------------------------------------------- posts


class ChatPost(Base):
    """A message the bot posted about a member (their spoken answer, a result), so that
    deleting the member deletes it too. On deletion the row loses its member and waits, marked,
    until the bot has removed the message."""

    __tablename__ = "chat_posts"

    id: Mapped[int] = mapped_column(primary_key=True)
    member_id: Mapped[int | None] = mapped_column(ForeignKey("members.id", ondelete="SET NULL"))
    channel_id: Mapped[str] = mapped_column(String(32))
    message_id: Mapped[str] = mapped_column(String(32))
    about: Mapped[str] = mapped_column(String(32))  # what the post shows: "spoken answer", ...
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    delete_requested_at: Mapped[datetime | None] = mapped_column()

    __table_args__ = (
        UniqueConstraint("channel_id", "message_id"),
        Index("ix_chat_posts_member", "member_id"),
        Index("ix_chat_posts_delete", "delete_requested_at"),
    )


class Post(Base):
    """A daily post claimed for a cohort and day, so it is made once even with two bots."""

    __tablename__ = "posts"

    id: Mapped[int] = mapped_column(primary_key=True)
    cohort_id: Mapped[int] = mapped_column(ForeignKey("cohorts.id", ondelete="CASCADE"))
    day_number: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16), default="daily")
    local_date: Mapped[date] = mapped_column(Date())
    message_id: Mapped[str | None] = mapped_column(String(32))
    claimed_at: Mapped[datetime] = mapped_column(default=utcnow)
    posted_at: Mapped[datetime | None] = mapped_column()

    __table_args__ = (UniqueConstraint("cohort_id", "day_number", "kind"),)
