"""How long ago the oldest message in the ingest's inbox was signed is read from what a machine
pushed, before any signature is checked: a time no felab machine could have signed is not
believed (sweep 26: `at` -1e309 showed "inf h ago" and put Infinity in `status --json`; 1970 was
"499,041 h ago"; a 200,000-deep push made `felab status` blame the broker's port, exit 3)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from felab_worker.dispatch import OLDEST_BELIEVED_S, signed_at_of

NOW = 1_800_000_000.0


def _message(at: Any) -> str:
    body = base64.b64encode(json.dumps([[{"at": at}], {}, {}]).encode()).decode()
    return json.dumps({"body": body})


def test_a_felab_time_is_read() -> None:
    assert signed_at_of(_message(NOW - 40), now=NOW) == NOW - 40
    assert signed_at_of(_message(int(NOW) - 40).encode(), now=NOW) == NOW - 40


@pytest.mark.parametrize(
    "at",
    [float("-inf"), float("inf"), float("nan"), -1e308, 0, -1, True, "123", None, [NOW],
     NOW - OLDEST_BELIEVED_S - 1, NOW + 3600],
    ids=["-inf", "inf", "nan", "-1e308", "1970", "negative", "true", "text", "null", "list",
         "older-than-believed", "an-hour-ahead"],
)  # fmt: skip
def test_a_time_no_machine_could_have_signed_is_not_believed(at: Any) -> None:
    assert signed_at_of(_message(at), now=NOW) is None


@pytest.mark.parametrize(
    "raw",
    ["[" * 200_000 + "]" * 200_000, "not json", json.dumps({"body": "%%%"}), json.dumps([1]),
     json.dumps({"body": base64.b64encode(b"[" * 5000 + b"]" * 5000).decode()}), 12, None],
    ids=["deep", "not-json", "not-base64", "not-an-envelope", "deep-body", "a-number", "none"],
)  # fmt: skip
def test_junk_says_no_time(raw: Any) -> None:
    assert signed_at_of(raw, now=NOW) is None
