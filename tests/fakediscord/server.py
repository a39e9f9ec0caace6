"""The fake Discord: aiohttp on 127.0.0.1, REST under /api/v10 and a gateway websocket at /gateway.

What it enforces, as Discord does (with Discord's error shapes):
- every REST call but interaction callbacks and webhooks needs `Authorization: Bot <token>` (401);
- a message's content is at most 2,000 characters, at most 10 embeds, each within Discord's
  embed limits (title 256, description 4,096, 25 fields of 256/1,024, footer 2,048, author 256,
  6,000 in all), at most 5 action rows of 5 buttons, custom ids of 1-100 characters: 400 with
  code 50035 "Invalid Form Body" and the offending field under `errors`;
- an interaction's first response must come within `interaction_deadline_s` (3 s) of the event,
  and only once: 404 code 10062 "Unknown interaction" / 400 code 40060 "already acknowledged";
- followups (/webhooks/{app}/{token}) need a first response and work for `followup_valid_s`
  (15 minutes): then 401 code 50027 "Invalid Webhook Token";
- `rate_limit(method, path_pattern, times, retry_after)`: the next matching calls get 429 with
  `retry_after` in the body and the Retry-After / X-RateLimit-* headers.
- with `discord_limits=True`, Discord's own limits as they stand: 50 requests a second for the
  bot across every route (interaction callbacks and webhooks are exempt, as on Discord), and 5
  messages per 5 s in each channel. Answers carry the bucket's X-RateLimit-* headers (which
  discord.py paces itself by); going over gets 429 with `retry_after` (and `global: true` for the
  first limit). `too_many` counts the 429s.

- a modal (callback type 9) has a title of 1-45 characters, 1-5 rows of one text input each,
  labels of 1-45 and placeholders of at most 100 characters; `submit_modal` sends it back
  filled in (type 5 MODAL_SUBMIT), as Discord does when the member presses Submit;
- attachments (multipart `files[n]`) are kept: `attachment(message, name)` gives their bytes;
- direct messages: POST /users/@me/channels opens a DM channel the bot can post to
  (`dm_messages(user_id)`), GET /users/{id} gives a user;
- mentions, as Discord resolves them: every message payload (a channel post, an interaction's
  message response or update, a followup, an edit) is kept in `payloads` with its
  `allowed_mentions` as sent; the message it makes carries who it pings in `mentions`,
  `mention_roles` and `mention_everyone` (no `allowed_mentions`: everything in the content
  pings, and a reply pings the replied-to author); `parse` together with an explicit `users` or
  `roles` list is refused with 400, as Discord does;
- DELETE /channels/{c}/messages/{m} removes a message (`deleted` lists them); 404 code 10008 for
  one that is not there.

Messages from members (`voice_message`, `member_message`) reach the bot as MESSAGE_CREATE only
when it asked for the guild-messages intent (1 << 9), and, as Discord does, with content,
attachments, embeds and components blanked unless it asked for the privileged message-content
intent (1 << 15); flags stay. A bot asking for message content while the developer portal's
toggle is off (`portal_message_content = False`, the default) is closed with 4014
"Disallowed intent(s)".

Gateway: HELLO, IDENTIFY (token checked: close 4004) -> READY then GUILD_CREATE with one guild
and its text channels, heartbeat ACK, RESUME -> RESUMED, and op 7 RECONNECT on request
(`ask_reconnect`). Tests inject INTERACTION_CREATE events
with `click` (a button on a message the fake stored) and `slash` (an application command).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

DISCORD_EPOCH_MS = 1420070400000
EPHEMERAL = 64
IS_VOICE_MESSAGE = 1 << 13
GUILD_MESSAGES = 1 << 9
MESSAGE_CONTENT = 1 << 15
ALL_PERMISSIONS = str((1 << 50) - 1)
BODY = web.RequestKey("body", object)
_MENTION = re.compile(r"<@!?(?P<user>[0-9]+)>|<@&(?P<role>[0-9]+)>|@(?P<all>everyone|here)")
MENTION_KINDS = ("users", "roles", "everyone")


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


@dataclass(frozen=True)
class User:
    id: str
    username: str = "student"
    bot: bool = False

    def payload(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "username": self.username,
            "global_name": self.username,
            "discriminator": "0",
            "avatar": None,
            "bot": self.bot,
            "public_flags": 0,
            "flags": 0,
        }


@dataclass
class Recorded:
    """One request the fake received, as it arrived, and what it answered."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    at: float  # time.monotonic() on arrival
    status: int = 0
    response: Any = None


@dataclass
class Interaction:
    id: str
    token: str
    created: float
    payload: dict[str, Any]
    responded_at: float | None = None
    response: dict[str, Any] | None = None
    followups: list[dict[str, Any]] = field(default_factory=list)
    message_id: str | None = None  # the message a type 4 or 5 response made


@dataclass
class RateLimit:
    method: str
    pattern: re.Pattern[str]
    times: int
    retry_after: float


@dataclass(frozen=True)
class Pings:
    """Whom a message notifies: user ids, role ids, and @everyone/@here."""

    users: frozenset[str] = frozenset()
    roles: frozenset[str] = frozenset()
    everyone: bool = False

    def __bool__(self) -> bool:
        return bool(self.users or self.roles or self.everyone)


@dataclass
class Payload:
    """One message payload the bot sent: how (`route`), the body as sent, the message it made."""

    route: str  # "channel", "callback", "followup", "edit", "edit-original"
    body: dict[str, Any]
    message_id: str | None = None

    @property
    def allowed_mentions(self) -> dict[str, Any] | None:
        value = self.body.get("allowed_mentions")
        return value if isinstance(value, dict) else None


def check_allowed_mentions(am: Any) -> dict[str, Any] | None:
    """Discord's refusal of an allowed_mentions object, or None when it is well formed."""
    if am is None:
        return None
    if not isinstance(am, dict):
        return form_error("allowed_mentions", "MODEL_TYPE_CONVERT", "Only dictionaries allowed")
    parse = am.get("parse") or []
    for kind in parse:
        if kind not in MENTION_KINDS:
            return form_error(
                "allowed_mentions.parse", "ENUM_TYPE_COERCE", f"Value {kind!r} is not valid."
            )
    for kind in ("users", "roles"):
        if kind in parse and am.get(kind):
            return form_error(
                "allowed_mentions",
                "MENTIONS_PARSE_MUTUALLY_EXCLUSIVE",
                f'parse:["{kind}"] and {kind}: [ids...] are mutually exclusive.',
            )
    return None


def pings_of(body: dict[str, Any], replied_author: str | None = None) -> Pings:
    """Whom Discord would notify for this message body (content, allowed_mentions, reply)."""
    content = str(body.get("content") or "")
    found_users: set[str] = set()
    found_roles: set[str] = set()
    found_all = False
    for match in _MENTION.finditer(content):
        if match["user"]:
            found_users.add(match["user"])
        elif match["role"]:
            found_roles.add(match["role"])
        else:
            found_all = True
    am = body.get("allowed_mentions")
    if not isinstance(am, dict):  # Discord's default: everything in the content pings
        users = found_users | ({replied_author} if replied_author else set())
        return Pings(frozenset(users), frozenset(found_roles), found_all)
    parse = set(am.get("parse") or [])
    users = {
        u for u in found_users if "users" in parse or u in {str(x) for x in am.get("users") or []}
    }
    if replied_author and am.get("replied_user"):
        users.add(replied_author)
    roles = {
        r for r in found_roles if "roles" in parse or r in {str(x) for x in am.get("roles") or []}
    }
    return Pings(frozenset(users), frozenset(roles), found_all and "everyone" in parse)


def form_error(path: str, code: str, message: str) -> dict[str, Any]:
    """Discord's 400 "Invalid Form Body" with one error at a dotted field path."""
    errors: dict[str, Any] = {"_errors": [{"code": code, "message": message}]}
    for part in reversed(path.split(".")):
        errors = {part: errors}
    return {"code": 50035, "errors": errors, "message": "Invalid Form Body"}


def check_message(body: dict[str, Any]) -> dict[str, Any] | None:
    """The first limit a message body breaks, as Discord's error payload; None when it is fine."""
    content = body.get("content")
    refused = check_allowed_mentions(body.get("allowed_mentions"))
    if refused is not None:
        return refused
    if content is not None and len(str(content)) > 2000:
        return form_error("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
    embeds = body.get("embeds") or []
    if len(embeds) > 10:
        return form_error("embeds", "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length.")
    total = 0
    for i, e in enumerate(embeds):
        limits = [("title", 256), ("description", 4096)]
        for key, most in limits:
            text = e.get(key) or ""
            total += len(text)
            if len(text) > most:
                return form_error(
                    f"embeds.{i}.{key}",
                    "BASE_TYPE_MAX_LENGTH",
                    f"Must be {most} or fewer in length.",
                )
        fields = e.get("fields") or []
        if len(fields) > 25:
            return form_error(
                f"embeds.{i}.fields", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length."
            )
        for j, f in enumerate(fields):
            for key, most in (("name", 256), ("value", 1024)):
                text = f.get(key) or ""
                total += len(text)
                if not text:
                    return form_error(
                        f"embeds.{i}.fields.{j}.{key}",
                        "BASE_TYPE_REQUIRED",
                        "This field is required",
                    )
                if len(text) > most:
                    return form_error(
                        f"embeds.{i}.fields.{j}.{key}",
                        "BASE_TYPE_MAX_LENGTH",
                        f"Must be {most} or fewer in length.",
                    )
        for key, sub, most in (("footer", "text", 2048), ("author", "name", 256)):
            text = (e.get(key) or {}).get(sub) or ""
            total += len(text)
            if len(text) > most:
                return form_error(
                    f"embeds.{i}.{key}.{sub}",
                    "BASE_TYPE_MAX_LENGTH",
                    f"Must be {most} or fewer in length.",
                )
    if total > 6000:
        return form_error(
            "embeds", "MAX_EMBED_SIZE_EXCEEDED", "Embed size exceeds maximum size of 6000"
        )
    rows = body.get("components") or []
    if len(rows) > 5:
        return form_error("components", "BASE_TYPE_MAX_LENGTH", "Must be 5 or fewer in length.")
    for i, row in enumerate(rows):
        items = row.get("components") or []
        if len(items) > 5:
            return form_error(
                f"components.{i}.components",
                "BASE_TYPE_MAX_LENGTH",
                "Must be 5 or fewer in length.",
            )
        for j, item in enumerate(items):
            cid = item.get("custom_id")
            if item.get("style") != 5 and (not cid or len(cid) > 100):
                return form_error(
                    f"components.{i}.components.{j}.custom_id",
                    "BASE_TYPE_BAD_LENGTH",
                    "Must be between 1 and 100 in length.",
                )
    if not content and not embeds and not rows and not body.get("_files"):
        return {"code": 50006, "message": "Cannot send an empty message"}
    return None


def _multipart(raw: bytes, ctype: str) -> dict[str, tuple[str, bytes]]:
    """A multipart body's parts: field name -> (file name or "", bytes)."""
    found = re.search(r'boundary="?([^";]+)"?', ctype)
    if not found:
        return {}
    out: dict[str, tuple[str, bytes]] = {}
    for part in raw.split(b"--" + found.group(1).encode()):
        head, sep, data = part.partition(b"\r\n\r\n")
        field = re.search(rb'\bname="([^"]*)"', head)
        if not sep or not field:
            continue
        filename = re.search(rb'filename="([^"]*)"', head)
        out[field.group(1).decode()] = (
            filename.group(1).decode() if filename else "",
            data.removesuffix(b"\r\n"),
        )
    return out


def check_modal(data: dict[str, Any]) -> dict[str, Any] | None:
    """The first limit a modal breaks, as Discord's error payload; None when it is fine."""
    title = data.get("title") or ""
    if not 1 <= len(title) <= 45:
        return form_error(
            "data.title", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 45 in length."
        )
    cid = data.get("custom_id") or ""
    if not 1 <= len(cid) <= 100:
        return form_error(
            "data.custom_id", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length."
        )
    rows = data.get("components") or []
    if not 1 <= len(rows) <= 5:
        return form_error(
            "data.components", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 5 in length."
        )
    for i, row in enumerate(rows):
        items = row.get("components") or []
        if len(items) != 1 or items[0].get("type") != 4:
            return form_error(
                f"data.components.{i}.components",
                "UNION_TYPE_CHOICES",
                'Value of field "type" must be one of (4,).',
            )
        item = items[0]
        if not 1 <= len(item.get("label") or "") <= 45:
            return form_error(
                f"data.components.{i}.components.0.label",
                "BASE_TYPE_BAD_LENGTH",
                "Must be between 1 and 45 in length.",
            )
        if len(item.get("placeholder") or "") > 100:
            return form_error(
                f"data.components.{i}.components.0.placeholder",
                "BASE_TYPE_MAX_LENGTH",
                "Must be 100 or fewer in length.",
            )
        if not 1 <= len(item.get("custom_id") or "") <= 100:
            return form_error(
                f"data.components.{i}.components.0.custom_id",
                "BASE_TYPE_BAD_LENGTH",
                "Must be between 1 and 100 in length.",
            )
    return None


def _json(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer with Discord's exact content type (discord.py compares it verbatim)."""
    return web.Response(
        body=json.dumps(payload).encode(),
        status=status,
        headers={**(headers or {}), "Content-Type": "application/json"},
    )


class FakeDiscord:
    """One application with one bot user in one guild; text channels by id."""

    def __init__(
        self,
        *,
        token: str = "fake-token",
        guild_id: str = "700000000000000001",
        channel_ids: tuple[str, ...] = ("700000000000000010",),
        interaction_deadline_s: float = 3.0,
        followup_valid_s: float = 15 * 60,
        heartbeat_interval_ms: int = 41250,
        discord_limits: bool = False,
    ) -> None:
        self.token = token
        self.app_id = "700000000000000100"
        self.bot = User(self.app_id, "felab-bot", bot=True)
        self.guild_id = guild_id
        self.channel_ids = channel_ids
        self.interaction_deadline_s = interaction_deadline_s
        self.followup_valid_s = followup_valid_s
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.requests: list[Recorded] = []
        self.payloads: list[Payload] = []  # every message payload the bot sent, as sent
        self.deleted: list[str] = []  # ids of messages deleted through the API
        self.messages: dict[str, dict[str, Any]] = {}
        self.interactions: dict[str, Interaction] = {}
        self.commands: dict[str, list[dict[str, Any]]] = {}  # "global" or guild id -> commands
        self.files: dict[str, dict[str, bytes]] = {}  # message id -> filename -> bytes
        self.dms: dict[str, str] = {}  # DM channel id -> user id
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.heartbeats = 0
        self.portal_message_content = False  # the developer portal's privileged-intent toggle
        self.rate_limits: list[RateLimit] = []
        self.discord_limits = discord_limits
        self.too_many = 0  # 429s answered under discord_limits
        self._windows: dict[str, tuple[float, int]] = {}  # bucket -> (window start, used)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._sockets: list[web.WebSocketResponse] = []
        self._seq = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    def start(self) -> FakeDiscord:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # pragma: no cover - reported to start()
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=run, name="fakediscord", daemon=True)
        self._thread.start()
        if not ready.wait(10) or errors:
            raise RuntimeError(f"the fake Discord did not start: {errors}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None

    async def _serve(self) -> None:
        app = web.Application(middlewares=[self._record])
        app.router.add_get("/gateway", self._gateway)
        api = "/api/v{v:[0-9]+}"
        r = app.router
        r.add_get(f"{api}/users/@me", self._me)
        r.add_get(f"{api}/gateway/bot", self._gateway_bot)
        r.add_get(f"{api}/gateway", self._gateway_plain)
        r.add_get(f"{api}/oauth2/applications/@me", self._application)
        r.add_put(f"{api}/applications/{{app}}/commands", self._put_commands)
        r.add_put(f"{api}/applications/{{app}}/guilds/{{guild}}/commands", self._put_commands)
        r.add_get(f"{api}/applications/{{app}}/commands", self._get_commands)
        r.add_get(f"{api}/applications/{{app}}/guilds/{{guild}}/commands", self._get_commands)
        r.add_get(f"{api}/users/{{user:[0-9]+}}", self._get_user)
        r.add_post(f"{api}/users/@me/channels", self._open_dm)
        r.add_get(f"{api}/channels/{{channel}}", self._get_channel)
        r.add_post(f"{api}/channels/{{channel}}/messages", self._post_message)
        r.add_get(f"{api}/channels/{{channel}}/messages/{{message}}", self._get_message)
        r.add_patch(f"{api}/channels/{{channel}}/messages/{{message}}", self._edit_message)
        r.add_delete(f"{api}/channels/{{channel}}/messages/{{message}}", self._delete_message)
        r.add_post(f"{api}/interactions/{{iid}}/{{token}}/callback", self._callback)
        r.add_post(f"{api}/webhooks/{{app}}/{{token}}", self._followup)
        r.add_patch(f"{api}/webhooks/{{app}}/{{token}}/messages/{{message}}", self._edit_original)
        r.add_route("*", f"{api}/{{tail:.*}}", self._unknown)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def _shutdown(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------------ test-side helpers

    def snowflake(self) -> str:
        ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
        return str((ms << 22) | (next(self._ids) & 0x3FFFFF))

    def recorded(self, method: str | None = None, pattern: str | None = None) -> list[Recorded]:
        """Requests so far, optionally those of one method whose path matches a regex."""
        with self._lock:
            out = list(self.requests)
        return [
            r
            for r in out
            if (method is None or r.method == method)
            and (pattern is None or re.search(pattern, r.path))
        ]

    def message_payloads(self) -> list[Payload]:
        """Every message payload the bot has sent so far (posts, responses, followups, edits)."""
        with self._lock:
            return list(self.payloads)

    @staticmethod
    def pings(message: dict[str, Any]) -> Pings:
        """Whom a stored message notified (as the fake resolved it when it was sent)."""
        return Pings(
            frozenset(u["id"] for u in message.get("mentions") or []),
            frozenset(message.get("mention_roles") or []),
            bool(message.get("mention_everyone")),
        )

    def channel_messages(self, channel_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [
                m
                for m in self.messages.values()
                if m["channel_id"] == channel_id and not m["flags"] & EPHEMERAL
            ]

    def dm_messages(self, user_id: str) -> list[dict[str, Any]]:
        """What the bot sent to one user in a direct message."""
        with self._lock:
            channels = {c for c, u in self.dms.items() if u == user_id}
            return [m for m in self.messages.values() if m["channel_id"] in channels]

    def attachment(self, message: dict[str, Any], name: str) -> bytes:
        with self._lock:
            return self.files[message["id"]][name]

    def submit_modal(self, it: Interaction, values: dict[str, str], user: User) -> Interaction:
        """Press Submit on the modal the bot answered `it` with, its inputs filled by custom id."""
        if it.response is None or it.response.get("type") != 9:
            raise AssertionError("the bot did not answer with a modal")
        modal = it.response["data"]
        rows = []
        for row in modal["components"]:
            item = row["components"][0]
            cid = item["custom_id"]
            rows.append(
                {
                    "type": 1,
                    "components": [{"type": 4, "custom_id": cid, "value": values.get(cid, "")}],
                }
            )
        data = {"custom_id": modal["custom_id"], "components": rows}
        return self._interact(5, data, user, it.payload["channel_id"])

    def wait_for(self, pred: Callable[[], Any], timeout: float, what: str = "") -> Any:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = pred()
            if value:
                return value
            time.sleep(0.02)
        raise AssertionError(f"timed out after {timeout} s waiting for {what or pred}")

    def rate_limit(
        self, method: str, path_pattern: str, *, times: int = 1, retry_after: float = 0.3
    ) -> None:
        """Answer the next `times` matching requests with 429 and `retry_after` seconds."""
        with self._lock:
            self.rate_limits.append(RateLimit(method, re.compile(path_pattern), times, retry_after))

    def connected(self) -> bool:
        return any(not ws.closed for ws in self._sockets) and bool(self.identifies)

    def ask_reconnect(self) -> None:
        """Send op 7 RECONNECT, as Discord does before moving a session: the bot should come
        back and RESUME."""
        assert self._loop is not None

        async def send() -> None:
            for ws in [w for w in self._sockets if not w.closed]:
                await ws.send_str(json.dumps({"op": 7, "d": None}))

        asyncio.run_coroutine_threadsafe(send(), self._loop).result(5)

    def intents(self) -> int:
        """The intents the connected bot asked for in its last IDENTIFY."""
        return int(self.identifies[-1].get("intents") or 0) if self.identifies else 0

    def member_message(
        self,
        user: User,
        content: str = "",
        *,
        attachments: list[dict[str, Any]] | None = None,
        flags: int = 0,
        channel_id: str | None = None,
    ) -> dict[str, Any]:
        """A member posts in a channel: stored whole, sent to the bot as MESSAGE_CREATE as
        Discord would (nothing without the guild-messages intent; content and attachments
        blanked without the message-content intent)."""
        cid = channel_id or self.channel_ids[0]
        msg = self._message_payload(cid, {"content": content, "flags": flags}, author=user)
        msg["attachments"] = attachments or []
        with self._lock:
            self.messages[msg["id"]] = msg
        intents = self.intents()
        if intents & GUILD_MESSAGES:
            event = {**json.loads(json.dumps(msg)), "member": self._member_payload(user)}
            del event["member"]["user"]
            if not intents & MESSAGE_CONTENT:
                event.update(content="", attachments=[], embeds=[], components=[])
            self._dispatch_threadsafe("MESSAGE_CREATE", event)
        return msg

    def voice_message(
        self, user: User, seconds: float, *, channel_id: str | None = None
    ) -> dict[str, Any]:
        """A Discord voice message: flag IS_VOICE_MESSAGE, one audio/ogg attachment with
        `duration_secs` and a waveform, no content."""
        audio = {
            "id": self.snowflake(),
            "filename": "voice-message.ogg",
            "size": 12345,
            "url": "https://cdn.invalid/attachments/voice-message.ogg",
            "proxy_url": "https://media.invalid/attachments/voice-message.ogg",
            "content_type": "audio/ogg",
            "duration_secs": seconds,
            "waveform": "AAAAAAAAAAAA",
            "flags": 0,
        }
        return self.member_message(
            user, attachments=[audio], flags=IS_VOICE_MESSAGE, channel_id=channel_id
        )

    def replies_to(self, message_id: str) -> list[dict[str, Any]]:
        """The bot's messages that reply to one message."""
        with self._lock:
            return [
                m
                for m in self.messages.values()
                if str((m.get("message_reference") or {}).get("message_id")) == message_id
            ]

    def click(self, message_id: str, custom_id: str, user: User) -> Interaction:
        """A button press on a stored message, sent to the bot as INTERACTION_CREATE."""
        with self._lock:
            message = json.loads(json.dumps(self.messages[message_id]))
        found = any(
            c.get("custom_id") == custom_id
            for row in message.get("components") or []
            for c in row.get("components") or []
        )
        if not found:
            raise AssertionError(f"message {message_id} has no button {custom_id!r}")
        data = {"custom_id": custom_id, "component_type": 2}
        return self._interact(3, data, user, message["channel_id"], message=message)

    def click_burst(self, clicks: list[tuple[str, str, User]]) -> list[Interaction]:
        """Many button presses at once (message id, custom id, user each): every interaction is
        made first, then all events go out back to back in one go, as a busy channel does."""
        made = []
        for message_id, custom_id, user in clicks:
            with self._lock:
                message = json.loads(json.dumps(self.messages[message_id]))
            data = {"custom_id": custom_id, "component_type": 2}
            made.append(
                self._interact(3, data, user, message["channel_id"], message=message, send=False)
            )
        assert self._loop is not None

        async def send_all() -> None:
            live = [ws for ws in self._sockets if not ws.closed]
            if not live:
                raise AssertionError("no bot is connected to the fake gateway")
            for it in made:
                it.created = time.monotonic()  # the moment its event leaves
                self._seq += 1
                frame = {"op": 0, "t": "INTERACTION_CREATE", "s": self._seq, "d": it.payload}
                await live[-1].send_str(json.dumps(frame))

        asyncio.run_coroutine_threadsafe(send_all(), self._loop).result(30)
        return made

    def slash(
        self,
        name: str,
        user: User,
        *,
        options: list[dict[str, Any]] | None = None,
        channel_id: str | None = None,
        autocomplete: bool = False,
    ) -> Interaction:
        """An application (slash) command, as a member in the guild would send it; with
        `autocomplete`, the question Discord asks while they type (the option being typed
        carries `"focused": true`; the answer is a type 8 callback with choices)."""
        with self._lock:
            known = [
                c
                for scope in (self.guild_id, "global")
                for c in self.commands.get(scope, [])
                if c["name"] == name
            ]
        if not known:
            raise AssertionError(f"/{name} was never synced: Discord would not offer it")
        data: dict[str, Any] = {
            "id": known[0]["id"],
            "name": name,
            "type": 1,
            "guild_id": self.guild_id,
            "options": options or [],
        }
        # As Discord does: the users, channels and roles options name come resolved with it.
        resolved: dict[str, Any] = {}
        users = self._options_of(options or [], 6)
        if users:
            members = {}
            for uid in users:
                member = self._member_payload(User(uid, "member"))
                del member["user"]
                members[uid] = member
            resolved["users"] = {uid: User(uid, "member").payload() for uid in users}
            resolved["members"] = members
        channels = self._options_of(options or [], 7)
        if channels:
            resolved["channels"] = {
                cid: {**self._channel_payload(cid), "permissions": ALL_PERMISSIONS}
                for cid in channels
            }
        roles = self._options_of(options or [], 8)
        if roles:
            resolved["roles"] = {rid: self._role_payload(rid) for rid in roles}
        if resolved:
            data["resolved"] = resolved
        return self._interact(
            4 if autocomplete else 2, data, user, channel_id or self.channel_ids[0]
        )

    def _options_of(self, options: list[dict[str, Any]], kind: int) -> list[str]:
        """The ids named by options of one type (6 user, 7 channel, 8 role), sub-commands
        included."""
        out = []
        for o in options:
            if o.get("type") == kind:
                out.append(str(o["value"]))
            out.extend(self._options_of(o.get("options") or [], kind))
        return out

    def _role_payload(self, role_id: str) -> dict[str, Any]:
        everyone = role_id == self.guild_id
        return {
            "id": role_id,
            "name": "@everyone" if everyone else f"role-{role_id[-4:]}",
            "color": 0,
            "hoist": False,
            "position": 0 if everyone else 1,
            "permissions": "0",
            "managed": False,
            "mentionable": True,
            "flags": 0,
        }

    def _interact(
        self,
        kind: int,
        data: dict[str, Any],
        user: User,
        channel_id: str,
        *,
        message: dict[str, Any] | None = None,
        send: bool = True,
    ) -> Interaction:
        iid = self.snowflake()
        token = "aW50ZXJhY3Rpb24" + secrets.token_urlsafe(24)
        payload: dict[str, Any] = {
            "id": iid,
            "application_id": self.app_id,
            "type": kind,
            "token": token,
            "version": 1,
            "guild_id": self.guild_id,
            "channel_id": channel_id,
            "channel": self._channel_payload(channel_id),
            "member": self._member_payload(user),
            "data": data,
            "app_permissions": ALL_PERMISSIONS,
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": self.guild_id},
            "context": 0,
            "attachment_size_limit": 10 * 1024 * 1024,
        }
        if message is not None:
            payload["message"] = message
        it = Interaction(iid, token, time.monotonic(), payload)
        with self._lock:
            self.interactions[iid] = it
        if send:
            self._dispatch_threadsafe("INTERACTION_CREATE", payload)
        return it

    def _dispatch_threadsafe(self, event: str, data: dict[str, Any]) -> None:
        assert self._loop is not None
        fut = asyncio.run_coroutine_threadsafe(self._dispatch(event, data), self._loop)
        fut.result(5)

    async def _dispatch(self, event: str, data: dict[str, Any]) -> None:
        live = [ws for ws in self._sockets if not ws.closed]
        if not live:
            raise AssertionError("no bot is connected to the fake gateway")
        self._seq += 1
        await live[-1].send_str(json.dumps({"op": 0, "t": event, "s": self._seq, "d": data}))

    # ------------------------------------------------------------------ payloads

    def _channel_payload(self, channel_id: str) -> dict[str, Any]:
        return {
            "id": channel_id,
            "type": 0,
            "guild_id": self.guild_id,
            "name": f"channel-{channel_id[-4:]}",
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "flags": 0,
        }

    def _member_payload(self, user: User) -> dict[str, Any]:
        return {
            "user": user.payload(),
            "roles": [],
            "joined_at": _now_iso(),
            "deaf": False,
            "mute": False,
            "flags": 0,
            "nick": None,
            "avatar": None,
            "pending": False,
            "permissions": ALL_PERMISSIONS,
        }

    def _guild_payload(self) -> dict[str, Any]:
        return {
            "id": self.guild_id,
            "name": "felab test guild",
            "icon": None,
            "splash": None,
            "discovery_splash": None,
            "owner_id": "1",
            "afk_channel_id": None,
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "roles": [
                {
                    "id": self.guild_id,
                    "name": "@everyone",
                    "color": 0,
                    "hoist": False,
                    "position": 0,
                    "permissions": "1071698660929",
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "emojis": [],
            "stickers": [],
            "features": [],
            "mfa_level": 0,
            "system_channel_id": None,
            "system_channel_flags": 0,
            "rules_channel_id": None,
            "vanity_url_code": None,
            "description": None,
            "banner": None,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "public_updates_channel_id": None,
            "nsfw_level": 0,
            "premium_progress_bar_enabled": False,
            "joined_at": _now_iso(),
            "large": False,
            "unavailable": False,
            "member_count": 2,
            "voice_states": [],
            "members": [self._member_payload(self.bot)],
            "channels": [self._channel_payload(c) for c in self.channel_ids],
            "threads": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }

    def _message_payload(
        self, channel_id: str, body: dict[str, Any], *, author: User | None = None
    ) -> dict[str, Any]:
        msg = self._plain_message(channel_id, body, author=author)
        ref = body.get("message_reference")
        replied_author = None
        if ref:  # as Discord fills it in; absent when the message replies to nothing
            msg["message_reference"] = {
                "type": 0,
                "channel_id": channel_id,
                "guild_id": self.guild_id,
                **{k: v for k, v in ref.items() if v is not None},
            }
            with self._lock:
                replied = self.messages.get(str(ref.get("message_id")))
            replied_author = replied["author"]["id"] if replied else None
        if author is None:  # the bot's message: who it notifies, as Discord resolves it
            self._set_mentions(msg, pings_of(body, replied_author))
        return msg

    def _set_mentions(self, msg: dict[str, Any], pinged: Pings) -> None:
        msg["mentions"] = [User(u, "member").payload() for u in sorted(pinged.users)]
        msg["mention_roles"] = sorted(pinged.roles)
        msg["mention_everyone"] = pinged.everyone

    def _plain_message(
        self, channel_id: str, body: dict[str, Any], *, author: User | None = None
    ) -> dict[str, Any]:
        return {
            "id": self.snowflake(),
            "channel_id": channel_id,
            "guild_id": self.guild_id,
            "type": 0,
            "content": body.get("content") or "",
            "author": (author or self.bot).payload(),
            "attachments": [
                {
                    "id": str(i + 1),
                    "filename": name,
                    "size": len(data),
                    "url": f"https://cdn.invalid/{name}",
                    "proxy_url": f"https://cdn.invalid/{name}",
                }
                for i, (name, data) in enumerate((body.get("_files") or {}).items())
            ],
            "embeds": body.get("embeds") or [],
            "mentions": [],
            "mention_roles": [],
            "mention_everyone": False,
            "pinned": False,
            "tts": bool(body.get("tts")),
            "timestamp": _now_iso(),
            "edited_timestamp": None,
            "flags": int(body.get("flags") or 0),
            "components": body.get("components") or [],
            # Not Discord's (it never echoes this): what the bot asked for, for tests to check.
            "_allowed_mentions": body.get("allowed_mentions"),
        }

    # ------------------------------------------------------------------ REST

    @web.middleware
    async def _record(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        if request.path == "/gateway":
            resp: web.StreamResponse = await handler(request)
            return resp
        raw = await request.read()
        body: Any = None
        if raw:
            ctype = request.headers.get("Content-Type", "")
            if ctype.startswith("application/json"):
                body = json.loads(raw)
            elif ctype.startswith("multipart/form-data"):
                parts = _multipart(raw, ctype)
                body = {"_multipart": raw.decode(errors="replace")}
                if "payload_json" in parts:
                    body = json.loads(parts["payload_json"][1])
                body["_files"] = {
                    name: data for field, (name, data) in parts.items() if name and field != ""
                }
            else:
                body = raw.decode(errors="replace")
        rec = Recorded(request.method, request.path, dict(request.query), body, time.monotonic())
        with self._lock:
            self.requests.append(rec)
            limit = next(
                (
                    rl
                    for rl in self.rate_limits
                    if rl.times > 0
                    and rl.method == request.method
                    and rl.pattern.search(request.path)
                ),
                None,
            )
            if limit is not None:
                limit.times -= 1
        if limit is not None:
            payload = {
                "message": "You are being rate limited.",
                "retry_after": limit.retry_after,
                "global": False,
            }
            rec.status, rec.response = 429, payload
            return _json(
                payload,
                status=429,
                headers={
                    "Retry-After": str(max(1, round(limit.retry_after))),
                    "X-RateLimit-Limit": "5",
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset-After": str(limit.retry_after),
                    "X-RateLimit-Reset": str(time.time() + limit.retry_after),
                    "X-RateLimit-Bucket": "fakebucket",
                    "X-RateLimit-Scope": "user",
                },
            )
        open_route = "/interactions/" in request.path or "/webhooks/" in request.path
        bucket_headers: dict[str, str] = {}
        if self.discord_limits and not open_route:
            over, bucket_headers = self._spend(request.method, request.path)
            if over is not None:
                rec.status, rec.response = 429, over[0]
                return _json(over[0], status=429, headers=over[1])
        if not open_route and request.headers.get("Authorization") != f"Bot {self.token}":
            payload = {"message": "401: Unauthorized", "code": 0}
            rec.status, rec.response = 401, payload
            return _json(payload, status=401)
        request[BODY] = body
        resp = await handler(request)
        resp.headers.update(bucket_headers)
        rec.status = resp.status
        if isinstance(resp, web.Response) and resp.body is not None and resp.status != 204:
            try:
                rec.response = json.loads(resp.body)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                rec.response = None
        return resp

    #: Discord's limits: the bot's global one, and message creation per channel.
    GLOBAL_PER_S = 50
    CHANNEL_MESSAGES = (5, 5.0)

    def _spend(
        self, method: str, path: str
    ) -> tuple[tuple[dict[str, Any], dict[str, str]] | None, dict[str, str]]:
        """Count one request against the global window and, for a message to a channel, the
        channel's bucket: (the 429 to answer or None, the bucket's headers for a success)."""
        now = time.monotonic()
        channel = re.fullmatch(r"/api/v10/channels/(\d+)/messages", path)
        limits: list[tuple[str, int, float]] = [("global", self.GLOBAL_PER_S, 1.0)]
        if method == "POST" and channel:
            limits.append((f"messages:{channel.group(1)}", *self.CHANNEL_MESSAGES))
        headers: dict[str, str] = {}
        with self._lock:
            state = []
            for name, limit, per in limits:
                start, used = self._windows.get(name, (now, 0))
                if now - start >= per:
                    start, used = now, 0
                state.append((name, limit, per, start, used))
            for name, limit, per, start, used in state:
                if used >= limit:
                    self.too_many += 1
                    wait = round(start + per - now, 3)
                    scope = "global" if name == "global" else "user"
                    body = {
                        "message": "You are being rate limited.",
                        "retry_after": wait,
                        "global": name == "global",
                    }
                    out = {
                        "Retry-After": str(max(1, round(wait))),
                        "X-RateLimit-Scope": scope,
                        "Via": "1.1 google",  # Discord's 429s come through its proxy
                    }
                    if name == "global":
                        out["X-RateLimit-Global"] = "true"
                    else:
                        out.update(self._bucket_headers(name, limit, 0, wait))
                    return (body, out), {}
            for name, limit, per, start, used in state:
                self._windows[name] = (start, used + 1)
                if name != "global":
                    headers = self._bucket_headers(name, limit, limit - used - 1, start + per - now)
        return None, headers

    @staticmethod
    def _bucket_headers(
        name: str, limit: int, remaining: int, reset_after: float
    ) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset-After": f"{max(0.0, reset_after):.3f}",
            "X-RateLimit-Reset": f"{time.time() + max(0.0, reset_after):.3f}",
            "X-RateLimit-Bucket": name.split(":")[0],
        }

    def _error(self, status: int, payload: dict[str, Any]) -> web.Response:
        return _json(payload, status=status)

    async def _me(self, request: web.Request) -> web.Response:
        return _json({**self.bot.payload(), "verified": True, "mfa_enabled": False})

    async def _gateway_bot(self, request: web.Request) -> web.Response:
        return _json(
            {
                "url": self.gateway_url,
                "shards": 1,
                "session_start_limit": {
                    "total": 1000,
                    "remaining": 999,
                    "reset_after": 0,
                    "max_concurrency": 1,
                },
            }
        )

    async def _gateway_plain(self, request: web.Request) -> web.Response:
        return _json({"url": self.gateway_url})

    async def _application(self, request: web.Request) -> web.Response:
        return _json(
            {
                "id": self.app_id,
                "name": "felab",
                "icon": None,
                "description": "",
                "bot_public": False,
                "bot_require_code_grant": False,
                "owner": User("1", "owner").payload(),
                "team": None,
                "verify_key": "00" * 32,
                "flags": 0,
                "summary": "",
                "interactions_endpoint_url": None,
                "rpc_origins": [],
                "tags": [],
            }
        )

    async def _put_commands(self, request: web.Request) -> web.Response:
        if request.match_info["app"] != self.app_id:
            return self._error(404, {"message": "Unknown Application", "code": 10002})
        scope = request.match_info.get("guild", "global")
        if scope != "global" and scope != self.guild_id:
            return self._error(403, {"message": "Missing Access", "code": 50001})
        out = []
        for cmd in request[BODY] or []:
            row = {
                "id": self.snowflake(),
                "application_id": self.app_id,
                "version": self.snowflake(),
                "type": cmd.get("type", 1),
                "name": cmd["name"],
                "description": cmd.get("description", ""),
                "options": cmd.get("options", []),
                "default_member_permissions": cmd.get("default_member_permissions"),
                "nsfw": cmd.get("nsfw", False),
                "contexts": cmd.get("contexts"),
                "integration_types": cmd.get("integration_types", [0]),
            }
            if scope != "global":
                row["guild_id"] = scope
            out.append(row)
        with self._lock:
            self.commands[scope] = out
        return _json(out)

    async def _get_commands(self, request: web.Request) -> web.Response:
        scope = request.match_info.get("guild", "global")
        with self._lock:
            return _json(self.commands.get(scope, []))

    async def _get_user(self, request: web.Request) -> web.Response:
        return _json(User(request.match_info["user"], "member").payload())

    async def _open_dm(self, request: web.Request) -> web.Response:
        user_id = str((request[BODY] or {}).get("recipient_id") or "")
        if not user_id.isdigit():
            return self._error(400, form_error("recipient_id", "NUMBER_TYPE_COERCE", "bad id"))
        with self._lock:
            cid = next((c for c, u in self.dms.items() if u == user_id), None)
            if cid is None:
                cid = self.snowflake()
                self.dms[cid] = user_id
        return _json(
            {
                "id": cid,
                "type": 1,
                "last_message_id": None,
                "recipients": [User(user_id, "member").payload()],
            }
        )

    async def _get_channel(self, request: web.Request) -> web.Response:
        cid = request.match_info["channel"]
        if cid not in self.channel_ids:
            return self._error(404, {"message": "Unknown Channel", "code": 10003})
        return _json(self._channel_payload(cid))

    async def _post_message(self, request: web.Request) -> web.Response:
        cid = request.match_info["channel"]
        if cid not in self.channel_ids and cid not in self.dms:
            return self._error(404, {"message": "Unknown Channel", "code": 10003})
        body = request[BODY] or {}
        problem = check_message(body)
        if problem is not None:
            return self._error(400, problem)
        msg = self._message_payload(cid, body)
        with self._lock:
            self.messages[msg["id"]] = msg
            self.files[msg["id"]] = dict(body.get("_files") or {})
            self.payloads.append(Payload("channel", body, msg["id"]))
        return _json(msg)

    async def _delete_message(self, request: web.Request) -> web.Response:
        mid = request.match_info["message"]
        with self._lock:
            msg = self.messages.get(mid)
            if msg is None or msg["channel_id"] != request.match_info["channel"]:
                return self._error(404, {"message": "Unknown Message", "code": 10008})
            del self.messages[mid]
            self.deleted.append(mid)
        return web.Response(status=204)

    async def _get_message(self, request: web.Request) -> web.Response:
        with self._lock:
            msg = self.messages.get(request.match_info["message"])
        if msg is None:
            return self._error(404, {"message": "Unknown Message", "code": 10008})
        return _json(msg)

    async def _edit_message(self, request: web.Request) -> web.Response:
        body = request[BODY] or {}
        with self._lock:
            msg = self.messages.get(request.match_info["message"])
        if msg is None:
            return self._error(404, {"message": "Unknown Message", "code": 10008})
        merged = {
            **msg,
            **{k: v for k, v in body.items() if k in ("content", "embeds", "components")},
        }
        problem = check_message({**merged, "allowed_mentions": body.get("allowed_mentions")})
        if problem is not None:
            return self._error(400, problem)
        merged["edited_timestamp"] = _now_iso()
        if "content" in body:
            self._set_mentions(merged, pings_of(body))
        with self._lock:
            self.messages[msg["id"]] = merged
            self.payloads.append(Payload("edit", body, msg["id"]))
        return _json(merged)

    async def _callback(self, request: web.Request) -> web.Response:
        now = time.monotonic()
        with self._lock:
            it = self.interactions.get(request.match_info["iid"])
        if it is None or it.token != request.match_info["token"]:
            return self._error(404, {"message": "Unknown interaction", "code": 10062})
        if it.responded_at is not None:
            return self._error(
                400, {"message": "Interaction has already been acknowledged.", "code": 40060}
            )
        if now - it.created > self.interaction_deadline_s:
            return self._error(404, {"message": "Unknown interaction", "code": 10062})
        body = request[BODY] or {}
        kind = body.get("type")
        data = body.get("data") or {}
        if kind in (4, 7):
            problem = check_message({**data, "_files": body.get("_files")})
            if problem is not None:
                return self._error(400, problem)
        if kind == 9:
            if it.payload["type"] == 5:  # a modal cannot answer a modal
                return self._error(
                    400, {"message": "Interaction has already been acknowledged.", "code": 40060}
                )
            problem = check_modal(data)
            if problem is not None:
                return self._error(400, problem)
        it.responded_at, it.response = now, body
        result: dict[str, Any] = {
            "interaction": {
                "id": it.id,
                "type": it.payload["type"],
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(int(data.get("flags") or 0) & EPHEMERAL),
            }
        }
        if kind in (4, 5):
            files = dict(body.get("_files") or {})
            msg = self._message_payload(it.payload["channel_id"], {**data, "_files": files})
            with self._lock:
                self.files[msg["id"]] = files
            msg["interaction_metadata"] = {
                "id": it.id,
                "type": it.payload["type"],
                "user": it.payload["member"]["user"],
                "authorizing_integration_owners": it.payload["authorizing_integration_owners"],
            }
            msg["webhook_id"] = self.app_id
            msg["application_id"] = self.app_id
            with self._lock:
                self.messages[msg["id"]] = msg
            it.message_id = msg["id"]
            result["interaction"]["response_message_id"] = msg["id"]
            result["resource"] = {"type": kind, "message": msg}
            if kind == 4:
                with self._lock:
                    self.payloads.append(Payload("callback", data, msg["id"]))
        elif kind == 7 and "message" in it.payload:
            mid = it.payload["message"]["id"]
            with self._lock:
                old = self.messages[mid]
                self.messages[mid] = {**old, **data, "edited_timestamp": _now_iso()}
                msg = self.messages[mid]
                if "content" in data:
                    self._set_mentions(msg, pings_of(data))
                self.payloads.append(Payload("callback", data, mid))
            result["interaction"]["response_message_id"] = mid
            result["resource"] = {"type": kind, "message": msg}
        if request.query.get("with_response") in ("1", "true", "True"):
            return _json(result)
        return web.Response(status=204)

    def _webhook_interaction(self, request: web.Request) -> Interaction | web.Response:
        token = request.match_info["token"]
        if request.match_info["app"] != self.app_id:
            return self._error(404, {"message": "Unknown Webhook", "code": 10015})
        with self._lock:
            it = next((i for i in self.interactions.values() if i.token == token), None)
        if it is None or time.monotonic() - it.created > self.followup_valid_s:
            return self._error(401, {"message": "Invalid Webhook Token", "code": 50027})
        if it.responded_at is None:
            return self._error(404, {"message": "Unknown Webhook", "code": 10015})
        return it

    async def _followup(self, request: web.Request) -> web.Response:
        it = self._webhook_interaction(request)
        if isinstance(it, web.Response):
            return it
        body = request[BODY] or {}
        problem = check_message(body)
        if problem is not None:
            return self._error(400, problem)
        msg = self._message_payload(it.payload["channel_id"], body)
        with self._lock:
            self.messages[msg["id"]] = msg
            self.files[msg["id"]] = dict(body.get("_files") or {})
            it.followups.append(msg)
            self.payloads.append(Payload("followup", body, msg["id"]))
        return _json(msg)

    async def _edit_original(self, request: web.Request) -> web.Response:
        it = self._webhook_interaction(request)
        if isinstance(it, web.Response):
            return it
        body = request[BODY] or {}
        problem = check_message(body)
        if problem is not None:
            return self._error(400, problem)
        msg = self._message_payload(it.payload["channel_id"], body)
        with self._lock:
            it.followups.append(msg)
            self.payloads.append(Payload("edit-original", body, msg["id"]))
        return _json(msg)

    async def _unknown(self, request: web.Request) -> web.Response:
        return self._error(404, {"message": "404: Not Found", "code": 0})

    # ------------------------------------------------------------------ gateway

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_str(
            json.dumps({"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms}})
        )
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            frame = json.loads(msg.data)
            op = frame.get("op")
            if op == 1:
                self.heartbeats += 1
                await ws.send_str(json.dumps({"op": 11}))
            elif op == 2:
                if frame["d"].get("token") != self.token:
                    await ws.close(code=4004, message=b"Authentication failed.")
                    break
                if int(frame["d"].get("intents") or 0) & MESSAGE_CONTENT and not (
                    self.portal_message_content
                ):
                    await ws.close(code=4014, message=b"Disallowed intent(s).")
                    break
                self.identifies.append(frame["d"])
                self._seq += 1
                ready = {
                    "v": 10,
                    "user": {**self.bot.payload(), "verified": True, "mfa_enabled": False},
                    "guilds": [{"id": self.guild_id, "unavailable": True}],
                    "session_id": secrets.token_hex(16),
                    "resume_gateway_url": self.gateway_url,
                    "shard": [0, 1],
                    "application": {"id": self.app_id, "flags": 0},
                    "private_channels": [],
                    "relationships": [],
                }
                await ws.send_str(json.dumps({"op": 0, "t": "READY", "s": self._seq, "d": ready}))
                self._seq += 1
                await ws.send_str(
                    json.dumps(
                        {"op": 0, "t": "GUILD_CREATE", "s": self._seq, "d": self._guild_payload()}
                    )
                )
            elif op == 6:
                if frame["d"].get("token") != self.token:
                    await ws.close(code=4004, message=b"Authentication failed.")
                    break
                self.resumes.append(frame["d"])
                self._seq += 1
                await ws.send_str(json.dumps({"op": 0, "t": "RESUMED", "s": self._seq, "d": {}}))
        return ws
