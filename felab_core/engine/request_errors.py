"""What went wrong with one request, in words a person can act on: a server's error status
with its own words and what the status usually means, a connection that failed, a stream that
broke. Apart from client.py, which sends the request and stamps what came back.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import json
import re
from collections.abc import Iterable
from typing import Protocol
from urllib.parse import urlsplit

import httpx

from felab_core.engine.apis import ADAPTERS, Api, StreamProtocolError
from felab_core.engine.server_kinds import ServerKind
from felab_core.engine.stream_shape import shown_text
from felab_core.engine.timeline import RequestTimeline
from felab_core.redact import url_without_credentials


class Waits(Protocol):
    """How long a request may wait (client.ClientLimits), as its errors say them."""

    @property
    def connect(self) -> float: ...
    @property
    def stall(self) -> float: ...
    @property
    def total(self) -> float: ...


#: What a status usually means for a benchmark, after the server's own words.
_STATUS_ADVICE = {
    401: "the server wants an API key (vLLM and SGLang --api-key); felab sends none: time a "
    "server started without one",
    403: "the server refused this client (an API key, or an address it does not allow)",
    429: "the server (or a gateway) limits requests: lower -c or --rate",
    502: "a proxy or gateway in front of the server got no good answer from it: is the server "
    "behind it up?",
    503: "the server is not ready (still loading the model?) or overloaded: wait, then again",
    504: "a proxy or gateway in front of the server waited too long for it: is the server "
    "behind it up, or busy?",
}

#: A bare 404: the address felab posted to is not an endpoint of this server.
_NO_SUCH_PATH = (
    "the server has no endpoint at the path felab posted to: give its base address as --url "
    "(http://HOST:PORT, without a path such as /v1/models), and the --api it serves"
)


def _other_api(status: int, api: Api, path: str) -> str:
    """A 404 (or 405) on the path the API posts to: which path that was, and the other --api
    values with theirs, since the commonest cause is a server that speaks another API (an
    Ollama server asked for /v1/completions answers, vLLM asked for /api/chat does not).

    felab does not probe the other paths: a GET tells a missing path from a POST-only one on
    some servers only (FastAPI answers 405, Ollama's and llama.cpp's 404 either way), and a
    POST there would be a generation request. The server's identity, where felab checked it,
    is in the run's notes."""
    others = " or ".join(
        f"--api {a.api.value} ({a.path})" for a in ADAPTERS.values() if a.api is not api
    )
    what = "has no endpoint at" if status == 404 else "does not take a POST at"
    return (
        f"the server {what} {shown_text(path, 120)}, where --api {api.value} posts: it may "
        f"speak another API; try {others}, or give its base address as --url "
        "(http://HOST:PORT, without a path such as /v1/models)"
    )


def wrong_api_note(
    api: Api, kind: ServerKind | None, evidence: str, errors: Iterable[str | None]
) -> str | None:
    """Where felab identified the server (before the run, with no generation request) and
    its requests got a 404 or 405 on --api's path: the --api that kind of server speaks."""
    if kind is None or kind.traits.api is api:
        return None
    if not any(e and e.startswith(("HTTP 404", "HTTP 405")) and "--api" in e for e in errors):
        return None
    return (
        f"the server is {kind.label} ({evidence}), which speaks --api {kind.traits.api.value}: "
        f"its requests to {ADAPTERS[api].path} (--api {api.value}) found no endpoint"
    )


def _a_missing_path(status: int, message: str) -> bool:
    """Whether a 404 or 405 says the path itself is not served: a 405 always, a 404 whose words
    do not name a model (Ollama's and vLLM's 404 for a model they lack do; FastAPI's "Not
    Found", Ollama's "404 page not found", llama.cpp's "File Not Found" or a proxy's page do
    not)."""
    return status == 405 or (status == 404 and "model" not in message.lower())


#: An HTML page's start (a proxy's or a web server's error page) and its <title>.
_HTML_START = re.compile(r"\s*(<!doctype html|<html|<head|<body|<title)", re.IGNORECASE)
_HTML_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def has_login(url: str) -> bool:
    """Whether `url` holds a user or a password, which httpx sends as Basic auth."""
    parts = urlsplit(url)
    return bool(parts.username or parts.password)


def credentials_refused(url: str, what: str = "", *, they: bool = False) -> str:
    """Why a 401 or 403 came ("the server ...", or "they ..."), agreeing with the failure
    line: httpx sends a URL's user and password as Basic auth, so they were refused; a URL
    without them sent none."""
    parts = urlsplit(url)
    if parts.username and not parts.password:  # `http://alice@host`: no password was sent
        return f"refused the user in the URL (no password was given; sent as Basic auth){what}"
    if has_login(url):
        return f"refused the user and password in the URL (sent as Basic auth){what}"
    verb = "want" if they else "wants"
    return (
        f"{verb} credentials{what}, which felab does not send (an API key, or a login in "
        "front of it)"
    )


#: A 401 when the URL held a user and password: httpx sent them as Basic auth.
_REFUSED_LOGIN = (
    "the server refused the user and password in the URL (sent as Basic auth): check them, or "
    "drop them if the server wants an API key instead (vLLM and SGLang --api-key)"
)
#: A 401 when the URL held a user and no password (`http://alice@host`): "check them" sent the
#: reader to a password they never gave.
_REFUSED_USER = (
    "the server refused the user in the URL (no password was given; sent as Basic auth): add "
    "its password (USER:PASSWORD before the @), or drop the user if the server wants an API "
    "key instead (vLLM and SGLang --api-key)"
)


def login_sent(headers: httpx.Headers) -> str:
    """What a request's Authorization header sent, for a 401's words: "" none, "user" a Basic
    login with an empty password (a URL's bare user), "login" any other."""
    said = headers.get("authorization", "")
    if not said:
        return ""
    scheme, _, value = said.partition(" ")
    if scheme.lower() == "basic":
        try:
            pair = base64.b64decode(value.strip(), validate=True).decode("utf-8", "replace")
        except ValueError:
            return "login"
        if pair.endswith(":") and pair.count(":") == 1:
            return "user"
    return "login"


def server_error_message(
    status: int,
    body: bytes,
    retry_after: str | None = None,
    *,
    sent_login: bool | str = False,
    asked: tuple[Api, str] | None = None,
) -> str:
    """The server's own words for a 4xx/5xx, whatever shape it wraps them in, and what the
    status usually means (and how long the server asked to be left alone, if it said).
    `asked`: the API and the URL path posted to, for a 404 or 405 on that path."""
    text = body.decode("utf-8", errors="replace").strip()
    message = text
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        obj = None
    if obj is None and _HTML_START.match(text):
        # A proxy's error page: its markup shown as the server's words helps no one.
        title = _HTML_TITLE.search(text[:65_536])
        named = shown_text(title.group(1), 80) if title else ""
        message = f"an HTML page ({named!r})" if named else "an HTML page"
    if isinstance(obj, dict):
        err = obj.get("error", obj.get("detail", obj.get("message")))
        if isinstance(err, dict):
            err = err.get("message") or err.get("msg") or err
        if isinstance(err, list) and err and isinstance(err[0], dict):  # FastAPI validation
            err = "; ".join(str(e.get("msg", e)) for e in err)
        if err is not None:
            message = str(err)
    said = f"HTTP {status}: {shown_text(message) or '(empty body)'}"
    refused_login = _REFUSED_USER if sent_login == "user" else _REFUSED_LOGIN
    advice = refused_login if status == 401 and sent_login else _STATUS_ADVICE.get(status)
    if asked is not None and _a_missing_path(status, message):
        advice = _other_api(status, *asked)  # the path itself, not a model (sweep 22 a A15)
    elif status == 404 and message.strip(" .").lower() in ("", "not found", "404 not found"):
        advice = _NO_SUCH_PATH  # the path itself, not a model (Ollama's 404 names the model)
    wait = shown_text(retry_after or "", 40)
    # seconds up to a day, or an HTTP date: anything else (-5, twenty digits) is not repeated
    seconds_ok = wait.isdigit() and int(wait) <= 86_400
    if not seconds_ok and "GMT" not in wait:
        wait = ""
    if wait:
        wait_text = f"it asked to wait {wait}" + (" s" if wait.isdigit() else "")
        advice = f"{advice}; {wait_text}" if advice else wait_text
    return f"{said}; {advice}" if advice else said


def _root_cause(exc: BaseException) -> BaseException:
    seen = exc
    while seen.__cause__ is not None or seen.__context__ is not None:
        nxt = seen.__cause__ or seen.__context__
        assert nxt is not None
        seen = nxt
    return seen


def connect_failure(exc: BaseException, host: str) -> str:
    """Name the usual connect failures plainly: refused, unresolvable, TLS to plain HTTP, or
    something else. `host` is shown without any credentials it holds."""
    host = url_without_credentials(host)
    if "@" in host and "://" not in host:
        host = host.rsplit("@", 1)[1]
    cause = _root_cause(exc)
    text = str(exc) or str(cause) or type(cause).__name__  # an empty reason said nothing
    lowered = f"{text} {cause}".lower()
    code = getattr(cause, "errno", None)
    if (
        "wrong_version_number" in lowered
        or "record layer" in lowered
        or ("ssl" in lowered and ("unexpected eof" in lowered or "unexpected_eof" in lowered))
    ):
        return (
            f"TLS failed: {host} does not answer https:// (it speaks plain HTTP?): use http:// "
            "in the URL"
        )
    if "handshake" in lowered and "timed out" in lowered:
        return (
            f"TLS failed: {host} took the connection but never finished the TLS handshake (it "
            "speaks plain HTTP, or is not listening for TLS?): use http:// in the URL, or check "
            "the port"
        )
    if "certificate verify failed" in lowered:
        return (
            f"TLS failed: the certificate of {host} is not trusted (self-signed?): use a "
            "certificate from a known authority, or http:// on a trusted network"
        )
    if code == errno.ECONNREFUSED or "refused" in lowered or "all connection attempts" in lowered:
        return (
            f"connection refused: nothing listens at {host}; start the server (`felab serve` "
            "starts llama.cpp, MLX or vLLM; `ollama serve` starts Ollama) or check the port"
        )
    if code == errno.EINVAL or "[errno 22]" in lowered:  # the kernel refused the address itself
        return (
            f"bad address: this machine cannot connect to {host} at all (an IPv6 link-local "
            "address whose %zone names an interface this machine lacks?): give an address "
            "of the server that this machine reaches, such as its IPv4 address or host name"
        )
    unresolved = "name" in lowered and ("resolution" in lowered or "known" in lowered)
    if unresolved or "nodename" in lowered:
        return f"DNS failure: cannot resolve the host in {host}; check the URL"
    if isinstance(exc, httpx.ReadTimeout):
        return (
            f"no answer: {host} took the connection but sent nothing back in time; is it the "
            "server you meant, and has it finished starting?"
        )
    if "disconnected without sending a response" in lowered:
        return _HUNG_UP.format(host=host)
    if isinstance(exc, httpx.DecodingError):  # connected and answered: the body is the fault
        return (
            f"bad body: {host} answered, but its body does not decode as the encoding it named "
            f"({shown_text(text, 120)}); is a proxy in between? give the server's own address"
        )
    if "incomplete message body" in lowered or "complete message body" in lowered:
        return (
            f"cut off: {host} answered, then closed the connection before the whole body it "
            "announced had come; is the server restarting, or a proxy in between?"
        )
    if unread := unread_http(exc, host):
        return unread
    if isinstance(exc, httpx.RemoteProtocolError | httpx.LocalProtocolError):
        return f"not HTTP: {host} answered with something other than HTTP ({text}); check the port"
    return f"connect error: {host}: {text}"


#: No HTTP answer at all: often a TLS server hanging up on plain HTTP.
_HUNG_UP = (
    "no HTTP answer: {host} hung up without answering (a server that speaks TLS does so to "
    "plain HTTP: try https://), or check the port"
)
#: A redirect whose Location httpx cannot read: felab follows no redirect anyway.
_BAD_REDIRECT = (
    "redirect: {host} answered with a redirect whose Location is not a valid URL; felab does "
    "not follow redirects: give the server's own address"
)


def protocol_error_text(exc: BaseException) -> str:
    """What the HTTP parser refused, in one short ASCII line (not a Python bytearray's repr)."""
    shown = re.sub(r"bytearray\(b('.*?')\)", r"\1", str(exc))[:160]
    return shown.encode("ascii", "backslashreplace").decode()


#: HTTP that came whole from the right port but uses what felab's HTTP client does not read:
#: "did not answer with an HTTP response; check the port" had been the wrong lead.
_UNREAD_HTTP = {
    "only transfer-encoding: chunked is supported": (
        "it answered in HTTP, but with a Transfer-Encoding other than chunked (gzip, chunked?), "
        "which felab does not read: a compressing proxy in between? time the server directly, "
        "or turn that compression off"
    ),
    "receive buffer too long": (
        "it answered in HTTP, but its status line and headers run past 100 kB, more than felab "
        "reads: a proxy or gateway adding huge headers (cookies?)? time the server directly"
    ),
}


def unread_http(exc: BaseException, host: str) -> str | None:
    """Words for HTTP that felab's client cannot read (not "not HTTP"), or None."""
    said = _UNREAD_HTTP.get(str(exc).strip().lower())
    return f"unreadable HTTP: {host}: {said}" if said else None


def describe_error(exc: BaseException, url: str, tl: RequestTimeline, limits: Waits) -> str:
    """One line a person can act on. The text before the first colon is the error's kind."""
    host = urlsplit(url_without_credentials(url)).netloc or url_without_credentials(url)
    got = len(tl.content_chunks())
    if isinstance(exc, httpx.ConnectTimeout):
        if url.startswith("https://"):
            return (
                f"connect timeout: no TLS connection to {host} within {limits.connect:g} s; if "
                "the server speaks plain HTTP, use http:// instead of https://"
            )
        return f"connect timeout: no connection to {host} within {limits.connect:g} s"
    if isinstance(exc, httpx.ConnectError):
        return connect_failure(exc, host)
    if isinstance(exc, httpx.ReadTimeout):
        if tl.done:  # the stream said it was over, then the body never ended
            return (
                f"stalled: the server ended the stream ([DONE] after {got} content chunks) but "
                f"not its HTTP body, and sent nothing for {limits.stall:g} s (a Content-Length "
                "longer than what it sent, or a proxy holding the body open?): check the server"
            )
        return (
            f"stalled: no bytes for {limits.stall:g} s after {got} content chunks "
            "(raise --stall-timeout if the server is just slow)"
        )
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return f"timeout: the request took longer than --timeout {limits.total:g} s"
    if isinstance(exc, httpx.TimeoutException):
        return f"timeout: {type(exc).__name__} talking to {host}"
    if "location header" in str(exc).lower() or type(exc).__name__ == "IDNAError":
        return _BAD_REDIRECT.format(host=host)  # it was HTTP: "not HTTP" had blamed the port
    if isinstance(exc, httpx.RemoteProtocolError):
        text = str(exc)
        if tl.status is None and "disconnected without sending" in text.lower():
            return _HUNG_UP.format(host=host)  # no stream began: not "mid-stream"
        if unread := unread_http(exc, host):
            return unread
        if tl.status is None and "disconnected" not in text.lower():
            # No response came: h11 refused what came instead (a status line of "abc").
            return (
                f"not HTTP: {host} did not answer with an HTTP response "
                f"({protocol_error_text(exc)}); check the port"
            )
        return (
            f"disconnected: the server closed the connection mid-stream after {got} content "
            f"chunks ({exc})"
        )
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return f"connection lost: {type(exc).__name__} after {got} content chunks ({exc})"
    if isinstance(exc, StreamProtocolError):
        return f"malformed stream: message {len(tl.chunks) + 1}: {exc}"
    if isinstance(exc, httpx.HTTPError):
        return f"http error: {type(exc).__name__}: {exc}"
    return f"client error: {type(exc).__name__}: {exc}"
