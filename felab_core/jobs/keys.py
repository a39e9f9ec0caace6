"""Worker identities: an Ed25519 key pair per machine, and signed messages.

The private key stays on the student's machine (its identity file); the server keeps only the
public half, so nothing secret is stored server-side and a copied database forges nothing.
Messages carry nothing secret: the signature only proves which worker wrote them. The identity
file also holds the machine's own broker password, so it is written readable by its owner only.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from felab_core.errors import Forbidden, Invalid
from felab_core.files import NamedFileError, read_named_text, refuse_special
from felab_core.text import holds_hidden

#: A worker's name: what `/worker pair` gives it and what its files are called after.
WORKER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_worker_name(name: str) -> str:
    """`name`, or Invalid saying what a worker's name may be (never a path: it names files)."""
    if len(name) > 64:
        raise Invalid(f"a worker's name is at most 64 characters (this one is {len(name):,})")
    if not WORKER_NAME.fullmatch(name):  # match() with $ took "lap9\n"
        raise Invalid(
            f"{name!r} cannot name a worker: start with a letter or digit, then letters, "
            "digits, '-', '_' or '.', such as studio-mbp"
        )
    return name


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def canonical(payload: dict[str, Any]) -> bytes:
    """The bytes a signature covers: the message without its `sig`, keys sorted."""
    body = {k: v for k, v in payload.items() if k != "sig"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def new_private_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def public_key_text(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return _b64(raw)


def sign(payload: dict[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    """The payload with `sig` added."""
    return {**payload, "sig": _b64(key.sign(canonical(payload)))}


def verify(payload: dict[str, Any], public_key: str) -> None:
    """Raise Forbidden unless `payload["sig"]` was made by the private half of `public_key`."""
    sig = payload.get("sig")
    if not isinstance(sig, str):
        raise Forbidden(
            "the message is not signed: it did not come from a paired worker", reason="signature"
        )
    try:
        pub = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key))
        pub.verify(base64.b64decode(sig), canonical(payload))
    except (InvalidSignature, ValueError):
        raise Forbidden(
            "the message's signature does not match the worker it names: it was refused",
            reason="signature",
        ) from None


def load_public_key(text: str) -> str:
    """Check that `text` is a base64 Ed25519 public key; return it unchanged."""
    try:
        Ed25519PublicKey.from_public_bytes(base64.b64decode(text, validate=True))
    except ValueError:
        raise Invalid("that is not an Ed25519 public key (32 bytes, base64)") from None
    return text


@dataclass(frozen=True)
class Identity:
    """What `felab worker pair --code` leaves on the machine: who it is, its private key, and
    its own broker URL (its own Redis user and password; None on the embedded broker)."""

    worker_id: int
    name: str
    private_key: Ed25519PrivateKey
    broker_url: str | None = None

    @property
    def public_key(self) -> str:
        return public_key_text(self.private_key)

    def sign(self, payload: dict[str, Any]) -> dict[str, Any]:
        return sign(payload, self.private_key)

    def save(self, path: Path) -> None:
        """Write the identity readable by its owner only (it holds the private key)."""
        from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat

        raw = self.private_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        data: dict[str, Any] = {
            "worker_id": self.worker_id,
            "name": self.name,
            "private_key": _b64(raw),
        }
        if self.broker_url is not None:
            data["broker_url"] = self.broker_url
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> Identity:
        """The identity at `path`, each field checked: a hand edit (a worker_id of -1, true or
        "1", a broker_url of null or http://) would otherwise reach Celery and fail there in its
        own words (a traceback, a login retried forever, a quiet run on the embedded broker)."""
        try:
            info = refuse_special(path, what="worker identity")
            if info is None:
                raise FileNotFoundError(path)
            text = read_named_text(path, what="worker identity", limit=64 * 1024)
            data = json.loads(text)
        except FileNotFoundError:
            raise Invalid(
                f"no worker identity at {path}: pair this machine first with "
                "`felab worker pair --code CODE` (the bot's /worker pair gives the code)"
            ) from None
        except NamedFileError as exc:  # a folder, a pipe (reading one waits forever), too big
            raise Invalid(str(exc)) from None
        except (ValueError, RecursionError):  # not JSON, or nested thousands deep
            raise Invalid(f"{path} is not a felab worker identity: {PAIR_AGAIN}") from None
        problem = field_problem(data)
        if problem is not None:
            raise Invalid(f"{path} is not a felab worker identity: {problem}: {PAIR_AGAIN}")
        if os.name == "posix" and info.st_mode & 0o077:
            # Like ssh with a private key: anyone else on the machine could read this key and
            # the broker password, and pose as the machine.
            raise Invalid(
                f"{path} can be read or changed by other users of this machine (mode "
                f"{info.st_mode & 0o777:o}), and it holds this machine's private key and broker "
                f"password: run `chmod 600 {path}`, then start again"
            )
        key = Ed25519PrivateKey.from_private_bytes(base64.b64decode(data["private_key"]))
        return cls(data["worker_id"], data["name"], key, data.get("broker_url"))


PAIR_AGAIN = "pair again with `felab worker pair --code CODE` (the bot's /worker pair gives one)"


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
    except Invalid as exc:
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
    if holds_hidden(url):  # a pasted escape code: its '[' had been blamed on the port
        return "broker_url holds control or invisible characters, which pairing never writes"
    try:
        parts = urlsplit(url)
        user, password, host = parts.username, parts.password, parts.hostname
        if parts.port == 0:  # one that is not a number raises here, not in Celery
            raise ValueError("port 0")
    except ValueError as exc:
        if "IPv6" in str(exc):
            return "broker_url holds a '[' that no ']' closes, which pairing never writes"
        return "broker_url's port is not a number from 1 to 65535"
    if not user or not password or not host:
        return "broker_url lacks this machine's user, password or host (redis://USER:PASS@HOST)"
    if parts.query or parts.fragment or url.endswith(("?", "#")):  # kombu would read them
        return "broker_url holds options after ? or #, which pairing never writes"
    if parts.path not in ("", "/", "/0"):  # a machine's user may not SELECT another database
        return "broker_url names a database other than 0, which pairing never writes"
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


#: Said with every refusal before a pairing request is sent.
_UNSPENT = "the pairing code was not used"


def check_identity_destination(path: Path | None, folder: Path) -> None:
    """Before a pairing code is spent: the identity can be written (in `path`'s folder, else
    `folder`), and `path`, when a file is there, is an earlier felab identity. The code had
    been redeemed first and the key then lost to a folder that could not be written, and a
    file of notes named by FELAB_WORKER_KEY_FILE replaced by the identity (sweep 20, b)."""
    where = path.parent if path is not None else folder
    if path is not None:
        try:
            there = refuse_special(path, what="worker identity", to_write=True)
        except NamedFileError as exc:
            raise Invalid(f"{exc} (FELAB_WORKER_KEY_FILE): {_UNSPENT}") from None
        problem = None if there is None else _identity_problem(path)
        if problem is not None:
            raise Invalid(
                f"{path} (FELAB_WORKER_KEY_FILE) is not a felab worker identity ({problem}), "
                "and pairing would replace it: set FELAB_WORKER_KEY_FILE to a new file, or "
                f"move this one away; {_UNSPENT}"
            )
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".felab-probe-", dir=where)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise Invalid(
            f"cannot write this machine's identity in {where} ({exc.strerror or exc}): make the "
            "folder writable, or set FELAB_DATA_DIR (or FELAB_WORKER_KEY_FILE) to one you can "
            f"write; {_UNSPENT}"
        ) from None


def _identity_problem(path: Path) -> str | None:
    try:
        data = json.loads(read_named_text(path, what="worker identity", limit=64 * 1024))
    except NamedFileError as exc:
        return str(exc)
    except (ValueError, RecursionError):
        return "it is not JSON"
    return field_problem(data)
