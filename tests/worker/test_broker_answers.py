"""A server at the broker's address that is not Redis (seventeenth sweep, group b): one that
sends its answers a byte every few tenths of a second, answers a queue's length with 10**26 or
+OK, nests arrays 200,000 deep, or says +OK to every ACL command. Each is cut off within its
budget or refused as not Redis's answer, never believed, never a Python error. Real sockets."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from felab_core.jobs.pairing import MachineCredential
from felab_core.settings import Settings
from felab_worker import acl, answers
from felab_worker.answers import BrokerUnusable
from felab_worker.broker import redis_client
from felab_worker.names import Names
from felab_worker.pairing import BrokerNotRedis, BrokerUnreachable, check_reachable
from tests.worker.fake_broker import everything, fake_broker, handshake_or


def _settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path)


def test_an_answer_dribbled_within_each_read_is_cut_at_the_read_timeout(tmp_path: Path) -> None:
    """H4: each byte came within the read timeout, so a 7-byte PONG sent over 12 s was read
    whole; the timeout now holds for the answer as a whole."""
    gets = lambda args, conn: args[0] == b"GET"  # noqa: E731
    with fake_broker(everything(b"$5\r\nhello\r\n"), drip_s=0.3, dripped=gets) as url:
        client = redis_client(url, _settings(tmp_path), timeout_s=1.0)
        client.ping()  # connected, its handshake and health check done
        began = time.monotonic()
        with pytest.raises(redis.exceptions.TimeoutError):
            client.get("k")
        assert time.monotonic() - began < 1.6  # the answer took 3.3 s


def test_the_reachability_check_keeps_to_its_budget(tmp_path: Path) -> None:
    """H4/H7: `felab status` (a 3 s check) ran to 53 s against a PONG sent a byte every 2 s:
    redis-py's health check, its own PING and three retries each read within the timeout."""
    with fake_broker(everything(b"+OK\r\n"), drip_s=0.3) as url:
        began = time.monotonic()
        with pytest.raises(BrokerUnreachable, match="could not reach the broker"):
            check_reachable(url, _settings(tmp_path), timeout_s=1.0)
        assert time.monotonic() - began < 2.0


def test_a_client_with_a_budget_stops_there_whatever_it_sends(tmp_path: Path) -> None:
    llen = lambda args, conn: args[0] == b"LLEN"  # noqa: E731
    with fake_broker(everything(b":1\r\n"), drip_s=0.2, dripped=llen) as url:
        client = redis_client(url, _settings(tmp_path), within_s=1.5)
        began = time.monotonic()
        with pytest.raises(redis.exceptions.TimeoutError):
            for _ in range(10):  # each :1 comes in 0.8 s, within the 15 s read timeout
                client.llen("q")
        assert time.monotonic() - began < 2.5


def test_a_connection_that_timed_out_mid_answer_is_never_used_again(tmp_path: Path) -> None:
    """The first connection's answer to GET a comes too slowly: the rest of it must never be
    read as the answer to a later command."""

    def echo(args: list[bytes], conn: int) -> bytes:
        if args[0] == b"PING":
            return b"+PONG\r\n"
        return b"$%d\r\n%s\r\n" % (len(args[1]), args[1])

    first_get = lambda args, conn: conn == 0 and args[0] == b"GET"  # noqa: E731
    with fake_broker(handshake_or(echo), drip_s=0.3, dripped=first_get) as url:
        client = redis_client(url, _settings(tmp_path), timeout_s=0.5)
        with pytest.raises(redis.exceptions.TimeoutError):
            client.get("a")  # "$1\r\na\r\n" comes a byte every 0.3 s: cut at 0.5 s
        assert [client.get(k) for k in "bcd"] == ["b", "c", "d"]  # never "a"


def test_arrays_nested_200000_deep_are_refused_not_a_recursion_error(tmp_path: Path) -> None:
    """H6/M2: the parser recursed once per level: RecursionError, exit 70 in `broker setup`."""
    with fake_broker(everything(b"*1\r\n" * 200_000 + b":1\r\n")) as url:
        client = redis_client(url, _settings(tmp_path), timeout_s=5)
        with pytest.raises(redis.exceptions.InvalidResponse, match="nested over 32 deep"):
            client.llen("q")
    deep_ping = handshake_or(lambda a, c: b"*1\r\n" * 200_000 + b":1\r\n")
    with (
        fake_broker(deep_ping) as url,
        pytest.raises(BrokerNotRedis, match="answered, but not as Redis does"),
    ):
        check_reachable(url, _settings(tmp_path), timeout_s=3)


@pytest.mark.parametrize("said", [10**26, -1, True, "3", "OK", None, [1], 2**63])
def test_a_count_redis_could_not_have_said_is_refused(said: object) -> None:
    """H5: a queue of 99999999999999999999999999 jobs was shown as fact."""
    with pytest.raises(BrokerUnusable, match="LLEN with something that is not Redis's answer"):
        answers.a_count(said, "redis://h:6379/0", "LLEN")


def test_counts_redis_can_say_are_taken() -> None:
    assert answers.a_count(0, "u", "LLEN") == 0
    assert answers.a_count(2**63 - 1, "u", "LLEN") == 2**63 - 1


@pytest.mark.parametrize(
    ("info", "words"),
    [
        ({}, "is not Redis 7 or later (INFO names no version)"),
        ({"__raw__": ["OK"]}, "INFO names no version"),
        ({"redis_version": "zzz"}, "INFO names no version: zzz"),
        ({"redis_version": "6.2.14"}, "is Redis 6.2.14: felab needs Redis 7 or later"),
        ("OK", "INFO names no version"),
        (None, "INFO names no version"),
    ],
)
def test_a_server_that_names_no_redis_7_is_refused(info: object, words: str) -> None:
    """H8: INFO with no redis_version was read as version (0,) without a word."""
    with pytest.raises(BrokerUnusable) as caught:
        answers.a_version(info, "redis://h:6379/0")
    assert words in str(caught.value)


def test_versions_redis_names_are_read() -> None:
    assert answers.a_version({"redis_version": "7.0.15"}, "u") == (7, 0, 15)
    assert answers.a_version({"redis_version": 8.0}, "u") == (8, 0)  # redis-py reads "8.0" so


def _redis_7(acl_answer: bytes, users: bytes = b"*1\r\n$7\r\ndefault\r\n") -> object:
    def answer(args: list[bytes], conn: int) -> bytes:
        if args[0] == b"PING":
            return b"+PONG\r\n"
        if args[0] == b"INFO":
            text = b"# Server\r\nredis_version:7.2.4\r\n"
            return b"$%d\r\n%s\r\n" % (len(text), text)
        if args[:2] == [b"ACL", b"USERS"]:
            return users
        return acl_answer

    return handshake_or(answer)


@pytest.mark.parametrize(
    ("server", "words"),
    [
        (everything(b"+OK\r\n"), "not Redis 7 or later (INFO names no version)"),
        (everything(b":99999999999999999999999999\r\n"), "answered INFO with something"),
        (everything(b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"), "answered INFO with something"),
        (everything(b"$-1\r\n"), "answered INFO with something"),
        (_redis_7(b":1\r\n"), "answered ACL SETUSER with something that is not Redis's"),
        (_redis_7(b"+OK\r\n", users=b"+OK\r\n"), "answered ACL USERS with something"),
    ],
    ids=["ok-to-all", "int", "array", "nil", "setuser-int", "users-ok"],
)
def test_setting_up_users_believes_only_redis_answers(
    server: object, words: str, tmp_path: Path
) -> None:
    """H6/H8: INFO answered with an int, an array or nil was exit 70 ('int' object has no
    attribute 'splitlines'); +OK to everything was "broker users ready"."""
    with fake_broker(server) as url:  # type: ignore[arg-type]
        client = redis_client(url, _settings(tmp_path), within_s=5)
        with pytest.raises(BrokerUnusable) as caught:
            acl.ensure_users(client, Names("felab:"), "hash", [MachineCredential(1, "h" * 64)])
    assert words in str(caught.value) and url in str(caught.value)


def _pairing(url: str, tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path, broker_url=url.replace("//", "//felab-pairing:pw@", 1))


@pytest.mark.parametrize(
    ("server", "drip_s"),
    [(everything(b"$-5\r\n"), 0.0), (everything(b":1\r\n"), 1.0)],
    ids=["negative-bulk", "dribbled"],
)
def test_pairing_keeps_to_its_timeout(server: object, drip_s: float, tmp_path: Path) -> None:
    """H10: `worker pair --timeout 10` ran 37-61 s: kombu gave each read of a retried
    publish its whole 15 s."""
    from felab_worker.pairing import pair_machine

    lpush = lambda args, conn: args[0] == b"LPUSH"  # noqa: E731
    with fake_broker(server, drip_s=drip_s, dripped=lpush) as url:  # type: ignore[arg-type]
        began = time.monotonic()
        with pytest.raises(BrokerUnreachable, match="did not take the pairing request within 2 s"):
            pair_machine(_pairing(url, tmp_path), "AAAAAA-BBBBBB-CCCCCC", timeout_s=2)
        assert time.monotonic() - began < 3.5


@pytest.mark.parametrize(
    ("get", "words"),
    [
        (b":99999999999999999999999999\r\n", "answered GET with something that is not Redis's"),
        (b"*2\r\n$1\r\na\r\n$1\r\nb\r\n", "answered GET with something that is not Redis's"),
        (b"+zzzzzzzzzz\r\n", "is not one felab's ingest writes (a JSON object)"),
        (b"$1\r\n5\r\n", "is not one felab's ingest writes (a JSON object)"),
    ],
    ids=["int", "array", "text", "json-number"],
)
def test_a_pairing_answer_no_ingest_wrote_is_not_pair_again(
    get: bytes, words: str, tmp_path: Path
) -> None:
    """L6: "the ingest's answer is not felab's: pair again", of a broker that is not Redis."""
    from felab_worker.pairing import pair_machine

    def answer(args: list[bytes], conn: int) -> bytes:
        return {b"PING": b"+PONG\r\n", b"LPUSH": b":1\r\n", b"GET": get}.get(args[0], b"+OK\r\n")

    with fake_broker(handshake_or(answer)) as url, pytest.raises(BrokerUnusable) as caught:
        pair_machine(_pairing(url, tmp_path), "AAAAAA-BBBBBB-CCCCCC", timeout_s=5)
    assert words in str(caught.value) and "pw" not in str(caught.value)


WRONG = b"+OK\r\n:-999999999999999999999999\r\n$-5\r\n*99999999999\r\n"


@pytest.mark.parametrize(
    ("server", "words"),
    [
        (handshake_or(lambda args, conn: WRONG), "PING was not answered PONG"),
        (everything(b"-ERR \x1b[31mno\r\n"), "answered the pairing request, but not as Redis"),
        (everything(b"*1\r\n" * 100_000 + b":1\r\n"), "answered the pairing request, but not"),
    ],
    ids=["ping-ok", "lpush-error", "lpush-nested"],
)
def test_pairing_with_a_broker_that_answers_wrongly_is_not_could_not_reach(
    server: object, words: str, tmp_path: Path
) -> None:
    """Eighteenth sweep (b) M5: "could not reach the broker (AttributeError: 'bytes' object has
    no attribute 'get')" of a server that answered every command; PING answered +OK had passed
    the reachability check (`felab status` said "reached")."""
    from felab_worker.pairing import pair_machine

    with fake_broker(server) as url, pytest.raises(BrokerNotRedis) as caught:  # type: ignore[arg-type]
        pair_machine(_pairing(url, tmp_path), "AAAAAA-BBBBBB-CCCCCC", timeout_s=5)
    said = str(caught.value)
    assert words in said and "could not reach" not in said and "pw" not in said
    assert "Error" not in said  # no Python exception's name
