"""Who is answering? Identify the server behind a URL before timing it under a name.

Each engine has a tell: llama.cpp serves `/props` with its slots, Ollama `/api/version`, vLLM
`/version`, SGLang `/get_server_info`, and `/v1/models` entries say who owns them. MLX's server
has no such endpoint; it is recognised by its `/v1/models` shape and Python's http.server
banner. A positive match for another kind is refused; no match at all is allowed with a note.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Any

import httpx

from felab_core.bounded_get import aget_bounded
from felab_core.engine.request_errors import (
    connect_failure,
    credentials_refused,
    protocol_error_text,
    unread_http,
)
from felab_core.engine.server_kinds import ServerKind
from felab_core.engine.targets import Target
from felab_core.redact import redact, url_without_credentials
from felab_core.text import formula_mark, holds_hidden, shell_word

PROBE_TIMEOUT_S = 3.0


@dataclass(slots=True)
class ServerIdentity:
    kind: ServerKind | None
    version: str | None = None
    evidence: str = ""
    models: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)
    reachable: bool = True


class IdentityError(Exception):
    """The server cannot be reached, or it is not the kind the target names."""


async def _get_json(
    client: httpx.AsyncClient, url: str
) -> tuple[Any, httpx.Headers | None, int | None]:
    """The JSON a 200 carried (or None), the headers, and the status (None: no answer)."""
    try:
        resp = await aget_bounded(client, url, deadline_s=PROBE_TIMEOUT_S)
    except httpx.HTTPError:
        return None, None, None
    if resp.status_code != 200:
        return None, resp.headers, resp.status_code
    try:
        return resp.json(), resp.headers, resp.status_code
    except ValueError:
        return None, resp.headers, resp.status_code


#: The longest model name believed from a server (felab's own limit for a row's model).
MAX_MODEL_NAME = 300


def _a_name(text: str) -> bool:
    """Whether a server's model id can be a model's name: short, printable, one line. An id
    with escape codes would reach the terminal, the CSV and chat; 100,000 characters the
    table. Such an id is passed over, so the run asks for --model instead."""
    return (
        0 < len(text) <= MAX_MODEL_NAME
        and text.strip() == text
        and not holds_hidden(text)
        and not formula_mark(text, allowed="@")  # =HYPERLINK(...) reached the results CSV
        and redact(text) == text  # a server repeating the URL's password is no model's name
    )


#: The longest version believed from a server (felab's own limit for a row's server_version).
MAX_VERSION = 100


def _a_version(value: object) -> str | None:
    """A server's version as the results row keeps it, or None when what it said cannot be one:
    not text or a number, too long, holding escape codes, or a spreadsheet formula (a server's
    "=cmd|..." was written into the student's CSV as it came)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON's 1e999 reads as inf: no version says that
    text = str(value).strip()
    if not text or len(text) > MAX_VERSION or holds_hidden(text) or formula_mark(text):
        return None
    if redact(text) != text:  # "b4000 alice:s3cretPW@host" reached the record and the CSV
        return None
    return text


def _owned_by(models: Any) -> tuple[list[str], set[str]]:
    if not isinstance(models, dict) or not isinstance(models.get("data"), list):
        return [], set()
    ids = [
        m["id"]
        for m in models["data"]
        if isinstance(m, dict) and isinstance(m.get("id"), str) and _a_name(m["id"])
    ]
    owners = {
        str(m.get("owned_by")).lower()
        for m in models["data"]
        if isinstance(m, dict) and m.get("owned_by")
    }
    return ids, owners


async def identify(base_url: str, *, wait_s: float = PROBE_TIMEOUT_S) -> ServerIdentity:
    """Ask the identity endpoints in parallel and decide from what answered."""
    async with httpx.AsyncClient(timeout=wait_s, trust_env=False) as client:
        try:
            root = await aget_bounded(client, base_url + "/", deadline_s=wait_s)
        except httpx.ConnectError as exc:
            raise IdentityError(connect_failure(exc, base_url)) from None
        except httpx.ConnectTimeout:
            shown = url_without_credentials(base_url)
            hint = (
                "; if it speaks plain HTTP, use http:// instead of https://"
                if base_url.startswith("https://")
                else ""
            )
            raise IdentityError(
                f"no connection to {shown} within {wait_s:g} s: the connection was never made "
                "(a wrong host or address, a host that is down, or a firewall dropping the "
                f"packets): check the host and port{hint}"
            ) from None
        except httpx.ReadTimeout:
            shown = url_without_credentials(base_url)
            tls = (  # a plain-HTTP server reads a TLS hello as a request's start, and waits
                " If it speaks plain HTTP, use http:// instead of https://."
                if base_url.startswith("https://")
                else ""
            )
            raise IdentityError(
                f"{shown} took the connection but sent no whole answer within {wait_s:g} s: is "
                "it an HTTP server, and has it finished starting? (--no-check skips this "
                f"question){tls}"
            ) from None
        except httpx.RemoteProtocolError as exc:  # reached: what came back is not HTTP as sent
            shown = url_without_credentials(base_url)
            if unread := unread_http(exc, shown):
                raise IdentityError(unread) from None
            raise IdentityError(
                f"not HTTP: {shown} answered with broken HTTP ({protocol_error_text(exc)}); "
                "check the port, or what sits in front of the server"
            ) from None
        except httpx.DecodingError as exc:  # reached: its body is not what its headers say
            shown = url_without_credentials(base_url)
            raise IdentityError(
                f"{shown} answered with a body its own Content-Encoding does not fit ({exc}): "
                "a proxy in between, or not an LLM server; check the port, or time the server "
                "directly"
            ) from None
        except httpx.HTTPError as exc:
            shown = url_without_credentials(base_url)
            why = str(exc) or "no reason given"
            raise IdentityError(f"cannot reach {shown}: {type(exc).__name__}: {why}") from None
        names = ("/props", "/api/version", "/get_server_info", "/version", "/v1/models")
        results = await asyncio.gather(*(_get_json(client, base_url + n) for n in names))
    (props, _, _), (ollama_v, _, _), (sgl_info, _, _), (version, _, _), models_got = results
    models, model_headers, _ = models_got
    ids, owners = _owned_by(models)
    server_header = (model_headers or root.headers).get("server", "")
    owned = {_OWNER_KINDS[o] for o in owners if o in _OWNER_KINDS}
    unconfirmed = "no identity endpoint answered"
    if len(owned) > 1:  # a list owned by two engines says neither: it is no evidence
        both = " and ".join(sorted(k.label for k in owned))
        unconfirmed = f"its /v1/models names models owned by both {both}, so neither"
        owned = set()
    version_v = _a_version(version.get("version")) if isinstance(version, dict) else None
    has_version = isinstance(version, dict) and "version" in version

    llama_keys = ("total_slots", "default_generation_settings")
    sglang_keys = ("model_path", "tokenizer_path", "served_model_name")
    tells = {  # each engine's own endpoint (SGLang serves /version too): two say neither
        "/props lists slots (llama.cpp)": isinstance(props, dict)
        and any(k in props for k in llama_keys),
        "/api/version (Ollama)": isinstance(ollama_v, dict) and "version" in ollama_v,
        "/get_server_info (SGLang)": isinstance(sgl_info, dict)
        and any(k in sgl_info for k in sglang_keys),
    }
    tells["/version (vLLM)"] = has_version and not tells["/get_server_info (SGLang)"]
    if sum(tells.values()) > 1:  # A08: three answered, and it was filed as llama.cpp
        said = " and ".join(what for what, seen in tells.items() if seen)
        why = f"{said} each answered: engines that disagree (a proxy in front of several?)"
        return ServerIdentity(None, None, f"{why}, so none is believed", ids)
    if isinstance(props, dict) and any(k in props for k in llama_keys):
        build = props.get("build_info")
        return ServerIdentity(
            ServerKind.LLAMACPP,
            _a_version(build),
            "/props lists slots",
            ids,
            props,
        )
    if isinstance(ollama_v, dict) and "version" in ollama_v:
        return ServerIdentity(
            ServerKind.OLLAMA, _a_version(ollama_v["version"]), "/api/version answered", ids
        )
    sglang_info = isinstance(sgl_info, dict) and any(k in sgl_info for k in sglang_keys)
    if sglang_info or ServerKind.SGLANG in owned:
        said = "/get_server_info answered" if sglang_info else "models owned by sglang"
        return ServerIdentity(ServerKind.SGLANG, version_v, said, ids)
    if ServerKind.VLLM in owned or has_version:
        said = ", ".join(
            what
            for what, seen in (
                ("/version answered", has_version),
                ("models owned by vllm", ServerKind.VLLM in owned),
            )
            if seen
        )
        return ServerIdentity(ServerKind.VLLM, version_v, said, ids)
    if ServerKind.LLAMACPP in owned:
        return ServerIdentity(ServerKind.LLAMACPP, None, "models owned by llamacpp", ids)
    if ServerKind.OLLAMA in owned:
        return ServerIdentity(ServerKind.OLLAMA, None, "models owned by library", ids)
    if ids and not owners and server_header.startswith("BaseHTTP"):
        return ServerIdentity(
            ServerKind.MLX, None, "/v1/models without owners from Python's http.server", ids
        )
    if not ids and root.headers.get("content-type", "").startswith("text/html"):
        shown = url_without_credentials(base_url)
        raise IdentityError(
            f"{shown} answers with an HTML page (a web server or a dashboard), not an LLM "
            "server's API: check the address and port"
        )
    refused = sorted({status for _, _, status in results if status in (401, 403)})
    if refused and not ids:
        statuses = " or ".join(f"HTTP {s}" for s in refused)
        return ServerIdentity(
            None,
            None,
            f"its identity endpoints answered {statuses}: they "
            + credentials_refused(base_url, they=True),
            ids,
        )
    return ServerIdentity(None, None, unconfirmed, ids)


#: Who a /v1/models entry's owned_by names, as a kind.
_OWNER_KINDS = {
    "vllm": ServerKind.VLLM,
    "sglang": ServerKind.SGLANG,
    "llamacpp": ServerKind.LLAMACPP,
    "library": ServerKind.OLLAMA,
    "ollama": ServerKind.OLLAMA,
}


def check_identity(target: Target, ident: ServerIdentity) -> str | None:
    """Refuse a positive mismatch; return a note when the kind could not be confirmed."""
    if target.kind is ServerKind.OPENAI:
        return None
    shown = url_without_credentials(target.url)
    if ident.kind is None:
        return f"could not confirm that {shown} is {target.kind.label} ({ident.evidence})"
    if ident.kind is not target.kind:
        raise IdentityError(
            f"the server at {shown} is {ident.kind.label} ({ident.evidence}), not "
            f"{target.kind.label}: felab will not time it under the name {target.name!r}. Time "
            f"it as `felab bench {ident.kind.value} --url {shell_word(shown, 'URL', 200)}`, or "
            f"start {target.kind.label} on that port."
        )
    return None
