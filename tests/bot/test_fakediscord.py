"""The fake Discord enforces what real Discord does, with Discord's own error shapes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx
import pytest

from tests.fakediscord import FakeDiscord, Pings, User

ADA = User("100000000000001001", "ada")


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    f = FakeDiscord(interaction_deadline_s=0.5, followup_valid_s=1.0).start()
    try:
        yield f
    finally:
        f.stop()


@pytest.fixture
def api(fake: FakeDiscord) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=fake.api_url, headers={"Authorization": f"Bot {fake.token}"}, timeout=5
    ) as client:
        yield client


def _post(api: httpx.Client, fake: FakeDiscord, body: dict[str, Any]) -> httpx.Response:
    return api.post(f"/channels/{fake.channel_ids[0]}/messages", json=body)


def test_login_routes_and_unauthorized(fake: FakeDiscord, api: httpx.Client) -> None:
    assert api.get("/users/@me").json()["id"] == fake.app_id
    assert api.get("/gateway/bot").json()["url"] == fake.gateway_url
    bad = httpx.get(f"{fake.api_url}/users/@me", headers={"Authorization": "Bot wrong"})
    assert bad.status_code == 401 and bad.json()["message"] == "401: Unauthorized"
    assert bad.headers["content-type"] == "application/json"
    assert [r.path for r in fake.recorded("GET")][-1] == "/api/v10/users/@me"


def test_message_limits_answer_like_discord(fake: FakeDiscord, api: httpx.Client) -> None:
    ok = _post(api, fake, {"content": "x" * 2000})
    assert ok.status_code == 200 and ok.json()["id"] in fake.messages
    long = _post(api, fake, {"content": "x" * 2001})
    assert long.status_code == 400
    assert long.json() == {
        "code": 50035,
        "errors": {
            "content": {
                "_errors": [
                    {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}
                ]
            }
        },
        "message": "Invalid Form Body",
    }
    title = _post(api, fake, {"embeds": [{"title": "t" * 257}]})
    assert title.status_code == 400 and "title" in title.json()["errors"]["embeds"]["0"]
    total = _post(api, fake, {"embeds": [{"description": "d" * 4000}, {"description": "e" * 2001}]})
    assert total.status_code == 400
    assert total.json()["errors"]["embeds"]["_errors"][0]["code"] == "MAX_EMBED_SIZE_EXCEEDED"
    fields = _post(api, fake, {"embeds": [{"fields": [{"name": "n", "value": "v"}] * 26}]})
    assert fields.status_code == 400
    row = {"type": 1, "components": [{"type": 2, "style": 1, "custom_id": "c" * 101}]}
    assert _post(api, fake, {"content": "x", "components": [row]}).status_code == 400
    assert _post(api, fake, {}).json()["code"] == 50006


def test_rate_limit_answers_429_with_retry_after(fake: FakeDiscord, api: httpx.Client) -> None:
    fake.rate_limit("POST", r"/messages$", times=1, retry_after=0.25)
    first = _post(api, fake, {"content": "hi"})
    assert first.status_code == 429
    assert first.json()["retry_after"] == 0.25 and first.headers["X-RateLimit-Remaining"] == "0"
    assert "Retry-After" in first.headers
    assert _post(api, fake, {"content": "hi"}).status_code == 200


def test_discords_own_limits_five_messages_a_channel_and_fifty_a_second() -> None:
    fake = FakeDiscord(channel_ids=("1", "2"), discord_limits=True).start()
    try:
        with httpx.Client(
            base_url=fake.api_url, headers={"Authorization": f"Bot {fake.token}"}
        ) as api:
            sent = [api.post("/channels/1/messages", json={"content": "x"}) for _ in range(6)]
            assert [r.status_code for r in sent] == [200] * 5 + [429]
            assert sent[0].headers["X-RateLimit-Remaining"] == "4"
            assert sent[4].headers["X-RateLimit-Remaining"] == "0"
            over = sent[5].json()
            assert over["global"] is False and 0 < over["retry_after"] <= 5
            assert sent[5].headers["Via"]  # discord.py takes a 429 without it for a ban
            other = api.post("/channels/2/messages", json={"content": "x"})
            assert other.status_code == 200  # each channel has its own bucket
            for _ in range(500):  # past 50 in a second: the bot's global limit
                read = api.get("/channels/1/messages/1")
                if read.status_code == 429:
                    break
            assert read.status_code == 429 and read.json()["global"] is True
        assert fake.too_many >= 2
    finally:
        fake.stop()


@pytest.fixture
def connected(fake: FakeDiscord, api: httpx.Client) -> Iterator[None]:
    """A minimal gateway client: HELLO, IDENTIFY -> READY and GUILD_CREATE, a heartbeat ACK;
    then /drill synced on the guild."""
    events: list[str] = []
    session: aiohttp.ClientSession | None = None
    ws: aiohttp.ClientWebSocketResponse | None = None

    async def run() -> None:
        nonlocal session, ws
        session = aiohttp.ClientSession()
        ws = await session.ws_connect(fake.gateway_url)
        assert (await ws.receive_json())["op"] == 10
        await ws.send_json({"op": 2, "d": {"token": fake.token, "intents": 1}})
        events.append((await ws.receive_json())["t"])
        events.append((await ws.receive_json())["t"])
        await ws.send_json({"op": 1, "d": 2})
        assert (await ws.receive_json())["op"] == 11

    async def close() -> None:
        if ws is not None:
            await ws.close()
        if session is not None:
            await session.close()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(run())
        assert events == ["READY", "GUILD_CREATE"] and fake.heartbeats == 1
        put = api.put(
            f"/applications/{fake.app_id}/guilds/{fake.guild_id}/commands",
            json=[{"name": "drill", "description": "d", "type": 1}],
        )
        assert put.status_code == 200 and put.json()[0]["name"] == "drill"
        yield
    finally:
        loop.run_until_complete(close())
        loop.close()


def test_only_synced_commands_can_be_sent(fake: FakeDiscord) -> None:
    with pytest.raises(AssertionError, match="never synced"):
        fake.slash("drill", ADA)


def test_interactions_three_seconds_once_and_followups(fake: FakeDiscord, connected: None) -> None:
    it = fake.slash("drill", ADA)
    cb = f"{fake.api_url}/interactions/{it.id}/{it.token}/callback"
    hook = f"{fake.api_url}/webhooks/{fake.app_id}/{it.token}"
    early = httpx.post(hook, json={"content": "too soon"})
    assert early.status_code == 404  # no first response yet
    body = {"type": 4, "data": {"content": "hello", "flags": 64}}
    first = httpx.post(cb, params={"with_response": "1"}, json=body)
    assert first.status_code == 200
    assert first.json()["interaction"]["response_message_ephemeral"] is True
    again = httpx.post(cb, json=body)
    assert again.status_code == 400 and again.json()["code"] == 40060
    assert httpx.post(hook, json={"content": "more"}).status_code == 200
    time.sleep(1.05)
    gone = httpx.post(hook, json={"content": "late"})
    assert gone.status_code == 401 and gone.json()["code"] == 50027

    late = fake.slash("drill", ADA)
    time.sleep(0.6)  # past this fake's 0.5 s deadline
    missed = httpx.post(f"{fake.api_url}/interactions/{late.id}/{late.token}/callback", json=body)
    assert missed.status_code == 404
    assert missed.json() == {"message": "Unknown interaction", "code": 10062}


def test_modal_limits_like_discord() -> None:
    from tests.fakediscord.server import check_modal

    row = {"type": 4, "custom_id": "a", "label": "Ollama: writing speed", "style": 1}
    good = {
        "title": "Day 2: your numbers",
        "custom_id": "m",
        "components": [{"type": 1, "components": [row]}],
    }
    assert check_modal(good) is None
    assert check_modal({**good, "title": "x" * 46}) is not None
    assert check_modal({**good, "components": [{"type": 1, "components": [row]}] * 6}) is not None
    long_label = {"type": 1, "components": [{**row, "label": "x" * 46}]}
    problem = check_modal({**good, "components": [long_label]})
    assert problem is not None and problem["code"] == 50035


def test_files_and_direct_messages(fake: FakeDiscord, api: httpx.Client) -> None:
    dm = api.post("/users/@me/channels", json={"recipient_id": ADA.id}).json()
    assert dm["type"] == 1 and dm["recipients"][0]["id"] == ADA.id
    files = {"files[0]": ("chart.png", b"\x89PNG\r\n\x1a\nbytes", "image/png")}
    sent = api.post(
        f"/channels/{dm['id']}/messages",
        data={"payload_json": '{"content": "your result"}'},
        files=files,
    )
    assert sent.status_code == 200, sent.text
    msg = sent.json()
    assert [a["filename"] for a in msg["attachments"]] == ["chart.png"]
    assert fake.attachment(msg, "chart.png") == b"\x89PNG\r\n\x1a\nbytes"
    assert fake.dm_messages(ADA.id)[0]["content"] == "your result"
    assert fake.channel_messages(fake.channel_ids[0]) == []
    assert api.get(f"/users/{ADA.id}").json()["id"] == ADA.id


def _gateway_events(fake: FakeDiscord, intents: int, act: Any) -> tuple[list[Any], int | None]:
    """Identify with `intents`, run `act()`, then read what the gateway sent (or its close)."""
    got: list[Any] = []
    closed: int | None = None

    async def run() -> None:
        nonlocal closed
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(fake.gateway_url) as ws,
        ):
            assert (await ws.receive_json())["op"] == 10
            await ws.send_json({"op": 2, "d": {"token": fake.token, "intents": intents}})
            first = await ws.receive()
            if first.type != aiohttp.WSMsgType.TEXT:
                closed = ws.close_code
                return
            await ws.receive_json()  # GUILD_CREATE
            await asyncio.get_running_loop().run_in_executor(None, act)
            try:
                while True:
                    got.append(await ws.receive_json(timeout=0.3))
            except TimeoutError:
                pass

    asyncio.run(run())
    return got, closed


def test_member_messages_follow_the_intents(fake: FakeDiscord) -> None:
    guilds, messages, content = 1, 1 << 9, 1 << 15
    fake.portal_message_content = True
    sent: list[dict[str, Any]] = []
    got, _ = _gateway_events(
        fake, guilds | messages | content, lambda: sent.append(fake.voice_message(ADA, 12.5))
    )
    [event] = [e for e in got if e.get("t") == "MESSAGE_CREATE"]
    voice = event["d"]
    assert voice["flags"] == 1 << 13 and voice["author"]["id"] == ADA.id
    [audio] = voice["attachments"]
    assert (audio["duration_secs"], audio["content_type"]) == (12.5, "audio/ogg")

    # Without the message-content intent: flags stay, the attachment is blanked (as Discord).
    got, _ = _gateway_events(
        fake, guilds | messages, lambda: sent.append(fake.member_message(ADA, "hello", flags=0))
    )
    [event] = [e for e in got if e.get("t") == "MESSAGE_CREATE"]
    assert event["d"]["content"] == "" and event["d"]["attachments"] == []
    got, _ = _gateway_events(fake, guilds | messages, lambda: fake.voice_message(ADA, 3))
    [event] = [e for e in got if e.get("t") == "MESSAGE_CREATE"]
    assert event["d"]["flags"] == 1 << 13 and event["d"]["attachments"] == []
    assert fake.messages[event["d"]["id"]]["attachments"]  # the member's message kept it
    # Without guild messages: no event at all.
    got, _ = _gateway_events(fake, guilds, lambda: fake.voice_message(ADA, 3))
    assert not [e for e in got if e.get("t") == "MESSAGE_CREATE"]

    # Asking for message content while the portal's toggle is off: closed with 4014.
    fake.portal_message_content = False
    _, closed = _gateway_events(fake, guilds | messages | content, lambda: None)
    assert closed == 4014


def test_mentions_resolve_as_discord_does(fake: FakeDiscord, api: httpx.Client) -> None:
    text = "<@&1> x, <@2>, <@!3> and @everyone"
    loud = _post(api, fake, {"content": text}).json()  # no allowed_mentions: all of it pings
    assert fake.pings(loud) == Pings(frozenset({"2", "3"}), frozenset({"1"}), True)
    quiet = _post(api, fake, {"content": text, "allowed_mentions": {"parse": []}}).json()
    assert not fake.pings(quiet) and quiet["content"] == text
    one = {"parse": [], "users": ["3"], "roles": ["1"]}
    some = _post(api, fake, {"content": text, "allowed_mentions": one}).json()
    assert fake.pings(some) == Pings(frozenset({"3"}), frozenset({"1"}), False)
    clash = _post(
        api, fake, {"content": text, "allowed_mentions": {"parse": ["users"], "users": ["2"]}}
    )
    assert clash.status_code == 400
    assert "MENTIONS_PARSE_MUTUALLY_EXCLUSIVE" in str(clash.json())
    escaped = _post(api, fake, {"content": "<@\u200b&1> x"}).json()
    assert not fake.pings(escaped)
    # a reply pings the replied-to author unless replied_user is false
    mine = fake.member_message(ADA, "hi")
    ref = {"message_id": mine["id"]}
    reply = _post(api, fake, {"content": "ok", "message_reference": ref}).json()
    assert fake.pings(reply).users == {ADA.id}
    no_ping = {"parse": [], "replied_user": False}
    reply = _post(
        api, fake, {"content": "ok", "message_reference": ref, "allowed_mentions": no_ping}
    ).json()
    assert not fake.pings(reply)
    assert [p.allowed_mentions for p in fake.message_payloads()][-1] == no_ping
    gone = api.delete(f"/channels/{fake.channel_ids[0]}/messages/{reply['id']}")
    assert gone.status_code == 204 and reply["id"] in fake.deleted
    again = api.delete(f"/channels/{fake.channel_ids[0]}/messages/{reply['id']}")
    assert again.status_code == 404 and again.json()["code"] == 10008
