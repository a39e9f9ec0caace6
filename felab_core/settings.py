"""Configuration from `FELAB_*` environment variables, one place for every setting.

Long because every setting is here, once, with its bounds and its words (the operator's table).
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal, get_args
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from felab_core.files import expand_home as _home
from felab_core.redact import plain_token
from felab_core.setting_folders import checked_folder
from felab_core.text import holds_hidden, loose_number_problem


def _default_cache_dir() -> Path:
    return Path.home() / ".cache" / "felab"


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


#: The longest any FELAB_*_S setting may be.
_MOST_SECONDS = 30 * 86_400.0
_LEAST_SECONDS = 0.05


_SQLITE_URL = re.compile(r"sqlite(\+\w+)?://(?P<path>[^?]*)(\?(?P<query>.*))?", re.DOTALL)


def _in_memory_sqlite(url: str) -> bool:
    """Whether an SQLite URL names a database that lives only as long as its connection: no
    path or :memory:, and with uri=true a file: URI of :memory: (file::memory:), of no path, or
    with mode=memory. Read as SQLAlchemy and SQLite read it (felab_core.db.session.sqlite_file),
    without importing SQLAlchemy: settings load on machines that have none."""
    match = _SQLITE_URL.fullmatch(url.strip())
    if match is None:
        return False
    database = unquote(match["path"].removeprefix("/"))
    query = parse_qs(match["query"] or "", keep_blank_values=True)
    as_uri = any(v.lower() in ("true", "1", "yes", "on") for v in query.get("uri", []))
    if as_uri and database.startswith("file:"):
        if "memory" in query.get("mode", []):
            return True
        database = database.removeprefix("file:")
        if database.startswith("//"):  # file://localhost/path: the host is dropped
            database = "/" + database[2:].partition("/")[2]
        database = unquote(database.partition("?")[0])
    return database in ("", ":memory:")


class Settings(BaseSettings):
    """Every setting felab reads; the README's settings table mirrors this class."""

    # allow_inf_nan=False: FELAB_JOB_QUEUE_EXPIRE_S=inf or 1e309 is a typo, refused by name.
    model_config = SettingsConfigDict(env_prefix="FELAB_", extra="ignore", allow_inf_nan=False)

    targets_file: Path | None = Field(
        default=None,
        description="TOML file naming the servers to time (shared by `felab bench` and workers).",
    )
    results_dir: Path = Field(
        default=Path("results"), description="Where CSV rows, JSON records and charts are written."
    )
    cache_dir: Path = Field(
        default_factory=_default_cache_dir,
        description="Builds and installs kept between runs (llama-server, MLX, vLLM environments).",
    )
    log_level: str = Field(default="WARNING", description="Python log level for felab's own logs.")
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="text: lines for people; json: one JSON object per line, for log shippers.",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Serve this process's Prometheus metrics on this port (the bot, the ingest, a "
        "worker); unset: none.",
    )
    metrics_addr: str = Field(
        default="127.0.0.1", description="Address the metrics are served on (0.0.0.0 in Compose)."
    )
    data_dir: Path = Field(
        default=Path("data"),
        description="Where the embedded SQLite database lives when FELAB_DATABASE_URL is not set.",
    )
    database_url: str | None = Field(
        default=None,
        description=(
            "SQLAlchemy URL of the database (postgresql+psycopg://... in production); "
            "unset means SQLite at DATA_DIR/felab.db."
        ),
    )
    content_dir: Path = Field(
        default=Path("content"), description="The course's content packs (one YAML file per day)."
    )
    drill_retention: float = Field(
        default=0.9,
        gt=0.5,
        lt=1.0,
        description="Share of cards FSRS aims to have remembered when each comes due.",
    )
    drill_fuzz: bool = Field(
        default=True,
        description="Spread review dates a little so cards learned together return apart.",
    )

    # --- the worker fleet (README "Worker fleet") ---
    broker_url: str | None = Field(
        default=None,
        description=(
            "Celery broker: redis://:PASSWORD@host:6379/0 or rediss://USER:PASSWORD@host:6380/0 "
            "in production; unset means kombu's SQLAlchemy transport on DATA_DIR/broker.db."
        ),
    )
    broker_prefix: str = Field(
        default="felab:",
        description="Prefix of every broker key (one Redis can hold several fleets or test runs).",
    )
    broker_ca_file: Path | None = Field(
        default=None, description="CA certificate that signed the broker's TLS certificate."
    )
    worker_key_file: Path | None = Field(
        default=None,
        description="A worker's identity (its Ed25519 key); unset: DATA_DIR/worker-NAME.json.",
    )
    # The upper bounds are `felab bench`'s own (engine/workloads.py): a job never asks more.
    job_max_concurrency: int = Field(
        default=64, ge=1, le=4096, description="The most users one job may run at once."
    )
    job_max_requests: int = Field(
        default=500, ge=1, le=1_000_000, description="Most requests one job may send."
    )
    job_max_tokens: int = Field(
        default=4096,
        ge=1,
        le=262_144,
        description="The most output tokens one request may ask for.",
    )
    job_max_per_hour: int = Field(
        default=10, ge=1, le=1_000_000, description="Jobs one member may ask an hour."
    )
    job_max_attempts: int = Field(
        default=2, ge=1, le=100, description="Times a job is sent before a lost run fails it."
    )
    job_queue_expire_s: float = Field(
        default=900.0,
        ge=1,
        description="A job no worker starts within this long expires.",
    )
    spread_lead_s: float = Field(
        default=20.0,
        ge=2,
        le=600,
        description="From queueing a spread job to the start its slices share: time for "
        "every machine to take its slice and warm up.",
    )
    job_resend_after_s: float = Field(
        default=20.0,
        ge=1,
        le=86_400,
        description="An idle online worker that has not started a job this "
        "long after it was sent lost the message: it is sent again.",
    )
    job_time_limit_s: float = Field(
        default=1800.0, gt=0, description="Hard limit on one job's run (soft limit 30 s before)."
    )
    worker_heartbeat_s: float = Field(default=5.0, gt=0, description="Heartbeat interval.")
    worker_offline_after_s: float = Field(
        default=20.0,
        gt=0,
        description="A worker silent this long is offline; its running job "
        "is sent again or failed.",
    )
    reconcile_every_s: float = Field(
        default=5.0, gt=0, description="How often the ingest runs the reconciler."
    )
    pair_code_ttl_s: float = Field(
        default=600.0, ge=10, description="How long a pairing code lives (10 s or more)."
    )

    # --- the Discord bot (README "Discord bot") ---
    discord_token: SecretStr | None = Field(
        default=None, description="The bot's token from Discord's developer portal."
    )
    discord_api_url: str | None = Field(
        default=None,
        description=(
            "Discord's REST API base (default https://discord.com/api/v10); the gateway URL is "
            "then asked of its /gateway/bot. For tests against a fake Discord only."
        ),
    )
    discord_post_every_s: float = Field(
        default=30.0, gt=0, description="How often the bot looks for daily posts that are due."
    )

    # --- worker fleet: time limits (README "Worker fleet") ---
    job_soft_margin_s: float = Field(
        default=30.0,
        ge=0,
        description="The soft time limit comes this long before the hard one (the job reports "
        "its own failure); 0: no soft limit, the hard limit ends the job.",
    )

    # --- worker fleet: trust (README "Security") ---
    broker_public_url: str | None = Field(
        default=None,
        description="The broker as students' machines reach it (rediss://host:6380/0, no user); "
        "unset: FELAB_BROKER_URL's scheme, host and port. `felab broker setup` prints the "
        "pairing URL from it.",
    )
    result_max_bytes: int = Field(
        default=1_000_000,
        ge=10_000,
        le=64_000_000,
        description="Largest result a worker may send (bytes of JSON); 500 requests take ~0.2 MB.",
    )
    broker_max_memory_bytes: int = Field(
        default=1024**3,
        ge=64 * 1024**2,
        le=1024**4,
        description="The memory cap `felab broker setup` and the ingest give a Redis that has "
        "none (maxmemory 0), refusing writes when full (noeviction); a cap already set is kept.",
    )
    job_max_resends: int = Field(
        default=5,
        ge=0,
        le=1000,
        description="Times the reconciler sends a queued job again to an idle machine that never "
        "took it, before the job fails.",
    )
    outbox_max_attempts: int = Field(
        default=5,
        ge=1,
        le=1000,
        description="Times the bot tries to post a finished job before it is set aside as a dead "
        "letter (`felab worker outbox`).",
    )

    # --- the Discord bot: results (README "Discord bot") ---
    discord_outbox_every_s: float = Field(
        default=5.0, gt=0, description="How often the bot looks for finished benchmarks to post."
    )

    # --- the Discord bot: voice messages (README "Discord bot") ---
    discord_message_content: bool = Field(
        default=False,
        description="Ask Discord for the privileged message-content intent, so the bot reads "
        "voice messages as spoken answers; turn it on in the developer portal first.",
    )

    @model_validator(mode="after")
    def _times_agree(self) -> Settings:
        """Pairs of times that only work one way round: a soft margin given as long as the
        hard limit would leave no soft limit at all (the default margin quietly steps aside
        for a short limit); a heartbeat slower than the offline mark makes every worker look
        offline between beats (its jobs re-sent or failed)."""
        margin_given = "job_soft_margin_s" in self.model_fields_set  # the default 30 s yields
        if margin_given and 0 < self.job_time_limit_s <= self.job_soft_margin_s:
            raise ValueError(
                f"FELAB_JOB_SOFT_MARGIN_S={self.job_soft_margin_s:g} is not shorter than "
                f"FELAB_JOB_TIME_LIMIT_S={self.job_time_limit_s:g}: no soft limit would be "
                "left; make the margin shorter than the limit, or 0 for none"
            )
        if self.worker_heartbeat_s >= self.worker_offline_after_s:
            raise ValueError(
                f"FELAB_WORKER_HEARTBEAT_S={self.worker_heartbeat_s:g} is not shorter than "
                f"FELAB_WORKER_OFFLINE_AFTER_S={self.worker_offline_after_s:g}: every worker "
                "would look offline between two beats; beat more often than the offline mark"
            )
        return self

    @field_validator("*", mode="before")
    @classmethod
    def _plain_number(cls, value: object, info: ValidationInfo) -> object:
        """A number setting is written in digits 0-9 ('_' only between groups of three):
        FELAB_JOB_MAX_CONCURRENCY=1_0 was read as 10, and ２ as 2."""
        field = cls.model_fields.get(info.field_name or "")
        kinds = set(get_args(field.annotation)) | {field.annotation} if field else set()
        kind = int if int in kinds else float if float in kinds else None
        if kind is not None and isinstance(value, str):
            problem = loose_number_problem(value, kind)
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _seconds(cls, value: object, info: ValidationInfo) -> object:
        """Every *_S setting at most 30 days: 1e300 s is a typo (it crashed as 'a number too
        large on the command line'); and, when not 0, at least 0.05 s: a heartbeat or a loop
        every 1e-300 s is a busy loop, not a setting."""
        name = info.field_name or ""
        if name.endswith("_s") and isinstance(value, float) and value > _MOST_SECONDS:
            raise ValueError(f"at most {_MOST_SECONDS:,.0f} s (30 days)")
        if name.endswith("_s") and isinstance(value, float) and 0 < value < _LEAST_SECONDS:
            raise ValueError(f"at least {_LEAST_SECONDS:g} s (or 0 where 0 means none)")
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        if value.upper() not in _LOG_LEVELS:
            raise ValueError(f"use one of {', '.join(_LOG_LEVELS)}")
        return value

    @field_validator("results_dir", "cache_dir", "data_dir", "content_dir", mode="before")
    @classmethod
    def _folder(cls, value: object) -> object:
        return checked_folder(value)

    @field_validator(
        "database_url",
        "broker_url",
        "broker_public_url",
        "targets_file",
        "worker_key_file",
        "broker_ca_file",
        mode="before",
    )
    @classmethod
    def _not_blank(cls, value: object) -> object:
        """Set but empty is a mistake (an unfilled .env line), not a wish for the default."""
        if isinstance(value, str) and not value.strip():
            raise ValueError("is set but empty: give a value")  # "or unset it": said after
        return value

    @field_validator("targets_file", "worker_key_file", "broker_ca_file", mode="before")
    @classmethod
    def _file_not_folder_mark(cls, value: object) -> object:
        """`x.toml/` would be read as x.toml: a folder's mark on a file's name is a mistake."""
        if isinstance(value, str) and value.endswith(("/", os.sep)) and not Path(value).is_dir():
            raise ValueError(
                "ends in '/', a folder's mark, but there is no such folder: name the file "
                "without the '/'"
            )
        return _home(value)

    @field_validator("database_url")
    @classmethod
    def _kept(cls, value: str | None) -> str | None:
        """An in-memory SQLite database forgets everything when the command ends: a number
        'recorded' there is lost, so it is refused rather than believed."""
        if value and _in_memory_sqlite(value):
            raise ValueError(
                "is an in-memory SQLite database, which keeps nothing once the command ends: "
                "give a file (sqlite:////path/felab.db) or unset it for the embedded one"
            )
        return value

    @field_validator("metrics_addr")
    @classmethod
    def _address(cls, value: str) -> str:
        """The address to listen on: an IP address this machine could have (a host name is
        not bound; 999.0.0.1 is no address)."""
        try:
            ipaddress.ip_address(value.strip())
        except ValueError:
            raise ValueError(
                "is not an IP address: give 127.0.0.1 (this machine only) or 0.0.0.0 (all)"
            ) from None
        return value.strip()

    @field_validator("discord_token", mode="before")
    @classmethod
    def _token(cls, value: object) -> object:
        return plain_token(value)

    @field_validator("discord_api_url")
    @classmethod
    def _web_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://[^/\s]+", value.strip()):
            raise ValueError(
                "is not an http(s) URL: give Discord's API base, such as "
                "https://discord.com/api/v10, or unset it"
            )
        return value

    @field_validator("broker_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,40}", value) or ".." in value:
            raise ValueError("use 1-40 letters, digits, '-', '_', '.' or ':', such as felab:")
        return value

    @field_validator("broker_public_url")
    @classmethod
    def _public_broker(cls, value: str | None) -> str | None:
        """The address each machine gets with its own user: a user or password here would be
        dropped without a word (and a password does not belong in a shared setting)."""
        if value and "@" in value.partition("://")[2]:
            raise ValueError(
                "holds a user or password (before @): give only the address students reach, "
                "such as rediss://broker.lab.org:6380/0; each machine gets its own user"
            )
        if value and value.startswith(("redis://", "rediss://")):
            try:
                parts = urlsplit(value.strip())
            except ValueError:
                return value  # said by _broker below
            if parts.hostname in ("0.0.0.0", "::"):
                raise ValueError(
                    f"names {parts.hostname}, an address a server listens on, not one students "
                    "reach: give the broker's name or IP address, such as "
                    "rediss://broker.lab.org:6380/0"
                )
            if parts.path.strip("/") not in ("", "0"):
                raise ValueError(
                    "names a database other than 0: machines use /0 (their users may not "
                    "choose another), so give rediss://HOST:PORT/0"
                )
        return value

    @field_validator("broker_url", "broker_public_url")
    @classmethod
    def _broker(cls, value: str | None, info: ValidationInfo) -> str | None:
        # The public address holds no user (each machine gets its own): its examples show none.
        example = (
            "rediss://HOST:6380/0"
            if info.field_name == "broker_public_url"
            else "rediss://USER:PASSWORD@HOST:6380/0"
        )
        if value and not value.startswith(("redis://", "rediss://", "sqla+sqlite:///")):
            raise ValueError(f"use redis://HOST:6379/0 or {example}")
        if value and value.startswith(("redis://", "rediss://")):
            if value != value.strip() or holds_hidden(value):  # ESC had been blamed on IPv6
                raise ValueError(
                    "holds spaces at an end, or control or invisible characters (a pasted "
                    f"line?): write it again plainly, such as {example}"
                )
            try:
                parts = urlsplit(value)
            except ValueError:  # urllib's "Invalid IPv6 URL": an unclosed [
                raise ValueError(
                    "is not a broker address (an IPv6 address needs its closing ]): use "
                    f"{example.replace('HOST', '[::1]')}"
                ) from None
            if "@" in value.partition("://")[2] and "@" not in parts.netloc:
                raise ValueError(
                    "the part before @ holds a /, ? or # (in the password?), which ends a URL's "
                    "address: write them percent-encoded (/ as %2F, ? as %3F, # as %23)"
                )
            host = parts.hostname or ""
            if not host:  # redis-py fills in localhost:6379: a Redis nobody named
                raise ValueError(f"names no host: give the broker's address, such as {example}")
            if not all(c.isalnum() or c in ".-:_" for c in host):  # a space, %0a, %1b
                raise ValueError(
                    f"has the host {host[:60]!r}, which is not a name or address a machine can "
                    "reach: give its name or IP address"
                )
            try:
                port = parts.port
            except ValueError:
                port = 0
            if port == 0:
                raise ValueError("has a port outside 1-65535") from None
            if parts.query or parts.fragment or value.endswith(("?", "#")):
                raise ValueError(
                    "holds options after ? or # (such as ?ssl_cert_reqs=none): felab sets the "
                    "connection's options itself (TLS from rediss:// and FELAB_BROKER_CA_FILE, "
                    "its timeouts): remove them; a password goes before the host, "
                    "redis://:PASSWORD@HOST:6379/0"
                )
            if not re.fullmatch(r"/?(\d{1,5})?", parts.path):
                raise ValueError(
                    "ends in a database that is not a whole number from 0 up: use /0 (or /1 ...)"
                )
        return value

    def resolved_database_url(self) -> str:
        """The URL to connect to: FELAB_DATABASE_URL, or the embedded SQLite file."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'felab.db').resolve()}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


#: FELAB_ names read outside Settings: the debug switch, and the test suite's own.
_OTHER_NAMES = ("FELAB_DEBUG", "FELAB_UPDATE_GOLDEN")
_OTHER_PREFIXES = ("FELAB_TEST_",)


def unknown_setting_names(environ: Mapping[str, str]) -> list[str]:
    """A line for each FELAB_ variable felab does not read, naming the setting it is closest
    to: FELAB_DATABSE_URL would otherwise be ignored and felab would use SQLite, silently."""
    known = {f"FELAB_{name.upper()}" for name in Settings.model_fields} | set(_OTHER_NAMES)
    lines = []
    for name in sorted(environ):
        if not name.startswith("FELAB_") or name in known or name.startswith(_OTHER_PREFIXES):
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
        hint = f"did you mean {close[0]}?" if close else "see the README's settings table"
        lines.append(f"{name} is not a felab setting and is ignored: {hint}")
    return lines
