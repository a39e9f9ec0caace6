"""The one place secrets are masked: URL credentials and known tokens, before any text leaves
felab (a log line, an error message, a result record, a chat post).

Light on purpose (the standard library only): a student's machine loads it with the engine.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

#: `scheme://user:password@` (the password masked) and `scheme://token@` (a bare user, which
#: for many services is a token: masked too, unless it is a plain account name before `:`).
#: The password runs to the last `@` of the word (the host comes after it), so one holding
#: `@`, `:` or `/` is masked whole; a later `@` in the same word masks more, never less.
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^\s:/@]*:)\S+@", re.I)
#: A secret passed in a URL's query (`?password=`, `&api_key=`, `?token=`): its value masked.
_QUERY_SECRET = re.compile(
    r"(?P<head>[?&;](?:password|passwd|pwd|pass|token|access_token|api[_-]?key|key|secret|"
    r"sslpassword|auth)=)[^&#\s]+",
    re.I,
)
#: A secret said in words, as a server's error text may repeat what it was sent or holds
#: (`api_key=...`, `"token": "..."`, `Authorization: Bearer ...`, an OpenAI-style `sk-...` key).
#: A value counts as a secret when it mixes letters and digits or is long (`hunter22`,
#: `abcd1234`), so prose ("the first token: raise --timeout", "token: 12.5 ms") is left alone.
#: Said after a space only (`invalid token hunter2pw`), it must mix letters and digits and be
#: six characters or more, and not be a figure: "token generation", "token p50" and "time per
#: token 2.1e-05 s" stay as they are.
_SECRET_WORD = r"\b(?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd)"
_SAID_SECRET = re.compile(
    rf"(?P<head>{_SECRET_WORD}[\"']?[=:]\s*[\"']?)(?P<value>[^\s\"',;&]{{4,}})"
    rf"|(?P<spaced>{_SECRET_WORD}\s+)(?P<spaced_value>[^\s\"',;&]{{6,}})"
    r"|(?P<bearer>\bBearer:?\s+)(?P<bearer_value>[^\s\"',;]{4,})"
    r"|\bsk-[A-Za-z0-9_-]{8,}",
    re.I,
)
_secrets: set[str] = set()


def add_secret(value: str | None) -> None:
    """Mask `value` in every redacted text from now on (a token, a password)."""
    if value and len(value) >= 4:
        _secrets.add(value)


def redact(text: str) -> str:
    """`text` with URL passwords and every known secret replaced by ***."""
    text = _URL_PASSWORD.sub(r"\g<head>***@", text)
    text = _QUERY_SECRET.sub(r"\g<head>***", text)
    text = _SAID_SECRET.sub(_said_masked, text)
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _said_masked(found: re.Match[str]) -> str:
    spaced = found.group("spaced_value")
    if spaced is not None:
        return (
            found.group("spaced") + "***"
            if _mixed(spaced) and not _number(spaced)
            else found.group(0)
        )
    value = found.group("value") or found.group("bearer_value")
    if value is not None and not _looks_secret(value):
        return found.group(0)
    return (found.group("head") or found.group("bearer") or "") + "***"


def _mixed(value: str) -> bool:
    return any(c.isalpha() for c in value) and any(c.isdigit() for c in value)


def _number(value: str) -> bool:
    """A figure such as 2.1e-05 ("time per token 2.1e-05 s"): mixed, and no secret."""
    try:
        float(value)
    except ValueError:
        return False
    return True


def _looks_secret(value: str) -> bool:
    if value.startswith("***"):
        return False
    return _mixed(value) or len(value) >= 16


def url_as_typed_masked(text: str) -> str:
    """A URL as a person typed it, with everything between `://` and its last `@` masked (the
    user name kept): for messages that quote a URL felab could not parse. A password holding
    /, #, ? or a space breaks the parse, and the pattern above, and must still not be shown."""
    start = text.find("://")
    start = start + 3 if start >= 0 else 0
    at = text.rfind("@")
    if at < start:
        return redact(text)
    userinfo = text[start:at]
    masked = f"{userinfo.split(':', 1)[0]}:***" if ":" in userinfo else "***"
    return redact(text[:start] + masked + text[at:])


def url_without_credentials(url: str) -> str:
    """`url` with any `user:password@` removed entirely: what a record or a chat may keep.

    A result record names the server timed, never how felab logged in to it."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return redact(url)
    if "@" not in parts.netloc or host is None:
        return _QUERY_SECRET.sub(r"\g<head>***", url)
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port is not None else "")
    return _QUERY_SECRET.sub(r"\g<head>***", urlunsplit(parts._replace(netloc=netloc)))


def url_password_masked(url: str) -> str:
    """`url` with its password replaced by `***` (the user kept), for messages and logs."""
    try:
        parts = urlsplit(url)
        password = parts.password
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return redact(url)
    if password is None:
        return _QUERY_SECRET.sub(r"\g<head>***", url)
    if ":" in host:
        host = f"[{host}]"
    user = parts.username or ""
    netloc = f"{user}:***@{host}" + (f":{port}" if port is not None else "")
    return _QUERY_SECRET.sub(r"\g<head>***", urlunsplit(parts._replace(netloc=netloc)))
