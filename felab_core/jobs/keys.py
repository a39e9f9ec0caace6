"""Worker identities: an Ed25519 key pair per machine, and signed messages.

The private key stays on the student's machine (its identity file); the server keeps only the
public half, so nothing secret is stored server-side and a copied database forges nothing.
Messages carry nothing secret: the signature only proves which worker wrote them. The identity
file also holds the machine's own broker password, so it is written readable by its owner only.
"""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from felab_core.errors import Forbidden, Invalid
from felab_core.files import NamedFileError, read_named_text, refuse_special

#: A worker's name: what `/worker pair` gives it and what its files are called after.
WORKER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_worker_name(name: str) -> str:
    """`name`, or Invalid saying what a worker's name may be (never a path: it names files)."""
    if len(name) > 64:
        raise Invalid(f"a worker's name is at most 64 characters (this one is {len(name):,})")
    if not WORKER_NAME.match(name):
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
        try:
            if refuse_special(path, what="worker identity") is None:
                raise FileNotFoundError(path)
            text = read_named_text(path, what="worker identity", limit=64 * 1024)
            data = json.loads(text)
            key = Ed25519PrivateKey.from_private_bytes(base64.b64decode(data["private_key"]))
            url = data.get("broker_url")
            return cls(
                int(data["worker_id"]), str(data["name"]), key, None if url is None else str(url)
            )
        except FileNotFoundError:
            raise Invalid(
                f"no worker identity at {path}: pair this machine first with "
                "`felab worker pair --code CODE` (the bot's /worker pair gives the code)"
            ) from None
        except NamedFileError as exc:  # a folder, a pipe (reading one waits forever), too big
            raise Invalid(str(exc)) from None
        except (KeyError, ValueError, TypeError):
            raise Invalid(
                f"{path} is not a felab worker identity: pair again with `felab worker pair "
                "--code CODE`"
            ) from None
