"""What a dishonest cohort member can push to the ingest's inboxes (eighteenth sweep, b): any
paired machine may LPUSH to the ingest's inbox, anyone holding the pairing URL to the pairing
inbox, and the message is theirs to write in full. The ingest takes felab's own task messages
only; anything else is dropped (acknowledged) with one warning line and counted as malformed,
and the ingest goes on. Real redis-server, the real `felab worker ingest`."""

from __future__ import annotations

import base64
import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from felab_core.settings import Settings
from felab_worker.gate import refusal
from felab_worker.ingest import create_app
from felab_worker.transport import envelope_refusal
from tests.e2e.fleet import FELAB, PREFIX, RedisServer, base_env, free_port, wait_for
from tests.worker.processes import kill_group, start_felab, wait_in

TASKS = create_app(Settings(broker_url="redis://127.0.0.1:1/0"))[0].tasks
EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
#: A callback naming a queue the ingest consumes: had it been sent, the ingest would take it.
LINK = {
    "task": "marker.from_the_sender", "args": [], "kwargs": {}, "immutable": True,
    "options": {"queue": "ingest.inbox"}, "subtask_type": None,
}  # fmt: skip
#: What the ingest does with an event it can make nothing of (the sign that it goes on).
NOT_AN_EVENT = "refused an event from worker None: not a felab worker event"


def envelope(
    body: Any = None,
    *,
    headers: dict[str, Any] | None = None,
    properties: dict[str, Any] | None = None,
    content_type: str = "application/json",
) -> dict[str, Any]:
    """A task message as kombu's Redis transport lays it out, as a hand-made push would."""
    if body is None:
        body = [[{"x": 1}], {}, EMBED]
    raw = json.dumps(body).encode()
    return {
        "body": base64.b64encode(raw).decode(),
        "content-encoding": "utf-8",
        "content-type": content_type,
        "headers": {
            "lang": "py",
            "task": "felab.ingest",
            "id": str(uuid.uuid4()),
            "shadow": None,
            "eta": None,
            "expires": None,
            "group": None,
            "group_index": None,
            "retries": 0,
            "timelimit": [None, None],
            "root_id": None,
            "parent_id": None,
            "argsrepr": "",
            "kwargsrepr": "",
            "origin": "mallory",
            "ignore_result": False,
            "stamped_headers": None,
            "stamps": {},
            **(headers or {}),
        },
        "properties": {
            "correlation_id": "c",
            "reply_to": "",
            "delivery_mode": 2,
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
            "delivery_info": {"exchange": "", "routing_key": "ingest.inbox"},
            **(properties or {}),
        },
    }


class Message:
    """What Celery's consumer is handed for an envelope (kombu's Message, the parts read)."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.headers = raw["headers"]
        self.content_type = raw["content-type"]
        self.body = base64.b64decode(raw["body"])

    def decode(self) -> Any:
        return json.loads(self.body)


# ----------------------------------------------------------------------------- the rules


def test_felabs_own_messages_pass() -> None:
    assert refusal(Message(envelope()), TASKS) is None
    beat = envelope([[], {}, EMBED], headers={"task": "felab.reconcile",
                                             "expires": "2026-12-05T20:38:41+00:00"})  # fmt: skip
    assert refusal(Message(beat), TASKS) is None
    assert envelope_refusal(envelope()) is None


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (envelope(headers={"task": "evil.x"}), "names an unknown task 'evil.x'"),
        (envelope(headers={"task": 5}), "names an unknown task 5"),
        (envelope(headers={"task": "\x1b[31mred"}), r"unknown task '\x1b[31mred'"),
        (envelope([[{"x": 1}], {}, {**EMBED, "callbacks": [LINK]}]), "callbacks"),
        (envelope([[{"x": 1}], {}, {**EMBED, "errbacks": [LINK]}]), "errbacks"),
        (envelope([[{"x": 1}], {}, {**EMBED, "chain": [LINK]}]), "chain"),
        (envelope([[{"x": 1}], {}, {**EMBED, "chord": LINK}]), "chord"),
        (envelope([[{"x": 1}], {}, {**EMBED, "chain": "notalist"}]), "chain"),
        (envelope(headers={"eta": "1970-01-01T00:00:00+00:00"}), "eta"),
        (envelope(headers={"expires": "2000-01-01T00:00:00+00:00"}), "expires"),
        (envelope(headers={"timelimit": "x"}), "timelimit"),
        (envelope(headers={"timelimit": [0.001, 0.001]}), "timelimit"),
        (envelope(headers={"shadow": "\x1b[31mfake-name"}), "shadow"),
        (envelope(headers={"group": {"a": 1}}), "group"),
        (envelope(5), "not felab's [args, kwargs, options]"),
        (envelope([[{"x": 1}]]), "not felab's [args, kwargs, options]"),
        (envelope([{"x": 1}, {}, {}]), "not felab's [args, kwargs, options]"),
        (envelope(content_type="application/x-python-serialize"), "not JSON"),
        (envelope(headers={"id": "\x1b[2J"}), "task id"),
        (
            envelope([["x", "y"], {"z": 1}, EMBED], headers={"task": "felab.reconcile"}),
            "arguments do not fit felab.reconcile",
        ),
        (envelope([[1, 2, 3], {}, EMBED], headers={"task": "felab.pair"}), "do not fit"),
        (envelope(headers={"task": "felab.reconcile", "expires": "soon"}), "expires"),
    ],
)
def test_what_felab_never_sends_is_refused_in_words(raw: dict[str, Any], words: str) -> None:
    why = refusal(Message(raw), TASKS)
    assert why is not None and words in why and "\n" not in why and "\x1b" not in why


def test_a_body_that_is_not_json_or_too_deep_is_refused() -> None:
    raw = envelope()
    raw["body"] = base64.b64encode(b"[[" + b"[" * 100_000 + b"]" * 100_000 + b"], {}, {}]").decode()
    why = refusal(Message(raw), TASKS)
    assert why is not None and "not JSON" in why


@pytest.mark.parametrize(
    ("properties", "words"),
    [
        ({"delivery_tag": None}, "delivery tag"),
        ({"delivery_tag": ""}, "delivery tag"),
        ({"delivery_tag": {"a": 1}}, "delivery tag"),
        ({"delivery_tag": "x" * 1000}, "delivery tag"),
        ({"delivery_info": None}, "delivery_info"),
    ],
)
def test_an_envelope_kombu_cannot_keep_is_refused(properties: dict[str, Any], words: str) -> None:
    why = envelope_refusal(envelope(properties=properties))
    assert why is not None and words in why


# ----------------------------------------------------------------------------- the real ingest


def _refused_count(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith('felab_ingest_refused_total{reason="malformed"}'):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.slow
def test_hostile_messages_are_dropped_in_one_line_and_the_ingest_goes_on(
    broker: RedisServer, tmp_path: Path
) -> None:
    """H1: a callback in a message was published by the ingest, as the broker's admin (past the
    ACL table). H2: an unknown task put Celery's traceback and a dump of the message in the log.
    H3: a null delivery tag stopped the ingest (exit 70). H4: body "5" and timelimit "x" were
    never acknowledged and held both prefetch slots: the ingest took nothing more."""
    metrics_port = free_port()
    env = {
        **base_env(), **broker.env(), "FELAB_DATA_DIR": str(tmp_path / "data"),
        "FELAB_METRICS_PORT": str(metrics_port), "FELAB_METRICS_ADDR": "127.0.0.1",
    }  # fmt: skip
    log = tmp_path / "ingest.log"
    proc = start_felab([FELAB, "worker", "ingest", "--loglevel", "INFO"], env, log)
    link = {**EMBED, "callbacks": [LINK] * 3, "chain": [LINK]}
    hostile = [
        envelope([[{"x": 1}], {}, link]),
        envelope([[{"lookup": "0" * 64}], {}, link], headers={"task": "felab.pair"}),
        envelope(headers={"task": "evil.x"}),
        envelope(properties={"delivery_tag": None}),
        envelope(5),
        envelope(headers={"timelimit": "x"}),
        envelope(headers={"eta": "2999-01-01T00:00:00+00:00"}),
    ]
    admin = broker.client()
    try:
        wait_in(log, proc, " ready.")
        for raw in hostile:
            admin.lpush(f"{PREFIX}ingest.inbox", json.dumps(raw))
        admin.lpush(f"{PREFIX}pairing.inbox", json.dumps(hostile[1]))
        # sweep 24 M2: a flood of junk wrote a warning each (100,032 lines): now one, counted
        admin.lpush(f"{PREFIX}ingest.inbox", *[f"junk{i}" for i in range(300)])
        for _ in range(3):  # more than the prefetch slots: each is taken and answered
            admin.lpush(f"{PREFIX}ingest.inbox", json.dumps(envelope()))
        total = len(hostile) + 1 + 300 + 3
        wait_for(lambda: _refused_count(metrics_port) >= total, 30, "every message refused")
        assert proc.poll() is None
        assert admin.hlen(f"{PREFIX}unacked") == 0  # every message acknowledged
        assert admin.llen(f"{PREFIX}ingest.inbox") == 0
        # each hostile message, the junk, and the three honest-looking ones the events layer
        # refuses (one line: the same refusal from the same worker, counted after)
        assert _refused_count(metrics_port) == total
    finally:
        kill_group(proc)
    out = log.read_text(errors="replace")
    assert "marker.from_the_sender" not in out  # no callback was sent, so none came back
    assert "Traceback" not in out and "full contents" not in out and "evil.x" in out
    refusals = [line for line in out.splitlines() if " a message on the broker" in line]
    # one line a kind: the three 'callbacks' messages (two inboxes) are one, the junk one more
    assert len(refusals) == len(hostile) - 1 + 1, out
    assert out.count("asks for Celery's 'callbacks'") == 1 and out.count("JSONDecodeError") == 1
    assert out.count(NOT_AN_EVENT) == 1, out
