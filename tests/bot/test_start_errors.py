"""`felab bot` and `felab bot sync` as processes, on the ways a start goes wrong: a token pasted
with its line end (a Windows .env), and Discord's API not reached after the address check.

The real, unmodified commands against the fake Discord API (FELAB_DISCORD_API_URL), or against
a socket that answers the address check and then closes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from felab_core.db.session import make_engine, upgrade
from felab_core.redact import redact
from felab_core.settings import Settings
from tests.fakediscord import FakeDiscord

FELAB = str(Path(sys.executable).with_name("felab"))
#: Shaped as a Discord bot token (not a real one): the shape redact() knows is beside the point.
TOKEN = "fx110-tok.GaBcDe.s3cr3tT0kenXyZabcdefghijklmn"


def env_for(tmp: Path, token: str, api_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELAB_")}
    db_url = f"sqlite:///{tmp / 'felab.db'}"
    engine = make_engine(db_url)
    upgrade(engine)
    engine.dispose()
    env.update(
        FELAB_DISCORD_TOKEN=token,
        FELAB_DISCORD_API_URL=api_url,
        FELAB_DATABASE_URL=db_url,
        FELAB_DATA_DIR=str(tmp / "data"),
    )
    return env


def felab(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["timeout", "-s", "KILL", str(timeout), FELAB, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout + 10,
    )


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    fake = FakeDiscord(token=TOKEN).start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.mark.parametrize("line_end", ["\r", "\r\n"])
def test_sync_with_a_token_pasted_with_its_line_end(
    fake: FakeDiscord, tmp_path: Path, line_end: str
) -> None:
    """The token as a Windows .env gives it (a CR at the end) had been sent as it was: HTTP
    refused the header, and the error printed it whole, blaming the server. It is the token."""
    env = env_for(tmp_path, TOKEN + line_end, fake.api_url)
    out = felab(env, "bot", "sync", "--guild", fake.guild_id)
    assert out.returncode == 0, out.stderr
    assert "synced" in out.stdout
    assert fake.commands.get(fake.guild_id)
    assert "s3cr3t" not in out.stdout + out.stderr


def test_bot_with_a_token_ending_in_cr_logs_in(fake: FakeDiscord, tmp_path: Path) -> None:
    env = env_for(tmp_path, TOKEN + "\r", fake.api_url)
    log = (tmp_path / "bot.log").open("wb")
    proc = subprocess.Popen(
        ["timeout", "-s", "KILL", "60", FELAB, "bot"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        fake.wait_for(lambda: fake.identifies or proc.poll() is not None, 40, "the bot's login")
        said = (tmp_path / "bot.log").read_text(errors="replace")
        assert proc.poll() is None, said
        assert fake.identifies[-1]["token"] == TOKEN
        assert "s3cr3t" not in said
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait(10)
        log.close()


@pytest.mark.parametrize("inside", ["\x1b", " ", "\u200b"])
def test_a_token_with_a_character_inside_is_refused_by_name(tmp_path: Path, inside: str) -> None:
    token = TOKEN[:10] + inside + TOKEN[10:]
    env = env_for(tmp_path, token, "http://127.0.0.1:9/api/v10")
    for args in (("bot",), ("bot", "sync", "--guild", "5")):
        out = felab(env, *args)
        assert out.returncode == 2, out.stderr
        assert "FELAB_DISCORD_TOKEN" in out.stderr
        assert "s3cr3t" not in out.stdout + out.stderr
        assert "Traceback" not in out.stderr


def test_the_token_is_masked_once_settings_are_read() -> None:
    """Any error text that quotes the token (a header, a URL) is masked from the start, before
    the bot's logs are set up."""
    token = "fx110-other.AbCdEf.an0therS3cretValueXyZ"
    settings = Settings(discord_token=token + "\r\n")
    assert settings.discord_token is not None
    assert settings.discord_token.get_secret_value() == token
    said = redact(f"Illegal header value b'Bot {token}\\r'")
    assert token not in said


def _answer_once_then_close(status: int, body: bytes) -> tuple[int, threading.Thread]:
    """A port that answers one HTTP request (felab's address check) and then closes: the bot's
    own login finds nothing listening, as when the network drops between the two."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        with listener:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(10)
                got = b""
                while b"\r\n\r\n" not in got:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                head = (
                    f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                )
                conn.sendall(head.encode() + body)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return port, thread


@pytest.mark.parametrize("args", [("bot",), ("bot", "sync", "--guild", "5")])
def test_discord_not_reached_is_said_alike(tmp_path: Path, args: tuple[str, ...]) -> None:
    """`felab bot` had stopped on 'an unexpected error (ClientConnectorError ...)', exit 70,
    where `felab bot sync` said it could not reach Discord's API, exit 3: one mapping now."""
    body = json.dumps({"message": "401: Unauthorized", "code": 0}).encode()
    port, thread = _answer_once_then_close(401, body)
    env = env_for(tmp_path, TOKEN, f"http://127.0.0.1:{port}/api/v10")
    started = time.monotonic()
    out = felab(env, *args)
    thread.join(10)
    assert out.returncode == 3, out.stderr
    assert "could not reach Discord's API" in out.stderr
    assert "unexpected error" not in out.stderr
    assert "s3cr3t" not in out.stdout + out.stderr
    assert time.monotonic() - started < 50
