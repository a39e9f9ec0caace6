"""Named servers to time, with their API, address and model, overridable from one TOML file.

The same file and schema serve `felab bench` and the worker fleet: a worker only ever times the
URLs its owner wrote down here, never one that arrives from chat.

    # felab targets file (FELAB_TARGETS_FILE)
    [targets.mlx]
    url = "http://127.0.0.1:8081"
    model = "/Users/me/models/Llama-3.1-8B-Instruct-4bit"

    [targets.gpu]            # a new name: say which kind of server it is
    kind = "vllm"
    url = "http://127.0.0.1:8000"
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from felab_core.engine.apis import Api, adapter_for
from felab_core.engine.server_kinds import ServerKind, kind_names
from felab_core.files import MiB, NamedFileError, read_named_text
from felab_core.redact import add_url_secrets, redact, url_as_typed_masked, url_query_masked
from felab_core.text import formula_mark, holds_hidden, with_hidden_shown


class TargetError(ValueError):
    """A target that cannot be used, with what to change."""


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    kind: ServerKind
    url: str  # base address, http://host:port, without /v1
    api: Api
    model: str | None = None
    note: str | None = None

    @property
    def force_length_extra(self) -> dict[str, object]:
        """Fields that make the server write exactly max_tokens, where it allows that."""
        return force_length_extra(self.kind)


def per_chunk_usage_extra(target: Target) -> dict[str, object]:
    """vLLM can put usage on every chunk: then tokens per chunk are known, not estimated."""
    if target.kind.traits.per_chunk_usage and target.api is not Api.OLLAMA:
        return {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    return {}


def force_length_extra(kind: ServerKind) -> dict[str, object]:
    return dict(kind.traits.force_length)


def default_target(kind: ServerKind) -> Target:
    """The target a kind's name means when no targets file says otherwise."""
    t = kind.traits
    assert t.port is not None, f"{kind} has no default address"
    url = f"http://127.0.0.1:{t.port}"
    return Target(kind.value, kind, url, t.api, t.default_model, t.note)


DEFAULT_TARGETS: dict[str, Target] = {
    kind.value: default_target(kind) for kind in ServerKind if kind.traits.port is not None
}


#: Endpoint paths a pasted URL may already end in: felab adds the API's own path itself.
_ENDPOINT_SUFFIXES = (
    "/v1/chat/completions",
    "/v1/completions",
    "/chat/completions",
    "/completions",
    "/api/chat",
    "/api/generate",
    "/v1",
)


#: Endpoints a person curls first (and so pastes): no base address ends in one, and felab would
#: post to /v1/models/v1/chat/completions and be told only "HTTP 404: Not Found".
_OTHER_ENDPOINTS = (
    "/v1/models",
    "/models",
    "/v1/embeddings",
    "/health",
    "/healthz",
    "/metrics",
    "/props",
    "/slots",
    "/version",
    "/get_server_info",
    "/get_model_info",
    "/api/tags",
    "/api/version",
    "/api/ps",
    "/api/show",
    "/docs",
)

#: A %-escape of a letter, digit or -._~: no path needs one, and the server sees it as typed
#: (/v%31 reached the server as /v%31/v1/chat/completions, not /v1/...).
_NEEDLESS_ESCAPE = re.compile(r"%(?:[46][1-9A-Fa-f]|[57][0-9Aa]|3[0-9]|2[Dd]|2[Ee]|5[Ff]|7[Ee])")


#: Longer than any server's base address, path and all (browsers stop near 2,000 too).
MAX_URL_CHARS = 2048


def normalize_base_url(url: str) -> str:
    """Accept http://host:port, with or without a trailing /v1, slash or endpoint path
    (`/v1/chat/completions` pasted from a server's docs): the base address felab adds to."""
    text = url.strip()
    if len(text) > MAX_URL_CHARS:  # 70,000 characters took httpx half a minute, then exit 70
        raise TargetError(
            f"the address is {len(text):,} characters long: a server's base address is "
            f"http://HOST:PORT (felab takes up to {MAX_URL_CHARS:,}); is the right text pasted?"
        )
    add_url_secrets(text)  # a server that repeats the password it was sent is masked too
    shown = url_as_typed_masked(text)
    if holds_hidden(text) or any(c.isspace() for c in text):
        raise TargetError(
            f"{shown.encode('unicode_escape').decode()!r} holds spaces, invisible or control "
            "characters: give the address as http://HOST:PORT"
        )
    if "://" not in text:
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:(?!\d)", text):  # mailto:, javascript:, file:
            raise TargetError(
                f"{shown!r} is not an http:// or https:// address: give http://HOST:PORT"
            )
        text = "http://" + text
    try:
        parts = urlsplit(text)
    except ValueError:  # an unclosed [ of an IPv6 address
        raise TargetError(
            f"{shown!r} is not a server address (an IPv6 address needs its closing ]): use "
            "http://HOST:PORT, such as http://[::1]:8080"
        ) from None
    if "@" in text.partition("://")[2] and "@" not in parts.netloc:
        raise TargetError(
            f"{shown!r}: the part before @ holds a /, ? or # (in the password?), which ends a "
            "URL's address: write them percent-encoded (/ as %2F, ? as %3F, # as %23)"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetError(f"{shown!r} is not a server address: use http://HOST:PORT")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise TargetError(f"{shown!r} has a bad port number (1-65535)")
    if parts.query or parts.fragment:
        raise TargetError(
            f"{url_query_masked(shown)!r} has a ?query or #fragment: give only http://HOST:PORT"
        )
    try:
        httpx.URL(text)
    except httpx.InvalidURL:  # fullwidth digits, 256.1.1.1: exit 70 before
        raise TargetError(
            f"{shown!r}: its host is not a name or address a request can go to (fullwidth "
            "digits or letters, a number past 255 in an IP address, or a character no host "
            "name holds?): type it as plain http://HOST:PORT"
        ) from None
    path = parts.path.rstrip("/")
    if any(part in (".", "..") for part in path.split("/")):
        raise TargetError(
            f"{shown!r} has a . or .. in its path: give the server's own base address, such "
            "as http://HOST:PORT or http://HOST:PORT/v1"
        )
    if escape := _NEEDLESS_ESCAPE.search(path):
        raise TargetError(
            f"{shown!r} writes {escape.group()!r} in its path for a plain letter, digit or "
            "-._~, which the server does not read as that character: type it plainly, as "
            "http://HOST:PORT or http://HOST:PORT/v1"
        )
    for suffix in _ENDPOINT_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    if path.endswith(_ENDPOINT_SUFFIXES):  # /v1/v1: a base pasted onto a base
        raise TargetError(
            f"{shown!r} ends in an endpoint path twice (such as /v1/v1): give the server's "
            "base address once, such as http://HOST:PORT/v1"
        )
    if other := next((e for e in _OTHER_ENDPOINTS if path.lower().endswith(e)), None):
        raise TargetError(
            f"{shown!r} ends in {other}, an endpoint of the server, not its base address: "
            f"felab adds the API's own path itself, so give the address without {other}, "
            "such as http://HOST:PORT or http://HOST:PORT/v1"
        )
    return f"{parts.scheme}://{parts.netloc}{path}"


#: A note is a line a person reads beside the table (and it travels with a fleet job).
MAX_NOTE_CHARS = 500
#: The most targets one file names: a lab's servers, not a fleet's. 10,000 (under the 1 MiB
#: limit) had taken `felab targets` past 30 s to draw.
MOST_TARGETS = 256
#: A target's name, as the messages advise: `felab bench NAME`, the CSV's target column.
_TARGET_NAME = re.compile(r"[A-Za-z0-9_-]+")


class _TargetEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: ServerKind | None = None
    url: str | None = None
    api: Api | None = None
    model: str | None = None
    note: str | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else normalize_base_url(value)

    @field_validator("model", "note")
    @classmethod
    def _text(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and holds_hidden(value):
            raise ValueError(f"{info.field_name} holds invisible or control characters")
        if value is not None and info.field_name == "note" and len(value) > MAX_NOTE_CHARS:
            raise ValueError(  # a 100,000-character note took a minute to print, and travelled
                f"is {len(value):,} characters: a note is at most {MAX_NOTE_CHARS} (one line)"
            )
        return value  # a note is masked in load_targets, once every target's URL is known


class _TargetsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    targets: dict[str, _TargetEntry] = Field(default_factory=dict)


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    """What an unknown key in a targets file is, with the key felab reads that it is nearest."""
    top = len(loc) == 1  # beside [targets], not in a [targets.NAME] table
    keys = ["targets"] if top else list(_TargetEntry.model_fields)
    near = difflib.get_close_matches(str(loc[-1]), keys, n=1, cutoff=0.6)
    where = "the file" if top else "a target"
    said = f"not a key of {where} ({', '.join(keys)})"
    return f"{said}: did you mean {near[0]}?" if near else said


def _check_target_name(name: str, path: Path) -> None:
    """Letters, digits, - and _ only (a name with `,` or a space split the CSV's column), and no
    key: a name is printed and stored with every run, unmasked."""
    if redact(name) != name:
        raise TargetError(
            f"targets file {path}: the target name {redact(name)!r} looks like a key or "
            "password, and a name is shown and saved with every run: name the server instead "
            "(gpu-box, vllm-8b)"
        )
    if not _TARGET_NAME.fullmatch(name):
        bad = next(c for c in name if not _TARGET_NAME.fullmatch(c))
        raise TargetError(
            f"targets file {path}: the target name {name!r} holds {bad!r}: a target name is "
            "letters, digits, - and _ (it is typed as felab bench NAME)"
        )


def load_targets(path: Path | None) -> dict[str, Target]:
    """The built-in targets, with a targets file's entries laid over them."""
    targets = dict(DEFAULT_TARGETS)
    if path is None:
        return targets
    try:
        raw = tomllib.loads(read_named_text(path, what="targets file (TOML)", limit=MiB))
    except NamedFileError as exc:
        raise TargetError(f"{exc} (FELAB_TARGETS_FILE or --targets-file)") from None
    except RecursionError:
        raise TargetError(f"targets file {path} is nested too deeply to be one") from None
    except tomllib.TOMLDecodeError as exc:
        raise TargetError(f"targets file {path} is not valid TOML: {exc}") from None
    try:
        parsed = _TargetsFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        # a key is the file's words: an escape code in it must not reach the terminal
        where = ".".join(with_hidden_shown(str(p))[:64] for p in first["loc"])
        # pydantic's "Extra inputs are not permitted" names no key felab reads
        said = _unknown_key(first["loc"]) if first["type"] == "extra_forbidden" else first["msg"]
        raise TargetError(f"targets file {path}: {where}: {said}") from None
    if len(parsed.targets) > MOST_TARGETS:
        raise TargetError(
            f"targets file {path} names {len(parsed.targets):,} targets; a targets file holds at "
            f"most {MOST_TARGETS} (the servers one machine times): split it, one file a machine"
        )
    for name in parsed.targets:
        if not name.strip():
            raise TargetError(
                f'targets file {path}: a target named "" (or only spaces): a target needs a '
                "name to be run by (felab bench NAME): use letters, digits, - and _"
            )
        if formula_mark(name):  # the results CSV's target column
            raise TargetError(
                f"targets file {path}: the target name {name[:64]!r} begins with "
                f"{name.lstrip()[0]!r}, which a spreadsheet runs as a formula when it opens the "
                "results CSV: use letters, digits, - and _ (not first)"
            )
        if holds_hidden(name) or len(name) > 64:
            shown = name[:64].encode("unicode_escape").decode()
            raise TargetError(
                f"targets file {path}: the target name '{shown}' is not a name felab can show "
                "(control or invisible characters, or over 64 characters): use letters, digits, "
                "- and _"
            )
        _check_target_name(name, path)
    for name, entry in parsed.targets.items():
        base = targets.get(name)
        if base is not None and entry.kind is not None and entry.kind != base.kind:
            base = None  # another kind: the built-in's API, port and model are not its own
        if base is None:
            if entry.kind is None or entry.url is None:
                what = (
                    "is another kind than felab's own target of that name"
                    if name in targets
                    else "is a new name"
                )
                raise TargetError(
                    f"targets file {path}: [targets.{name}] {what}, so it needs both kind "
                    f"({kind_names('or')}) and url"
                )
            api = entry.api or entry.kind.traits.api
            base = Target(name, entry.kind, entry.url, api)
        updates = {k: v for k, v in entry.model_dump().items() if v is not None}
        if entry.note is not None:  # a key written in a note is printed and saved with each
            # run: masked now, when every target's URL has been read (a later target's
            # password in an earlier target's note had stayed as typed)
            updates["note"] = redact(entry.note)
        if entry.model is not None:  # the checks --model gets: this name is written to CSV too
            check_model_name(entry.model, f"targets file {path}: [targets.{name}] model")
        targets[name] = replace(base, **updates)
        typed = raw.get("targets", {}).get(name, {}).get("url")
        if isinstance(typed, str):  # as --url is: an endpoint of another API is no typo to fix
            try:
                _check_endpoint(typed, targets[name].api)
            except TargetError as exc:
                raise TargetError(f"targets file {path}: [targets.{name}] url: {exc}") from None
    return targets


def resolve_target(
    name: str | None,
    *,
    targets: dict[str, Target],
    url: str | None = None,
    api: Api | None = None,
    model: str | None = None,
    kind: ServerKind | None = None,
) -> Target:
    """One target from a name and/or flags; flags win over the file and the defaults."""
    if name is None:
        if url is None:
            raise TargetError(f"name a target ({kind_names(targets=True)}) or give --url")
        kind = kind or ServerKind.OPENAI
        base = Target(
            "custom",
            kind,
            normalize_base_url(url),
            api or kind.traits.api,
        )
    else:
        if name not in targets:
            known = ", ".join(sorted(targets))
            # a key typed where a name goes is not repeated (sweep 22 a2 A2-13)
            raise TargetError(f"unknown target {redact(name)!r}: known targets are {known}")
        base = targets[name]
        if url is not None:
            # The default's note is about its default address; a given URL makes it moot.
            base = replace(base, url=normalize_base_url(url), note=None)
        if api is not None:
            base = replace(base, api=api)
        if kind is not None and kind is not base.kind:  # the row would be filed under both
            raise TargetError(
                f"the target {name!r} is {base.kind.label}, but --kind {kind.value} says "
                f"{kind.label}: --kind names the server of a --url given without a target "
                f"name; time it as `felab bench {kind.value} --url ...` (or a targets file's "
                "entry of that kind), or drop --kind"
            )
    if model is not None:
        base = replace(base, model=check_model_name(model, "--model"))
    if url is not None:
        _check_endpoint(url, base.api)
    return base


def _check_endpoint(url: str, api: Api) -> None:
    """A pasted URL that names another API's endpoint than --api's: felab posts to the API's
    own path, so one of the two is not what was meant (a completions URL timed as chat)."""
    path = urlsplit(url.strip()).path.rstrip("/")
    named = next((s for s in _ENDPOINT_SUFFIXES if s != "/v1" and path.endswith(s)), None)
    own = adapter_for(api).path
    if named is not None and not own.endswith(named):
        raise TargetError(
            f"the URL ends in {named}, but --api {api.value} posts to {own}: give the --api "
            "of that endpoint, or the server's base URL (http://HOST:PORT)"
        )


def check_model_name(model: str, where: str) -> str:
    """A model name as a server knows it: not empty, no control or invisible characters (an
    escape code or a U+202E would reach terminals, results files and chat), at most 300
    characters."""
    if not model.strip():
        raise TargetError(
            f"{where} is empty: give the model name the server knows, or leave it out"
        )
    if holds_hidden(model):
        raise TargetError(
            f"{where} holds invisible or control characters: give the model name as typed"
        )
    if len(model) > 300:
        raise TargetError(f"{where} is longer than 300 characters")
    if mark := formula_mark(model, allowed="@"):  # written to CSV: a spreadsheet runs it
        raise TargetError(f"{where} begins with {mark!r}: no model's name does")
    return model
