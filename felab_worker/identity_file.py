"""A machine's identity file, read field by field before anything uses it.

`felab worker pair` writes it; a hand edit (a worker_id of -1, true or "1", a broker_url of
null or http://) would otherwise reach Celery and fail there in its own words: a traceback, a
login retried forever, or a quiet run on the embedded broker that never gets a job. Light on
purpose (no Celery, no Redis): `felab worker identity` reads it too.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from felab_core.errors import Invalid, ServiceError
from felab_core.files import NamedFileError, read_named_text
from felab_core.jobs.keys import Identity, check_worker_name

#: What Identity.load reads at most; the file is a few hundred bytes.
_LIMIT = 64 * 1024

PAIR_AGAIN = "pair again with `felab worker pair --code CODE` (the bot's /worker pair gives one)"


def load_identity(path: Path) -> Identity:
    """The identity at `path`, or Invalid naming the field that is wrong and why."""
    try:
        identity = Identity.load(path)  # the file itself: there, regular, small, JSON
    except RecursionError:  # JSON nested thousands deep: not an identity, and no crash
        raise Invalid(f"{path} is not a felab worker identity: {PAIR_AGAIN}") from None
    except ServiceError:
        problem = _problem_in(path)
        if problem is None:
            raise
        raise Invalid(_damaged(path, problem)) from None
    problem = _problem_in(path)
    if problem is not None:
        raise Invalid(_damaged(path, problem))
    return identity


def _damaged(path: Path, problem: str) -> str:
    return f"{path} is not a felab worker identity: {problem}: {PAIR_AGAIN}"


def _problem_in(path: Path) -> str | None:
    """What is wrong with the file's fields; None when they are right, or when it cannot be
    read as JSON at all (Identity.load has said why)."""
    try:
        data = json.loads(read_named_text(path, what="worker identity", limit=_LIMIT))
    except (NamedFileError, OSError, ValueError, RecursionError):
        return None
    return field_problem(data)


def field_problem(data: Any) -> str | None:
    """The first field of a parsed identity that pairing would not have written, in words."""
    if not isinstance(data, dict):
        return "it holds no JSON object"
    for key in ("worker_id", "name", "private_key"):
        if key not in data:
            return f"{key} is missing"
    worker_id = data["worker_id"]
    # bool is an int to Python: `true` would be worker 1
    if not isinstance(worker_id, int) or isinstance(worker_id, bool):
        return f"worker_id is {_shown(worker_id)}, not a whole number"
    if worker_id < 1:
        return f"worker_id is {worker_id}: a worker's id is 1 or more"
    name = data["name"]
    if not isinstance(name, str):
        return f"name is {_shown(name)}, not text"
    try:
        check_worker_name(name)
    except ServiceError as exc:
        return f"name: {exc}"
    if not isinstance(data["private_key"], str) or not _is_key(data["private_key"]):
        return "private_key is not an Ed25519 private key (32 bytes, base64)"
    if "broker_url" in data:  # absent on the embedded broker, where no broker user exists
        return _url_problem(data["broker_url"], worker_id)
    return None


def _url_problem(url: Any, worker_id: int) -> str | None:
    """Never repeats the URL: a damaged one may hide its password where masking misses it."""
    if not isinstance(url, str):
        return f"broker_url is {_shown(url)}, not this machine's redis:// URL"
    if not url.startswith(("redis://", "rediss://")):
        scheme = url.partition(":")[0][:20] if ":" in url else ""
        what = f"a {scheme!r} URL" if scheme else "not a URL"
        return f"broker_url is {what}, not a redis:// or rediss:// one"
    try:
        parts = urlsplit(url)
        user, password, host = parts.username, parts.password, parts.hostname
        if parts.port == 0:  # one that is not a number raises here, not in Celery
            raise ValueError("port 0")
    except ValueError:
        return "broker_url's port is not a number from 1 to 65535"
    if not user or not password or not host:
        return "broker_url lacks this machine's user, password or host (redis://USER:PASS@HOST)"
    if not user.endswith(f"-machine.{worker_id}"):
        return f"worker_id {worker_id} is not the machine whose broker user is {user!r}"
    return None


def _is_key(text: str) -> bool:
    try:
        return len(base64.b64decode(text, validate=True)) == 32
    except (binascii.Error, ValueError):
        return False


def _shown(value: Any) -> str:
    """A JSON value as the file holds it, cut short."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
