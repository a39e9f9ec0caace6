"""The slot trap read from a running llama-server: its /props, /slots and /v1/models say
how many seats it has and how long each is, and slots.py turns that into the verdict.

Kept apart from the flags arithmetic (slots.py) because only this half talks to a server: every
figure it reads is checked (a server can say anything), and the URL's password never reaches a
message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from felab_core.bounded_get import Deadline, direct_client, get_bounded
from felab_core.engine.request_errors import connect_failure, credentials_refused, has_login
from felab_core.redact import url_password_masked
from felab_core.sizing.errors import BadAnswer, SizingError, Unreachable, answer_cut_off
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.slots import (
    LLAMA_CTX_PAD,
    SlotVerdict,
    check_need,
    fix_for,
    memory_for,
    pad_ctx,
)
from felab_core.sizing.units import MAX_TOKENS, require_whole, whole_text
from felab_core.text import with_hidden_shown


def _not_llama(url: str, why: str) -> SizingError:
    return SizingError(
        f"the server at {url} does not look like llama-server ({why}). --url must point at "
        "llama.cpp's llama-server (for example http://127.0.0.1:8080); vLLM, Ollama and MLX have "
        "no /props or /slots. For vLLM use `felab size capacity --vllm-log` on its startup log."
    )


def _get_json(
    client: httpx.Client, url: str, deadline: Deadline, *, needed: bool = False
) -> tuple[int, Any]:
    """(status, JSON or None); a `needed` answer cut short by felab's limits is the server's
    fault, where an optional one (/slots, /v1/models) cut so is passed over as missing."""
    try:
        response = get_bounded(client, url, deadline_s=deadline.left())
    except httpx.HTTPError as exc:
        raise Unreachable(connect_failure(exc, url_password_masked(url))) from None
    if response.status_code != 200:
        return response.status_code, None
    if response.cut and needed:
        raise answer_cut_off(url_password_masked(url), response)
    try:
        return 200, response.json()
    except ValueError:
        return 200, None


@dataclass(frozen=True)
class LiveSlots:
    """What a running llama-server says about its seats."""

    base_url: str
    total_slots: int
    slot_n_ctx: tuple[int, ...]
    n_ctx_train: int | None
    model_bytes: int | None
    build: str | None
    slots_endpoint: bool


#: More bytes than any model file (a petabyte): a larger size is not a real model's.
MOST_MODEL_BYTES = 10**15
#: More seats than llama-server's --parallel takes: a larger count is not a real server's.
MAX_SLOTS = 65_536


def _reported(base: str, where: str, name: str, value: object, most: int) -> int:
    """A count the server reports, when it is a whole number from 1 to `most`; else BadAnswer
    (10^30 seats overflowed felab, a negative length read as the input's fault)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        raise BadAnswer(
            f"llama-server at {base} reports {name} = {shown} in {where}: no server has that "
            f"(1 to {most:,}); check the server, or give the figures with -c and --parallel"
        )
    return value


def read_slots(
    base_url: str, client: httpx.Client | None = None, timeout: float = 5.0
) -> LiveSlots:
    """Ask llama-server's /props (and /slots, /v1/models when open) what its seats hold."""
    base = base_url.rstrip("/")
    shown = url_password_masked(base)  # what is said: never a password from --url
    own = client is None
    http = client or direct_client(timeout)
    try:
        deadline = Deadline()  # the three questions together, not 10 s each
        status, props = _get_json(http, f"{base}/props", deadline, needed=True)
        if status >= 500 and status != 501:  # failing; 501 "not implemented": another kind
            raise BadAnswer(
                f"{shown}/props answered HTTP {status} (a server error): check the server's log"
            )
        if status in (401, 403):  # llama-server --api-key guards /props too (C13)
            why = (
                credentials_refused(base, " to read its seats")
                if has_login(base)
                else "wants an API key (llama-server --api-key), and felab sends none to read "
                "its seats"
            )
            raise BadAnswer(
                f"{shown}/props answered HTTP {status}: the server {why}; give them as its "
                "command line does: felab size slots -c N -np SEATS"
            )
        if status != 200:
            raise _not_llama(shown, f"GET /props answered HTTP {status}")
        if not isinstance(props, dict):
            raise _not_llama(shown, "/props did not answer with a JSON object")
        settings = props.get("default_generation_settings")
        total_slots = props.get("total_slots")
        if not isinstance(settings, dict) or total_slots is None:
            raise _not_llama(shown, "/props has no total_slots or default_generation_settings")
        props_ctx = settings.get("n_ctx")
        if props_ctx is None:
            raise _not_llama(shown, "/props gives no n_ctx for its seats")
        # There but impossible (4.5 seats, 1e400 tokens, a count past any server): said as
        # such, not as missing.
        total_slots = _reported(shown, "/props", "total_slots", total_slots, MAX_SLOTS)
        props_ctx = _reported(shown, "/props", "n_ctx", props_ctx, MAX_TOKENS)
        status, slots = _get_json(http, f"{base}/slots", deadline)
        per_slot: tuple[int, ...]
        if status == 200 and isinstance(slots, list) and slots:
            per_slot = tuple(
                _reported(shown, "/slots", "n_ctx", s.get("n_ctx", props_ctx), MAX_TOKENS)
                for s in slots[:MAX_SLOTS]
                if isinstance(s, dict)
            )
            endpoint = True
            if not per_slot:  # [1, 2]: a list, but of no seat llama-server describes
                raise _not_llama(shown, "/slots lists no seat objects")
            if len(slots) != total_slots or set(per_slot) != {props_ctx}:
                # llama-server's seats are all its /props length: a server that says otherwise
                # (longer, or shorter: "4 seats of 1 tokens" had been believed) contradicts
                # itself, and neither figure can be believed
                least, most = min(per_slot), max(per_slot)
                lengths = whole_text(most) if least == most else f"{least:,} to {most:,}"
                raise BadAnswer(
                    f"llama-server at {shown} contradicts itself: /props says {total_slots} "
                    f"seats of {whole_text(props_ctx)} tokens, /slots lists {len(slots):,} of "
                    f"{lengths}; check the server, or give the figures with -c and --parallel"
                )
        else:
            per_slot = (props_ctx,) * total_slots
            endpoint = False
        n_train = None
        size = None
        status, models = _get_json(http, f"{base}/v1/models", deadline)
        if status == 200 and isinstance(models, dict):
            listed = models.get("data")
            for item in listed if isinstance(listed, list) else []:
                meta = item.get("meta") if isinstance(item, dict) else None
                if isinstance(meta, dict):  # each bounded as the rest: "trained for -5 tokens"
                    train, weights = meta.get("n_ctx_train"), meta.get("size")
                    where = "/v1/models"
                    n_train = (
                        None
                        if train is None
                        else _reported(shown, where, "n_ctx_train", train, MAX_TOKENS)
                    )
                    size = (
                        None
                        if weights is None
                        else _reported(shown, where, "size", weights, MOST_MODEL_BYTES)
                    )
                    break
        build = props.get("build_info")
        return LiveSlots(
            base_url=shown,
            total_slots=total_slots,
            slot_n_ctx=per_slot,
            n_ctx_train=n_train,
            model_bytes=size,
            # The server's own words reach the terminal: control characters shown escaped.
            build=with_hidden_shown(str(build))[:200] if build else None,
            slots_endpoint=endpoint,
        )
    finally:
        if own:
            http.close()


def read_live(
    base_url: str,
    *,
    ctx: int | None = None,
    need: int | None = None,
    shape: ModelShape | None = None,
    kv_type: str = "f16",
    tokens_each: int | None = None,
    client: httpx.Client | None = None,
    timeout: float = 5.0,
) -> SlotVerdict:
    """The slot verdict from a running llama-server: its own word on each seat's room.

    The server reports seats and each seat's length, not whether they share one cache; give the
    `-c` it was started with (`ctx`) and the mode follows from the numbers.
    """
    check_need(need, tokens_each, shape)
    if ctx is not None:
        require_whole("-c (the cache length in tokens)", ctx)
    live = read_slots(base_url, client=client, timeout=timeout)
    slots = live.total_slots
    per_slot = min(live.slot_n_ctx) if live.slot_n_ctx else 0
    if slots <= 0 or per_slot <= 0:
        raise SizingError(
            f"llama-server at {live.base_url} reports {slots} seats of {per_slot} tokens"
        )
    where = f"llama-server at {live.base_url}" + (f" (build {live.build})" if live.build else "")
    said = "/slots" if live.slots_endpoint else "/props"
    unified: bool | None
    total: int | None
    if slots == 1:
        unified, total = None, per_slot
        mode = "one seat, so splitting does not arise"
    elif ctx is not None and pad_ctx(ctx) == per_slot:
        unified, total = True, per_slot
        mode = f"each seat's length equals -c {ctx}, so the seats share one unified cache"
    elif ctx is not None and per_slot * slots >= pad_ctx(ctx) >= (per_slot - LLAMA_CTX_PAD) * slots:
        unified, total = False, per_slot * slots
        mode = f"-c {ctx} divided over {slots} seats gives this, so the cache is split"
    elif ctx is not None:  # given, but neither one cache nor the cache split over the seats
        unified, total = None, None
        mode = (
            f"-c {ctx} fits neither a unified cache (each seat's length) nor one split over "
            f"{slots} seats ({whole_text(per_slot * slots)} in all): give the -c this server "
            "was started with"
        )
    else:
        unified, total = None, None
        mode = "give the -c it was started with (--ctx) to tell a split cache from a unified one"
    assumption = (
        f"Read from {where}: {said} says {slots} seats of {whole_text(per_slot)} tokens; {mode}."
    )
    notes = []
    if live.n_ctx_train is not None and per_slot == live.n_ctx_train and (ctx or 0) > per_slot:
        notes.append(
            f"The model was trained for {whole_text(live.n_ctx_train)} tokens, and llama-server "
            "caps "
            "each seat there."
        )
    if beyond := _past_trained(per_slot, live, shape, need):
        notes.append(beyond)
    return SlotVerdict(
        slots=slots,
        per_slot=per_slot,
        unified=unified,
        shared_total=total,
        ctx=ctx,
        source=where,
        assumption=assumption,
        need=need,
        fix=fix_for(need, tokens_each, slots, shape, kv_type, bool(unified)),
        memory=memory_for(total, shape, kv_type) if total is not None else None,
        notes=tuple(notes),
    )


def _past_trained(
    per_slot: int, live: LiveSlots, shape: ModelShape | None, need: int | None
) -> str | None:
    """Seats the server reports longer than the model was trained for (its own /v1/models
    n_ctx_train, or the model given): read as the server reports them, and said (a seat of
    32,768 tokens beside a model of 8,192 had been promised whole)."""
    trained = [(live.n_ctx_train, "its /v1/models n_ctx_train")]
    if shape is not None:
        trained.append((shape.context_length, f"{shape.name}'s"))
    known = [(n, whose) for n, whose in trained if n is not None and n < per_slot]
    if not known:
        return None
    length, whose = min(known)
    said = f"the model was trained for {whole_text(length)} tokens ({whose})"
    past = f"; --need {whole_text(need)} is past it" if need is not None and need > length else ""
    return (
        f"{live.base_url} reports seats of {whole_text(per_slot)} tokens, and {said}{past}: a "
        "conversation past that is beyond what the model was trained on unless the server "
        "stretches its context (RoPE scaling)"
        + (
            ""
            if whose.startswith("its")
            else f"; is the server running {shape.name if shape else ''}?"
        )
    )
