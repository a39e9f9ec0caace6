"""The one place secrets are masked: URL credentials and known tokens, before any text leaves
felab (a log line, an error message, a result record, a chat post).

Light on purpose (the standard library only): a student's machine loads it with the engine.
"""

from __future__ import annotations

import base64
import functools
import re
from urllib.parse import unquote, urlsplit, urlunsplit

#: `scheme://user:password@` (the password masked) and `scheme://token@` (a bare user, which
#: for many services is a token: masked too, unless it is a plain account name before `:`).
#: The password runs to the last `@` of the word (the host comes after it), so one holding
#: `@`, `:` or `/` is masked whole; a later `@` in the same word masks more, never less.
#: The scheme is tried only where a run of scheme characters begins (the look-behind): tried at
#: every letter of a long run, the search took time in the square of its length (100 kB of
#: letters in a log line, about 35 s: one message from a hostile peer stopped the ingest).
#: Each word is read once (`_masked_word`): `\S+@` tried from every `a://:` of a 100 kB word took
#: a second and more, in the square of its length.
_URL_HEAD = re.compile(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^\s:/@]*:", re.I)
#: `scheme://token@host`: a user with no password, the usual way a key rides in a URL.
_URL_BARE_USER = re.compile(r"(?<![a-z0-9+.-])(?P<scheme>[a-z][a-z0-9+.-]*://)[^\s:/@]+@", re.I)
_WORD = re.compile(r"\S+")
#: `user:password@host` with no scheme (`carol:S3cret@studio.local`, typed where felab wants a
#: host or a name): the password masked, as with a scheme. Only where a word begins (a space,
#: a quote, a bracket, `=` or `,` before it: a scheme's `//` is _URL_HEAD's), and only before
#: a host that reads as one: a dotted name ending in letters (not a file's extension, so
#: `llama3.1:8b@q4.gguf` stays), an IPv4 address, [IPv6] or localhost. `llama3.1:8b@q4`,
#: `image:tag@sha256:...` and an email (`bob@example.com`, `mailto:bob@...`) stay as they are.
_FILE_ENDS = r"gguf|ggml|bin|safetensors|pth?|onnx|mlx|npz|json|ya?ml|txt|csv|md|py|zip|tar|gz"
_BARE_HOST = re.compile(
    r"(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-f:.]+\]"
    rf"|(?:[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?\.)+(?!(?:{_FILE_ENDS})(?![a-z]))[a-z]{{2,63}})"
    r"(?::\d{1,5})?(?![a-z0-9_-])(?!\.[a-z0-9])",
    re.I,
)
#: Where a schemeless user may begin in a word: its start, or after a quote, a bracket, `=`, `,`
#: or `;`; a user of URL characters, then `:` not followed by `//` (a scheme's).
_BARE_USER = re.compile(
    r"(?:^|(?<=['\"(\[<{=,;]))(?!(?:mailto|e-?mail|mail):)[a-z0-9._~%+-]*:(?!//)", re.I
)
#: The names a secret goes by in a URL: after one as a whole path segment (`/key=V`, `/pwd=V`,
#: `/x-api-key/V`, `/bearer/V`, a gateway's way of carrying a key) or as a query name, the
#: value is masked. Only a whole segment counts (`/keys`, `/passage`, `/authors` stay).
_SECRET_NAMES = (
    r"(?:x-)?api[_-]?keys?|key|(?:access|auth|id|refresh)[_-]?tokens?|tokens?|auth|authorization"
    r"|bearer|pass(?:word|wd|phrase)?s?|pwd|pw|(?:client[_-]?)?secrets?|sig|signature"
    r"|credentials?|(?:access|private|secret)[_-]?keys?"
)
#: `/name=value`, `/name/value`, `/name:value`, `/name%20value` (a percent-encoded space or
#: `=`), `/name+value` in a path: the value (to the next `/`, `?`, `#` or the end) masked. The
#: slash must not follow another (`http://token/v1` names a host called token). Joined by `-`
#: or `_` (`/secret-V`, `/api-key-V`), the value is masked when it looks like a key (letters and
#: digits, or 16 characters and more): `/token-level`, `/pass_through` stay.
_PATH_SECRET = re.compile(
    rf"(?P<head>(?<![/:])/(?:{_SECRET_NAMES})(?P<sep>=|%3d|%3a|%20|\+|:|/|-|_))"
    r"(?![*]{3})(?P<value>[^/?#\s&;\"']+)",
    re.I,
)
#: A secret passed in a URL's query (`?password=`, `&api_key=`, `?token=`): its value masked.
_QUERY_SECRET = re.compile(
    # a value masked already is left (else its closing quote went with it: masked twice)
    rf"(?P<head>[?&;](?:{_SECRET_NAMES}|sslpassword)=)(?![*]{{3}}(?![^&#\s'\")\]]))[^&#\s]+",
    re.I,
)
#: An environment variable's name for a secret (`OPENAI_API_KEY`, `HF_TOKEN`, `DB_PW`): the
#: commonest way a key is pasted (`OPENAI_API_KEY=...`). Capitals only: `max_tokens`, `cache_key`
#: in a server's words are no variables.
_ENV_SECRET = (
    r"(?-i:\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|PW)\b)"
)
#: A secret said in words, as a server's error text may repeat what it was sent or holds
#: (`api_key=...`, `"token": "..."`, `Authorization: Bearer ...`, an OpenAI-style `sk-...` key).
#: A value counts as a secret when it mixes letters and digits or is long (`hunter22`,
#: `abcd1234`), so prose ("the first token: raise --timeout", "token: 12.5 ms") is left alone.
#: Said after a space only (`invalid token hunter2pw`), it must mix letters and digits and be
#: six characters or more, and not be a figure: "token generation", "token p50" and "time per
#: token 2.1e-05 s" stay as they are.
#: After a word that only ever names a secret (password, PGPASSWORD, api_key, Bearer, `token=`)
#: the value is masked whatever it holds (`password=letmein`, `Bearer xyzsecret`); "token" with
#: a colon is also prose ("first token: 12.5 ms"), so there the value must look like a key.
#: After `_` too (`openai_api_key=...`, `client_secret: ...`), and `api key` with a space.
_SECRET_WORD = (
    r"(?:(?:\b|(?<=_))(?:api[_ -]?key|access[_-]?token|auth[_-]?token|secret|passphrase|password"
    rf"|passwd)|\b(?:token|key|pwd?)\b|{_ENV_SECRET})"
)
_ALWAYS_SECRET = (
    r"(?:(?:\b|(?<=_))(?:api[_ -]?key|access[_-]?token|auth[_-]?token|secret)s?"
    rf"|pass(?:word|wd|phrase)s?|\bpwd?\b|(?:\b|(?<=_))token(?==)|\b(?:set-)?cookie|{_ENV_SECRET})"
)
#: A secret's name joined to its value (`secret-S3A`, `api_key_V2x`, `Bearer%20V`): masked
#: after a percent-encoded space, `=` or `:` or a `+`; after `-` or `_` only a value that looks
#: like a key (`token-level`, `api-key-based` stay).
_JOINED = (
    r"(?:\b|(?<=_))(?:secret|api[_-]?key|token|password|passwd|passphrase|bearer)s?"
    r"(?:[-_+]|%20|%3d|%3a)"
)
_SAID_SECRET = re.compile(
    rf"(?P<always>{_ALWAYS_SECRET}[\"']?\s*[=:]\s*[\"']?)(?P<always_value>[^\s\"',;&]{{3,}})"
    rf"|(?P<head>{_SECRET_WORD}[\"']?[=:]\s*[\"']?)(?P<value>[^\s\"',;&]{{4,}})"
    rf"|(?P<spaced>{_SECRET_WORD}\s+(?:(?:is|was)\s+)?)(?P<spaced_value>[^\s\"',;&]{{6,}})"
    r"|(?P<bearer>\bBearer:?\s+)(?P<bearer_value>[^\s\"',;]{3,})"
    # HTTP Basic credentials: base64 with a digit, + / or = in it ("Basic usage" stays)
    r"|(?P<basic>\bBasic\s+)(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}"
    rf"|(?P<joined>{_JOINED})(?P<joined_value>[A-Za-z0-9][^\s\"',;&/?#]*)"
    r"|\bsk-[A-Za-z0-9_-]{8,}",
    re.I,
)
#: A token recognised by its shape alone, wherever it stands (a note, a URL's path, an error
#: body): the prefixed formats of the services a student's lab uses, each long enough that no
#: model name, file name, hash or run id takes the shape (`meta-llama/Llama-3.1-8B`, a sha256,
#: a uuid all stay as they are). Hugging Face (the token gated Llama needs), GitHub, AWS, Slack,
#: Groq, NVIDIA, GitLab, Google, a Discord bot token (felab's own FELAB_DISCORD_TOKEN: a base64
#: user id, a dot, 6-7 characters, a dot, 27 or more) and a JWT (three base64 parts from `eyJ`).
_TOKEN_SHAPE = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"(?:hf|gh[pousr]|gsk)_(?:[A-Za-z0-9]{20,}|(?=[a-z0-9]*[A-Z])[A-Za-z0-9]{8,})"
    r"|github_pat_[A-Za-z0-9_]{30,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    r"|xox[abeprs]-[A-Za-z0-9-]{10,}"
    r"|gsk_[A-Za-z0-9]{20,}|nvapi-[A-Za-z0-9_-]{20,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|AIza[A-Za-z0-9_-]{35}"
    r"|[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r")"
)
_secrets: set[str] = set()


def add_secret(value: str | None) -> None:
    """Mask `value` in every redacted text from now on (a token, a password)."""
    if value and len(value) >= 4:
        _secrets.add(value)
        redact_cached.cache_clear()


def plain_token(value: object) -> object:
    """A token given in a setting (FELAB_DISCORD_TOKEN), as felab uses it: the spaces and line
    breaks around it dropped (a Windows .env line ends in a CR, which HTTP refuses in a header,
    in an error that quoted the whole token), and masked in every redacted text from now on.
    A space or control character left inside is refused, in words that never repeat it."""
    if not isinstance(value, str):
        return value
    token = value.strip()
    if not all(c.isprintable() and not c.isspace() for c in token):
        raise ValueError(
            "holds a space, a line break or an invisible character inside it (pasted with "
            "something else?): copy the token again from Discord's developer portal"
        )
    add_secret(token)
    return token


def add_if_secret(text: str | None) -> bool:
    """Mask `text` whole from now on when redact() finds a secret in it (a key pasted as
    --model): a server's error that repeats it, or a note that names it, is then masked
    wherever it is shown. True when it was one."""
    if not text or redact(text) == text:
        return False
    add_secret(text)
    return True


def add_url_secrets(url: str) -> None:
    """Mask a URL's password from now on wherever it turns up, as typed, decoded and as the
    Basic header httpx sends from it: a server that repeats what it was sent ("credentials
    alice:pw rejected") had put it on the screen and in the record."""
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return
    if not password:
        for said in {user or "", unquote(user or "")}:  # a bare user is how a key rides
            add_secret(said)
            if said:  # httpx sends it as Basic "user:" (a server may repeat the header)
                add_secret(base64.b64encode(f"{said}:".encode()).decode())
        return
    for said in {password, unquote(password)}:
        add_secret(said)
        pair = f"{unquote(user or '')}:{said}".encode()
        add_secret(base64.b64encode(pair).decode())


def redact(text: str) -> str:
    """`text` with URL passwords and every known secret replaced by ***."""
    if "@" in text:
        if "://" in text:
            text = _WORD.sub(_masked_word, text)
        if ":" in text:
            text = _WORD.sub(_bare_masked, text)
    text = _QUERY_SECRET.sub(r"\g<head>***", text)
    text = _PATH_SECRET.sub(_path_masked, text)
    text = _SAID_SECRET.sub(_said_masked, text)
    text = _TOKEN_SHAPE.sub("***", text)
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _masked_word(found: re.Match[str]) -> str:
    """One word holding `://` and `@`: from the first `scheme://user:` to the word's last `@`,
    masked (a password may hold `@`, `:` or `/`)."""
    word = found.group(0)
    if "@" not in word or "://" not in word:
        return word
    head = _URL_HEAD.search(word)
    if head is None:
        return _URL_BARE_USER.sub(r"\g<scheme>***@", word)
    at = word.rfind("@")
    return word if at < head.end() else word[: head.end()] + "***" + word[at:]


def _bare_masked(found: re.Match[str]) -> str:
    """One word: `user:password@host` with no scheme made `user:***@host`. The password runs
    to the last `@` that a host follows (a password may hold `@`); each word is read once, and
    each `@` in it looked at once."""
    word = found.group(0)
    if "@" not in word or ":" not in word:
        return word
    user = _BARE_USER.search(word)
    if user is None:
        return word
    at = len(word)
    while (at := word.rfind("@", user.end(), at)) > user.end():
        if _BARE_HOST.match(word, at + 1):
            password = word[user.end() : at]
            if password == "***":
                return word
            return word[: user.end()] + "***" + word[at:]
    return word


def secret_problem(what: str, text: str) -> str:
    """The one check for a password or key in text a person typed or a file gave (a model's
    name, a label, a results row's cell), before felab stores or shows it: '' when `text`
    holds none, else the refusal's start naming `what` with the secret masked ("the label
    holds a password or key ('https://bob:***@hf.co/x')"). It is redact()'s own reading, so
    what felab refuses and what it masks agree; the caller says what to do instead."""
    shown = redact_cached(text)
    if shown == text:
        return ""
    return f"the {what} holds a password or key ({shown[:80]!r})"


@functools.lru_cache(maxsize=4096)
def redact_cached(text: str) -> str:
    """redact(text), cached, for names a file's 60,000 rows repeat (emptied by add_secret)."""
    return redact(text)


def _path_masked(found: re.Match[str]) -> str:
    """A path segment's value after a secret's name; joined by `-` or `_`, only one that looks
    like a key (`/secret-S3A` masked, `/token-level` kept)."""
    if found.group("sep") in "-_" and not _joined_secret(found.group("value")):
        return found.group(0)
    return found.group("head") + "***"


def _said_masked(found: re.Match[str]) -> str:
    if found.group("basic") is not None:
        return found.group("basic") + "***"
    if found.group("always") is not None:
        if found.group("always_value").startswith("***"):
            return found.group(0)
        return found.group("always") + "***"
    if found.group("bearer") is not None:
        if found.group("bearer_value").startswith("***") or found.group("bearer_value").lower() in (
            "token",
            "auth",
        ):
            return found.group(0)
        return found.group("bearer") + "***"
    joined = found.group("joined")
    if joined is not None:
        value = found.group("joined_value")
        keep = joined[-1] in "-_" and not _joined_secret(value)
        return found.group(0) if keep else joined + "***"
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


def _joined_secret(value: str) -> bool:
    """After a secret's name and `-` or `_`: a key when its first piece mixes letters and digits
    in 3 characters or more, or runs 16 (`secret-S3A`); `secret-llama-7b`, `token_2b`, `api_key_v2`
    and `token-level` are names."""
    piece = re.match(r"[A-Za-z0-9]*", value)
    first = piece.group(0) if piece else ""
    return (len(first) >= 3 and _mixed(first)) or len(first) >= 16


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
        return _tail_masked(url)
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port is not None else "")
    return _tail_masked(urlunsplit(parts._replace(netloc=netloc)))


def url_password_masked(url: str) -> str:
    """`url` with its password replaced by `***` (the user kept), for messages and logs; a
    user with no password is masked itself (`https://API_KEY@host` is how keys are written)."""
    try:
        parts = urlsplit(url)
        password = parts.password
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return redact(url)
    if password is None and parts.username is None:
        return _tail_masked(url)
    if ":" in host:
        host = f"[{host}]"
    user = parts.username or ""
    # http://TOKEN@host: with no password, the user is the secret (an API key) and is masked
    userinfo = "***" if password is None else f"{user}:***"
    netloc = f"{userinfo}@{host}" + (f":{port}" if port is not None else "")
    return _tail_masked(urlunsplit(parts._replace(netloc=netloc)))


def _tail_masked(url: str) -> str:
    """`url` (its user and password already dealt with) with every secret after its address
    masked: a key in the path (`/sk-...`, `/api_key=...`, `/hf_...`), in the query, or one felab
    knows. Every URL felab shows or stores is made by the two functions above, and both end
    here: a key rides in a gateway's path as often as in its query."""
    start = url.find("://")
    start = start + 3 if start >= 0 else 0
    cuts = [at for at in (url.find(c, start) for c in "/?#") if at >= 0]
    cut = min(cuts, default=len(url))
    return url[:cut] + redact(url[cut:])


def url_query_masked(url: str) -> str:
    """`url` with every value of its ?query and #fragment masked, whatever its name: for a
    message refusing a URL that has one (`?access=KEY` holds a key as surely as `?api_key=`)."""
    start = url.find("://")
    cuts = [at for at in (url.find(c, max(start, 0)) for c in "?#") if at >= 0]
    if not cuts:
        return url
    cut = min(cuts)
    pieces = re.split(r"([?#&;])", url[cut:])
    for i, piece in enumerate(pieces):
        if i % 2 == 0 and piece:
            name, equals, _ = piece.partition("=")
            pieces[i] = f"{name}=***" if equals else "***"
    return url[:cut] + "".join(pieces)
