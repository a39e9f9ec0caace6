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

from felab_core.sizing.errors import SizingError
from felab_core.sizing.kv import KvMemory, kv_bytes_per_token, kv_memory
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.units import article, decimal_text, require_whole, whole_text

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


def memory_for(tokens: int, shape: ModelShape | None, kv_type: str) -> KvMemory | None:
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
        memory=memory_for(ctx, shape, kv_type),
        unified=unified,
    )


def fix_for(
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


def check_need(need: int | None, each: int | None = None, shape: ModelShape | None = None) -> None:
    if need is not None:
        require_whole("the tokens a conversation needs", need, "Give prompt plus reply, e.g. 8000.")
    longest = shape.context_length if shape is not None else None
    if need is not None and shape is not None and longest and need > longest:
        # No -c helps: llama-server caps each seat at the model's length (a fix of -c 800768
        # for a 131,072-token model was printed as if it would work).
        raise SizingError(
            f"--need {whole_text(need)} is longer than {shape.name} reads "
            f"({whole_text(longest)} tokens): no seat can hold such a conversation; give at "
            "most that, or a model that reads further"
        )
    if each is not None and longest and each > longest:
        raise SizingError(
            f"--each {whole_text(each)} is longer than {shape.name if shape else 'the model'} "
            f"reads ({whole_text(longest)} tokens): llama-server caps each seat there; give at "
            "most that"
        )
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
    check_need(need, tokens_each, shape)
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
            rounded = pad_ctx(pad_ctx(ctx) // slots) * slots
            held = (
                f"{whole_text(ctx)} tokens"
                if rounded == ctx
                else f"-c {whole_text(ctx)} tokens (rounded to {whole_text(rounded)}, below)"
            )
            assumption = (
                f"With -c {ctx} --parallel {slots} and no -kvu, llama-server splits one cache of "
                f"{held} into {slots} equal seats."
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
        fix=fix_for(need, tokens_each, slots, shape, kv_type, unified),
        memory=memory_for(total, shape, kv_type),
        notes=tuple(notes),
    )


# ---------------------------------------------------------------- a live llama-server
