"""`felab status` and `felab broker setup` against a server at the broker's address that is
not Redis (seventeenth sweep, group b, H4-H8, M2, M3): each ends within its budget with exit 3
and words that name the address; the admin-user advice only for NOPERM; a broker's text never
reaches the terminal with its control characters. Real sockets, the real command (CliRunner)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import date
from datetime import time as clock
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.db.session import default_sessions, session_scope
from felab_core.jobs.keys import new_private_key, public_key_text
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.people.members import add_member, create_cohort
from felab_core.settings import get_settings
from tests.worker.fake_broker import everything, fake_broker, handshake_or

runner = CliRunner()


@pytest.fixture(autouse=True)
def _one_paired_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("FELAB_DATABASE_URL", "FELAB_BROKER_URL", "FELAB_BROKER_PREFIX"):
        # set first, so that the undo restores what was there (nothing) even after _felab
        # writes os.environ itself: a bare delenv of an unset name records no undo, and the
        # fake broker's URL had leaked into later tests of the same run
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    monkeypatch.setenv("FELAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "250")
    get_settings.cache_clear()
    with session_scope(default_sessions()) as s:
        cohort = create_cohort(
            s, "C", timezone="UTC", start_date=date(2026, 3, 2), post_time=clock(9), guild_id="g"
        )
        ada = add_member(s, cohort, "100", display_name="Ada")
        redeem_pair_code(s, issue_pair_code(s, ada, "ada-mac"), public_key_text(new_private_key()))
    yield
    get_settings.cache_clear()


def _felab(url: str, *args: str) -> tuple[int, str, float]:
    import os

    os.environ["FELAB_BROKER_URL"] = url  # the autouse fixture's monkeypatch undoes it
    get_settings.cache_clear()
    began = time.monotonic()
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output, time.monotonic() - began


@pytest.mark.parametrize(
    ("reply", "shown"),
    [
        (b":99999999999999999999999999\r\n", "(99999999999999999999999999)"),
        (b"+OK\r\n", "(OK)"),
        (b"$-1\r\n", "(None)"),
        (b"*2\r\n$1\r\na\r\n$1\r\nb\r\n", "(['a', 'b'])"),
        (b"*1\r\n" * 200_000 + b":1\r\n", "nested over 32 deep"),
    ],
    ids=["huge-count", "ok", "nil", "array", "deep"],
)
def test_status_refuses_a_queue_length_redis_could_not_have_said(
    reply: bytes, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """H5: a depth of 99999999999999999999999999 was shown as fact, exit 0; M2: garbage was
    blamed on the admin user (exit 2)."""
    with fake_broker(everything(reply)) as url:
        code, out, _ = _felab(url, "status", "--json")
    assert code == 3, out
    said = json.loads(out.splitlines()[0])
    assert all(mc.get("depth") is None for mc in said["machines"]), said
    assert said["broker"].startswith(f"reached, but the broker at {url} answered LLEN with")
    assert "not Redis's answer" in said["broker"] and shown in said["broker"]
    assert "admin user" not in out and "recursion" not in out


def test_status_with_a_broker_that_dribbles_keeps_to_its_budget() -> None:
    """H4: a PONG sent a byte every 2 s took `felab status` to 53 s."""
    with fake_broker(everything(b":3\r\n"), drip_s=0.4) as url:  # everything, handshake too
        code, out, took = _felab(url, "status", "--json")
    assert code == 3 and took < 6, (took, out)
    assert "broker not reached: could not reach the broker" in " ".join(out.split())
    llen = lambda args, conn: args[0] == b"LLEN"  # noqa: E731
    with fake_broker(everything(b":3\r\n"), drip_s=2.0, dripped=llen) as url:  # 6 s for :3
        code, out, took = _felab(url, "status", "--json")
    assert code == 3 and took < 8, (took, out)
    assert f"the broker at {url} did not answer LLEN in time" in " ".join(out.split())


def test_status_says_a_deep_ping_answered_not_as_redis_and_not_unreached() -> None:
    """M2: "broker not reached: maximum recursion depth exceeded", of a broker that answered."""
    with fake_broker(handshake_or(lambda a, c: b"*1\r\n" * 200_000 + b":1\r\n")) as url:
        code, out, _ = _felab(url, "status")
    assert code == 3, out
    flat = " ".join(out.split())
    assert f"broker: the broker address {url} answered, but not as Redis does" in flat
    assert "not reached" not in flat and "recursion" not in flat


def test_status_shows_no_broker_escape_code_on_the_terminal() -> None:
    """M3: an error text holding an OSC title sequence reached stdout as it was sent."""
    reply = b"-ERR \x1b]0;pwned\x07 secret=hunter2 " + b"x" * 5000 + b"\r\n"
    with fake_broker(everything(reply)) as url:
        code, out, _ = _felab(url, "status")
    assert code == 3, out
    assert "\x1b" not in out and "\x07" not in out and "hunter2" not in out
    assert "?]0;pwned?" in out and len(out.split("broker: ", 1)[1]) < 400


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (b"+OK\r\n", "is not Redis 7 or later (INFO names no version)"),
        (b"+zzzzzzzzzz\r\n", "is not Redis 7 or later (INFO names no version)"),
        (b":99999999999999999999999999\r\n", "answered INFO with something that is not"),
        (b"*2\r\n$1\r\na\r\n$1\r\nb\r\n", "answered INFO with something that is not"),
        (b"$-1\r\n", "answered INFO with something that is not"),
        (b"*1\r\n" * 200_000 + b":1\r\n", "nested over 32 deep"),
    ],
    ids=["ok", "str", "int", "array", "nil", "deep"],
)
def test_broker_setup_believes_only_redis_7(reply: bytes, words: str) -> None:
    """H6: INFO answered with an int, an array, nil or deep nesting was exit 70; H8: +OK to
    everything printed "broker users ready" and a pairing URL to a server that is not Redis."""
    with fake_broker(everything(reply)) as url:
        code, out, _ = _felab(url, "broker", "setup")
    flat = " ".join(out.split())
    assert code == 3, out
    assert words in flat and f"the broker at {url}" in flat
    assert "ready" not in flat and "felab-pairing" not in flat and "bug" not in flat


def test_broker_setup_with_a_broker_that_dribbles_keeps_to_its_budget() -> None:
    """H7: a broker sending every answer a byte every 2 s held `broker setup` past 30 s."""
    with fake_broker(everything(b"+OK\r\n"), drip_s=0.4) as url:
        code, out, took = _felab(url, "broker", "setup")
    assert code == 3 and took < 8, (took, out)
    info = lambda args, conn: args[0] == b"INFO"  # noqa: E731
    text = b"redis_version:7.2.4\r\n" * 8  # 168 bytes at 0.15 s: 25 s, past setup's 20 s
    bulk = b"$%d\r\n%s\r\n" % (len(text), text)
    with fake_broker(everything(bulk), drip_s=0.15, dripped=info) as url:
        code, out, took = _felab(url, "broker", "setup")
    assert code == 3 and took < 23, (took, out)
    assert "did not answer felab's ACL commands in time" in " ".join(out.split())


def test_worker_pair_with_a_broker_that_is_not_redis_is_exit_3(tmp_path: Path) -> None:
    """H10/L6: a GET answered with a number was "not felab's: pair again" (exit 2), and an LPUSH
    answered `$-5` held `--timeout 2` past a minute."""
    get = everything(b":99999999999999999999999999\r\n")
    with fake_broker(get) as url:
        code, out, _ = _felab(url, "worker", "pair", "--code", "AAAAAA-BBBBBB-CCCCCC")
    assert code == 3 and "answered GET with something that is not Redis's answer" in out, out
    assert "pair again" not in out
    with fake_broker(everything(b"$-5\r\n")) as url:
        pairing = url.replace("//", "//felab-pairing:pw@", 1)
        code, out, took = _felab(pairing, "worker", "pair", "--code", "A" * 18, "--timeout", "2")
    assert code == 3 and took < 4, (took, out)
    assert "did not take the pairing request within 2 s" in " ".join(out.split())


@pytest.mark.parametrize("ca", ["garbage.pem", "missing.pem", "folder", "/dev/null"])
def test_status_with_a_bad_ca_file_says_the_setting_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ca: str
) -> None:
    """Twentieth sweep (b) B6: a CA file that is none had been "broker: not reached", exit 3,
    as if Redis were down; nothing was tried, the setting is wrong."""
    (tmp_path / "garbage.pem").write_text("garbage\n")
    (tmp_path / "folder").mkdir()
    monkeypatch.setenv("FELAB_BROKER_CA_FILE", str(tmp_path / ca))
    code, out, _ = _felab("rediss://admin:pw@127.0.0.1:41999/0", "status")
    assert code == 2, out
    assert "broker: bad setting: " in out and "FELAB_BROKER_CA_FILE" in out
    assert "not reached" not in out


def test_a_wrong_broker_password_is_said_as_refused_not_unreached(tmp_path: Path) -> None:
    """Twentieth sweep (b) B7: Redis refusing the URL's password read 'could not reach the
    broker ... is Redis running?' (exit 3), from `status` and `broker setup` alike."""
    from tests.e2e.fleet import RedisServer

    (tmp_path / "redis").mkdir()
    server = RedisServer(tmp_path / "redis")
    try:
        wrong = server.url.replace(server.password, "not-the-password")
        for args in (["status"], ["broker", "setup"]):
            code, out, _ = _felab(wrong, *args)
            flat = " ".join(out.split())
            assert code == 2, out
            assert "refused user 'admin' (a wrong password, or the user is off)" in flat
            assert "not reached" not in flat and "not-the-password" not in flat
    finally:
        server.stop()


def test_a_broker_url_with_a_user_and_no_password_is_said_so(tmp_path: Path) -> None:
    """`redis://admin@host` (no password, or the password typed without its `:`) refused by
    Redis was said as "a wrong password ... check the user and password", a password never
    given; and the bare user, often that password, was repeated in the words."""
    from tests.e2e.fleet import RedisServer

    (tmp_path / "redis").mkdir()
    server = RedisServer(tmp_path / "redis")
    try:
        bare = server.url.replace(f"admin:{server.password}@", "S3cretAsUser@")
        assert bare != server.url
        code, out, _ = _felab(bare, "status")
        flat = " ".join(out.split())
        assert code == 2, out
        assert "refused the user (no password was given)" in flat
        assert "(:PASSWORD before the @)" in flat
        assert "wrong password" not in flat and "S3cretAsUser" not in flat
    finally:
        server.stop()


def test_status_shows_the_ingests_inbox_waiting_and_its_oldest(tmp_path: Path) -> None:
    """Every machine's events wait in one inbox: a stopped or flooded ingest shows there first
    (sweep 24 M2's flood delayed another member's result 35 s). Real redis-server."""
    import base64

    from felab_worker.names import INGEST_QUEUE, Names
    from tests.e2e.fleet import RedisServer

    (tmp_path / "redis").mkdir()
    server = RedisServer(tmp_path / "redis")
    try:
        code, out, _ = _felab(server.url, "status")
        assert code == 0 and "ingest inbox: empty" in out, out
        inbox = Names(get_settings().broker_prefix).key(INGEST_QUEUE)
        for ago in (40, 20, 5):  # LPUSHed: the oldest ends last
            body = json.dumps([[{"at": time.time() - ago}], {}, {}]).encode()
            server.client().lpush(inbox, json.dumps({"body": base64.b64encode(body).decode()}))
        code, out, _ = _felab(server.url, "status")
        flat = " ".join(out.split())
        assert code == 0 and "ingest inbox: 3 waiting, the oldest signed 40 s ago" in flat, out
        assert "`felab worker ingest` running" in flat
        code, out, _ = _felab(server.url, "status", "--json")
        data = json.loads(out)
        assert data["inbox_waiting"] == 3 and 39 <= data["inbox_oldest_s"] < 60
        # sweep 26: a paired machine's junk at the tail says no age, and --json stays JSON
        for junk in ("[" * 200_000 + "]" * 200_000, '{"body": "%%%"}'):
            server.client().delete(inbox)
            server.client().lpush(inbox, junk)
            code, out, _ = _felab(server.url, "status")
            assert code == 0 and "ingest inbox: 1 waiting (is" in " ".join(out.split()), out
        body = base64.b64encode(b'[[{"at": -1e309}], {}, {}]').decode()
        server.client().rpush(inbox, json.dumps({"body": body}))  # the oldest end
        code, out, _ = _felab(server.url, "status", "--json")
        data = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in --json"))
        assert code == 0 and data["inbox_waiting"] == 2 and data["inbox_oldest_s"] is None
    finally:
        server.stop()
