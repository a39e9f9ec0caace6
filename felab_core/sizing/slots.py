"""The slot trap: how much context each llama-server seat really gets.

llama-server keeps one KV cache of `-c` tokens. With a split cache, `--parallel P` cuts it into P
equal seats, so each conversation gets only c ÷ P tokens. With a unified cache (`-kvu`, which recent
builds also switch on when `--parallel` is left out, starting 4 seats), any one seat may use all c
tokens but the seats together still share those same c. `check_flags` answers from the flags before
the server starts; `read_live` asks a running llama-server (/props, /slots) for the truth.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import httpx

from felab_core.bounded_get import get_bounded
from felab_core.engine.client import connect_failure
from felab_core.redact import url_password_masked
from felab_core.sizing.errors import BadAnswer, SizingError, Unreachable
from felab_core.sizing.kv import KvMemory, kv_bytes_per_token, kv_memory
from felab_core.sizing.model_shape import ModelShape
from felab_core.sizing.units import MAX_TOKENS, article, decimal_text, require_whole, whole_text
from felab_core.text import with_hidden_shown

# Recent llama.cpp rounds the cache length, and each split seat, up to a multiple of this.
LLAMA_CTX_PAD = 256
# What llama-server starts when --parallel is left out (recent builds): 4 seats, one unified cache.
AUTO_SLOTS = 4


#: llama-server reads -c as a 32-bit integer: no cache is sized past this.
LLAMA_MAX_CTX = 2**31 - 1


def pad_ctx(tokens: int, pad: int = LLAMA_CTX_PAD) -> int:
    """Round a token count up to llama.cpp's cache granularity."""
    return -(-tokens // pad) * pad


@dataclass(frozen=True)
class SlotFix:
    """The cure: size -c as seats x tokens each, and what that costs in memory."""

    seats: int
    tokens_each: int
    memory: KvMemory | None
    unified: bool

    @property
    def ctx(self) -> int:
        return self.seats * self.tokens_each

    @property
    def most_seats(self) -> int:
        """Seats of `tokens_each` that one llama-server's largest -c holds."""
        return min(self.seats, LLAMA_MAX_CTX // self.tokens_each)

    @property
    def flags(self) -> str:
        mode = " -kvu" if self.unified else ""
        if self.ctx <= LLAMA_MAX_CTX:
            return f"-c {self.ctx} --parallel {self.seats}{mode}"
        if self.most_seats < 1:
            return "none: one conversation is past any -c"
        seats = self.most_seats
        return f"-c {seats * self.tokens_each} --parallel {seats}{mode} (fewer seats)"

    @property
    def explanation(self) -> str:
        sized = (
            f"For {self.seats} seats of {whole_text(self.tokens_each)} tokens: "
            f"{self.seats} x {whole_text(self.tokens_each)} = {whole_text(self.ctx)}"
        )
        if self.ctx > LLAMA_MAX_CTX:
            largest = whole_text(LLAMA_MAX_CTX)
            if self.most_seats < 1:
                return (
                    f"No fix on llama-server: a {whole_text(self.tokens_each)}-token "
                    f"conversation is past the largest -c it takes ({largest})."
                )
            return (
                f"The fix as sized is past the largest -c llama-server takes ({largest}). "
                f"{sized}. One server holds at most {self.most_seats} such seats: start it "
                f"with {self.flags.removesuffix(' (fewer seats)')}, and more servers for the rest."
            )
        text = f"The fix: set -c to seats x tokens each. {sized}, so start llama-server with "
        text += f"{self.flags}."
        if self.memory is not None:
            text += f" The cache then takes {self.memory.explanation}"
        return text


@dataclass(frozen=True)
class SlotVerdict:
    """What each seat gets, whether a conversation of `need` tokens fits, and the fix."""

    slots: int
    per_slot: int
    unified: bool | None
    shared_total: int | None
    ctx: int | None
    source: str
    assumption: str
    need: int | None = None
    fix: SlotFix | None = None
    memory: KvMemory | None = None
    notes: tuple[str, ...] = ()

    @property
    def ratio(self) -> Fraction | None:
        """The conversation's length in seats' worth of room (8,000 ÷ 2,048 = 3.9)."""
        if self.need is None:
            return None
        return Fraction(self.need, self.per_slot)

    @property
    def fits(self) -> bool | None:
        """Does one conversation of `need` tokens fit in one seat?"""
        if self.need is None:
            return None
        return self.need <= self.per_slot

    @property
    def all_seats_fit(self) -> bool | None:
        """Can every seat hold `need` tokens at the same moment?"""
        if self.need is None or self.shared_total is None:
            return None
        return self.need * self.slots <= self.shared_total

    @property
    def verdict(self) -> str:
        """One line: fits, fits one at a time, does not fit, or unknown."""
        if self.need is None:
            return f"each seat: up to {whole_text(self.per_slot)} tokens"
        if not self.fits:
            return "does not fit"
        if self.all_seats_fit is False:
            return "fits one at a time, not on every seat at once"
        return "fits"

    @property
    def explanation(self) -> str:
        parts = [self.assumption]
        s, per = self.slots, self.per_slot
        if self.unified is False or (self.unified is None and s == 1):
            if self.ctx is not None and s > 1:
                parts.append(
                    f"The {whole_text(self.shared_total or self.ctx)} tokens are shared out, not "
                    f"given to each person: each of the {s} seats gets only "
                    f"{whole_text(self.shared_total or self.ctx)} ÷ {s} = {whole_text(per)} tokens."
                )
            else:
                seats = "The one seat" if s == 1 else f"Each of the {s} seats"
                parts.append(f"{seats} may hold up to {whole_text(per)} tokens.")
        elif self.unified:
            total = self.shared_total if self.shared_total is not None else per
            parts.append(
                f"Any one of the {s} seats may use up to {whole_text(per)} tokens, but all {s} "
                f"together share the same {whole_text(total)}."
            )
        else:
            parts.append(
                f"The server reports {s} seats of up to {whole_text(per)} tokens each but not "
                "whether they share one cache: if the cache is split, all seats get that much at "
                f"once; if it is unified, {whole_text(per)} is the whole shared cache."
            )
        if self.need is not None:
            ratio = self.ratio
            assert ratio is not None
            if not self.fits:
                parts.append(
                    f"{article(self.need).capitalize()} {whole_text(self.need)}-token conversation "
                    f"is {whole_text(self.need)} ÷ "
                    f"{whole_text(per)} = {decimal_text(ratio, 1)} times one seat's room, so it "
                    "does not fit: llama-server cuts it short or refuses it."
                )
            else:
                parts.append(
                    f"{article(self.need).capitalize()} {whole_text(self.need)}-token "
                    "conversation fits in "
                    "one seat "
                    f"({decimal_text(ratio * 100, 0)} % of its {whole_text(per)} tokens)."
                )
                if self.all_seats_fit is False and self.shared_total is not None:
                    together = self.need * s
                    parts.append(
                        f"But {s} of them at once need {s} x {whole_text(self.need)} = "
                        f"{whole_text(together)} tokens, "
                        f"{decimal_text(Fraction(together, self.shared_total), 1)} "
                        f"times the {whole_text(self.shared_total)} they share, so they cannot all "
                        "run at full length together."
                    )
        if self.memory is not None:
            parts.append(f"This cache takes {self.memory.explanation}")
        parts.extend(self.notes)
        needs_fix = self.fits is False or self.all_seats_fit is False
        if self.fix is not None and needs_fix:
            parts.append(self.fix.explanation)
        return " ".join(parts)


def _memory_for(tokens: int, shape: ModelShape | None, kv_type: str) -> KvMemory | None:
    if shape is None:
        return None
    return kv_memory(tokens, kv_bytes_per_token(shape, kv_type))


def slot_fix(
    seats: int,
    tokens_each: int,
    shape: ModelShape | None = None,
    kv_type: str = "f16",
    unified: bool = False,
) -> SlotFix:
    """-c for `seats` conversations of `tokens_each` tokens at once, and its cache memory."""
    require_whole("the number of seats", seats, "It is --parallel, e.g. 4.")
    require_whole("the tokens each seat needs", tokens_each)
    ctx = seats * tokens_each
    return SlotFix(
        seats=seats,
        tokens_each=tokens_each,
        memory=_memory_for(ctx, shape, kv_type),
        unified=unified,
    )


def _fix_for(
    need: int | None,
    tokens_each: int | None,
    seats: int,
    shape: ModelShape | None,
    kv_type: str,
    unified: bool,
) -> SlotFix | None:
    each = tokens_each if tokens_each is not None else (pad_ctx(need) if need is not None else None)
    if each is None:
        return None
    return slot_fix(seats, each, shape, kv_type, unified)


def _check_need(need: int | None, each: int | None = None) -> None:
    if need is not None:
        require_whole("the tokens a conversation needs", need, "Give prompt plus reply, e.g. 8000.")
    if need is not None and each is not None and each < need:
        raise SizingError(
            f"--each {each} is less than --need {need}: each seat must hold a whole "
            "conversation; leave --each out for --need rounded up to 256"
        )


def check_flags(
    ctx: int,
    parallel: int | None,
    unified: bool,
    *,
    need: int | None = None,
    shape: ModelShape | None = None,
    kv_type: str = "f16",
    tokens_each: int | None = None,
) -> SlotVerdict:
    """What each seat gets from llama-server flags, before the server starts.

    `parallel=None` means --parallel was left out: recent builds then start 4 seats sharing one
    unified cache. Older builds started one seat; the assumption is stated in the result.
    """
    if ctx == 0:
        raise SizingError(
            "-c 0 tells llama-server to use the model's own training length; give that number "
            "instead (felab size kv --gguf FILE prints it) so the seats can be worked out"
        )
    require_whole("-c (the cache length in tokens)", ctx, "For example -c 8192.")
    _check_need(need, tokens_each)
    notes: list[str] = []
    if parallel is None:
        slots = AUTO_SLOTS
        unified = True
        assumption = (
            f"--parallel was left out, so this assumes a recent llama-server: it starts "
            f"{AUTO_SLOTS} seats sharing one unified cache (older builds started a single seat)."
        )
    else:
        require_whole(
            "--parallel (the number of seats)",
            parallel,
            "Leave --parallel out to let llama-server choose.",
        )
        slots = parallel
        if not unified and pad_ctx(ctx) // slots < 1:
            raise SizingError(
                f"-c {ctx} split over --parallel {slots} seats leaves less than one token a seat: "
                "fewer seats, or a longer cache"
            )
        if unified:
            assumption = f"With -kvu the {slots} seats share one unified cache of -c {ctx} tokens."
        elif slots == 1:
            assumption = (
                f"With -c {ctx} --parallel 1, llama-server keeps one cache of {whole_text(ctx)} "
                "tokens for its one seat."
            )
        else:
            assumption = (
                f"With -c {ctx} --parallel {slots} and no -kvu, llama-server splits one cache of "
                f"{whole_text(ctx)} tokens into {slots} equal seats."
            )

    total = pad_ctx(ctx)
    if unified:
        per_slot = total
    else:
        per_slot = pad_ctx(total // slots)
        total = per_slot * slots
    if total != ctx:
        notes.append(
            f"Recent llama-server builds round the cache to multiples of {LLAMA_CTX_PAD} tokens, "
            "so "
            f"it holds {whole_text(total)} tokens, not {whole_text(ctx)}; the live server's /slots "
            "shows what your build did."
        )
    if shape is not None and shape.context_length is not None and per_slot > shape.context_length:
        notes.append(
            f"{shape.name} was trained for {whole_text(shape.context_length)} tokens, and "
            "llama-server caps each seat there."
        )
        per_slot = shape.context_length
    return SlotVerdict(
        slots=slots,
        per_slot=per_slot,
        unified=unified,
        shared_total=total,
        ctx=ctx,
        source="flags",
        assumption=assumption,
        need=need,
        fix=_fix_for(need, tokens_each, slots, shape, kv_type, unified),
        memory=_memory_for(total, shape, kv_type),
        notes=tuple(notes),
    )


# ---------------------------------------------------------------- a live llama-server


def _not_llama(url: str, why: str) -> SizingError:
    return SizingError(
        f"the server at {url} does not look like llama-server ({why}). --url must point at "
        "llama.cpp's llama-server (for example http://127.0.0.1:8080); vLLM, Ollama and MLX have "
        "no /props or /slots. For vLLM use `felab size capacity --vllm-log` on its startup log."
    )


def _get_json(client: httpx.Client, url: str) -> tuple[int, Any]:
    try:
        response = get_bounded(client, url)
    except httpx.HTTPError as exc:
        raise Unreachable(connect_failure(exc, url_password_masked(url))) from None
    if response.status_code != 200:
        return response.status_code, None
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
    http = client or httpx.Client(timeout=timeout)
    try:
        status, props = _get_json(http, f"{base}/props")
        if status != 200:
            raise _not_llama(shown, f"GET /props answered HTTP {status}")
        if not isinstance(props, dict):
            raise _not_llama(shown, "/props did not answer with a JSON object")
        settings = props.get("default_generation_settings")
        total_slots = props.get("total_slots")
        if not isinstance(settings, dict) or not isinstance(total_slots, int):
            raise _not_llama(shown, "/props has no total_slots or default_generation_settings")
        props_ctx = settings.get("n_ctx")
        if not isinstance(props_ctx, int):
            raise _not_llama(shown, "/props gives no n_ctx for its seats")
        _reported(shown, "/props", "total_slots", total_slots, MAX_SLOTS)
        _reported(shown, "/props", "n_ctx", props_ctx, MAX_TOKENS)
        status, slots = _get_json(http, f"{base}/slots")
        per_slot: tuple[int, ...]
        if status == 200 and isinstance(slots, list) and slots:
            per_slot = tuple(
                _reported(shown, "/slots", "n_ctx", s.get("n_ctx", props_ctx), MAX_TOKENS)
                for s in slots[:MAX_SLOTS]
                if isinstance(s, dict)
            )
            endpoint = True
        else:
            per_slot = (props_ctx,) * total_slots
            endpoint = False
        n_train = None
        size = None
        status, models = _get_json(http, f"{base}/v1/models")
        if status == 200 and isinstance(models, dict):
            listed = models.get("data")
            for item in listed if isinstance(listed, list) else []:
                meta = item.get("meta") if isinstance(item, dict) else None
                if isinstance(meta, dict):
                    n_train = (
                        meta.get("n_ctx_train")
                        if isinstance(meta.get("n_ctx_train"), int)
                        else None
                    )
                    size = meta.get("size") if isinstance(meta.get("size"), int) else None
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
    _check_need(need)
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
    return SlotVerdict(
        slots=slots,
        per_slot=per_slot,
        unified=unified,
        shared_total=total,
        ctx=ctx,
        source=where,
        assumption=assumption,
        need=need,
        fix=_fix_for(need, tokens_each, slots, shape, kv_type, bool(unified)),
        memory=_memory_for(total, shape, kv_type) if total is not None else None,
        notes=tuple(notes),
    )
