"""The pairing handshake: what an unpaired machine sends to redeem a code, and the sealed answer.

The code never travels on the broker. Both sides derive what they need from it:
- its secret: SHA-256 of the code, the one thing the database keeps of it;
- a lookup id naming the request (a hash of the secret, so seeing it on the broker reveals
  neither); the answer waits under a hash of the lookup and the request's public key;
- a proof, an HMAC of the request keyed by the secret: a request someone copied cannot be
  redeemed with another public key, because changing the key breaks the proof;
- the answer's key: only the code's holder can open the answer, which carries the machine's own
  broker password.
The request is also signed with the new key pair, which proves the sender holds its private half.
No database here: the machine runs this side too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from felab_core.errors import Forbidden, Invalid
from felab_core.jobs.keys import canonical, public_key_text, sign, verify
from felab_core.text import echo_of

_LOOKUP = b"felab pairing lookup:"
_ANSWER = b"felab pairing answer"
#: An answer bigger than this is not felab's: refused before decrypting.
MAX_ANSWER = 16_384


#: What `issue_pair_code` hands out: three groups of six hex digits.
_CODE_SHAPE = re.compile(r"[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}")


def _canonical(code: str) -> str:
    """The code as the bot shows it: upper case, dashes between its three parts (a code typed
    in lower case or without the dashes is the same code)."""
    bare = re.sub(r"[\s-]", "", code).upper()
    if len(bare) == 18:
        return f"{bare[:6]}-{bare[6:12]}-{bare[12:]}"
    return code.strip().upper()


def check_code_shape(code: str) -> None:
    """Refuse, before anything travels, what cannot be a pairing code (a typo, a blank)."""
    if not _CODE_SHAPE.fullmatch(_canonical(code)):
        raise Invalid(
            f"{echo_of(code)} is not a pairing code: it looks like 3F9A1C-77B2E0-0D4E21; copy "
            "it from the bot's /worker pair answer"
        )


def code_secret(code: str) -> str:
    """The code's secret (what the database keeps): SHA-256 of the code as the bot shows it."""
    return hashlib.sha256(_canonical(code).encode()).hexdigest()


def lookup_of(secret: str) -> str:
    """The id a request and its answer go by on the broker."""
    return hashlib.sha256(_LOOKUP + secret.encode()).hexdigest()


def answer_id(request: dict[str, Any]) -> str:
    """Where the answer to one request waits: per request (lookup and key), so an answer to
    someone else's forged request under the same lookup never stands in for the real one."""
    text = f"{request.get('lookup')}:{request.get('public_key')}"
    return hashlib.sha256(text.encode()).hexdigest()


def _proof(secret: str, body: dict[str, Any]) -> str:
    return hmac.new(secret.encode(), canonical(body), hashlib.sha256).hexdigest()


def make_request(
    code: str,
    key: Ed25519PrivateKey,
    targets: dict[str, str] | None,
    until: float | None = None,
) -> dict[str, Any]:
    """The pairing request a machine pushes: lookup, public key, target names, the time (the
    broker's clock, seconds) after which its sender no longer waits for the answer, proof and
    signature (both cover `until`, so it cannot be moved)."""
    secret = code_secret(code)
    body: dict[str, Any] = {"lookup": lookup_of(secret), "public_key": public_key_text(key)}
    if targets is not None:
        body["targets"] = targets
    if until is not None:
        body["until"] = round(until, 3)
    return sign({**body, "proof": _proof(secret, body)}, key)


def check_request(payload: dict[str, Any], secret: str) -> None:
    """Raise Forbidden unless the request was made by a holder of the code behind `secret`, and
    signed by the private half of the key it carries."""
    body = {k: v for k, v in payload.items() if k not in ("proof", "sig")}
    proof = payload.get("proof")
    if not isinstance(proof, str) or not hmac.compare_digest(proof, _proof(secret, body)):
        raise Forbidden("the pairing request does not match its code: it was refused")
    verify(payload, str(payload.get("public_key")))


def _answer_key(secret: str) -> bytes:
    return hmac.new(secret.encode(), _ANSWER, hashlib.sha256).digest()


def seal(secret: str, answer: dict[str, Any]) -> str:
    """The answer encrypted (AES-256-GCM) so that only the code's holder can read it."""
    nonce = os.urandom(12)
    data = json.dumps(answer, sort_keys=True).encode()
    sealed = AESGCM(_answer_key(secret)).encrypt(nonce, data, lookup_of(secret).encode())
    return base64.b64encode(nonce + sealed).decode("ascii")


def open_sealed(code: str, text: str) -> dict[str, Any]:
    """The answer to this machine's request; Invalid when it was not sealed for this code."""
    secret = code_secret(code)
    try:
        if len(text) > MAX_ANSWER:
            raise ValueError("too long")
        raw = base64.b64decode(text, validate=True)
        plain = AESGCM(_answer_key(secret)).decrypt(raw[:12], raw[12:], lookup_of(secret).encode())
        answer = json.loads(plain)
    except (ValueError, InvalidTag):
        raise Invalid("the pairing answer could not be opened with this code: pair again") from None
    if not isinstance(answer, dict):
        raise Invalid("the pairing answer is not felab's: pair again")
    return answer
