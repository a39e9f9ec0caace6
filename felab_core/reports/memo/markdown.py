"""The memo as Markdown: what a student pastes into their notes, section by section."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from fractions import Fraction

from felab_core.reports.memo.model import Memo
from felab_core.sizing.units import (
    about_text,
    binary_size_text,
    both_ways,
    decimal_text,
    figure_text,
    mib_text,
    size_text,
    tidy_text,
    whole_text,
)
from felab_core.text import literal

#: A pipe not escaped already (a CSV field comes through literal(), which escapes its own).
_BARE_PIPE = re.compile(r"(?<!\\)\|")


def _field(text: str) -> str:
    """A CSV field (as the servers answered) as text: no link, image, emphasis or HTML."""
    return literal(text).replace("<", "\\<")


def _cell(text: str) -> str:
    return _BARE_PIPE.sub(r"\\|", text).replace("\n", " ")


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> str:
    right = set(right)
    align = ["---:" if i in right else "---" for i in range(len(head))]
    lines = ["| " + " | ".join(_cell(h) for h in head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _seconds(value: Fraction | None) -> str:
    return "-" if value is None else decimal_text(value, 2)


def _when_text(stamp: datetime) -> str:
    return stamp.strftime("%Y-%m-%d %H:%M")


def _plural(n: int, word: str) -> str:
    return f"{whole_text(n)} {word}{'' if n == 1 else 's'}"


def _summary(memo: Memo) -> list[str]:
    lines: list[str] = []
    believable = [
        r
        for r in memo.rows
        if r.check is not None and not r.check.impossible and not r.check.unverified
    ]
    if believable:
        best = max(believable, key=lambda r: r.check.share if r.check else Fraction(0))
        assert best.check is not None
        who = "for one user" if best.concurrency == 1 and not best.rate else "per user"
        lines.append(
            f"- **Fastest believable server: {best.name}**, {best.check.measured_text} "
            f"tokens per second {who}, {best.percent_text} of the speed limit."
        )
    for m in memo.machines:
        if m.limit.lower_bound:  # a mixture read whole: what the memo knows is a floor
            lines.append(
                f"- **Speed limit on {m.label}: at least {about_text(m.limit.tokens_per_second)} "
                f"tokens per second** for one conversation ({m.bandwidth_text} ÷ "
                f"{size_text(memo.weights, 1)}, every expert's weights; a token reads only the "
                "active experts', so the real limit is higher)."
            )
            continue
        lines.append(
            f"- **Speed limit on {m.label}: {about_text(m.limit.tokens_per_second)} tokens per "
            f"second** for one conversation ({m.bandwidth_text} ÷ {size_text(memo.weights, 1)}); "
            "measured runs usually reach 55-85 % of it."
        )
    head = memo.headline
    fp8 = (
        f"; an 8-bit (fp8) cache makes it **{whole_text(head.fp8.whole_requests)}**"
        if head.fp8 is not None
        else ""
    )
    lines.append(
        f"- **{_plural(head.capacity.whole_requests, 'conversation')} at once** at "
        f"{whole_text(memo.max_len)} tokens each, with {memo.budget.words} (worst case, every "
        f"conversation full length){fp8}."
    )
    if memo.impossible:
        names = ", ".join(r.name for r in memo.impossible)
        lines.append(
            f"- **{_plural(len(memo.impossible), 'row')} above the speed limit cannot be right:** "
            f"{names}. Find the cause before quoting it."
        )
    unverified = [r for r in memo.rows if r.check is not None and r.check.unverified]
    if unverified:
        names = ", ".join(r.name for r in unverified)
        lines.append(
            f"- **{_plural(len(unverified), 'row')} above the lower-bound limit, unverified:** "
            f"{names}. Give the model's GGUF (or its safetensors beside config.json) for the "
            "exact limit."
        )
    lines.append(
        "- **Try first:** prefix caching, chunked prefill and an fp8 cache. Then, and only then, "
        "argue about hardware."
    )
    return lines


def _machine_and_model(memo: Memo) -> list[str]:
    rows: list[list[str]] = []
    for m in memo.machines:
        what = m.label if m.chip is None else f"{m.chip.name} ({m.chip.family}, {m.chip.memory})"
        rows.append([f"machine ({', '.join(m.hosts)})", what])
        rows.append(["memory bandwidth", m.bandwidth_text])
    s = memo.shape
    rows.append(["model", s.name])
    rows.append(["weights read per token", f"{both_ways(memo.weights)} ({memo.weights_note})"])
    if memo.memory_line:  # the sum the memory check held to each machine's memory
        rows.append(["memory held (weights + cache)", memo.memory_line])
    rows.append(["KV cache type", memo.per_token.key_dtype.name])
    if s.context_length:
        rows.append(["trained context", f"{whole_text(s.context_length)} tokens"])
    rows.append(["model shape from", s.source])
    out = ["## Machine and model", "", _table(["", "value"], rows), ""]
    for note in memo.memory_notes:
        out += [note, ""]
    for i, m in enumerate(memo.machines):
        if m.chip is not None:
            out += [f"Bandwidth source: {m.chip.source}.", ""]
        out += [m.limit.explanation, ""]
        out += [memo.limit_notes[i], ""] if i < len(memo.limit_notes) else []
    return [*out, s.describe(), ""]


def _timing(memo: Memo, chart: str | None) -> list[str]:
    out = [
        "## Latest timing rows",
        "",
        "The newest run of each server on each machine. Writing speed is what one person sees "
        "appear each second once the reply starts (p50, tokens per second); the percentage sets "
        "it against the machine's speed limit.",
        "",
    ]
    head = [
        "machine",
        "server",
        "model",
        "preset",
        "users",
        "measured (UTC)",
        "writing speed",
        "% of speed limit",
        "verdict",
        "TTFT p50 / p95 (s)",
    ]
    rows = [
        [
            _field(r.host),  # "[x](http://...)" from a server's answer is shown as text
            r.server_label + (f" {_field(r.server_version)}" if r.server_version else ""),
            _field(r.model) if r.model else "-",
            _field(r.preset) if r.preset else "-",
            r.users_text,
            _when_text(r.measured_at),
            figure_text(r.writing_tps, 1) if r.writing_tps is not None else "-",
            r.percent_text,
            f"**{r.verdict}**" if r.verdict == "impossible" else r.verdict,
            f"{_seconds(r.ttft_p50_s)} / {_seconds(r.ttft_p95_s)}",
        ]
        for r in memo.rows
    ]
    out += [_table(head, rows, right=(4, 6, 7, 9)), ""]
    older = sum(r.older_rows for r in memo.rows)
    if older:
        verb = "is" if older == 1 else "are"
        out += [
            f"{_plural(older, 'older row')} for the same servers {verb} left out: only the "
            "newest run of each counts.",
            "",
        ]
    for r in memo.impossible:
        assert r.check is not None
        out += [f"**{r.name} is impossible.** {r.check.explanation}", ""]
    for r in memo.rows:
        if r.check is not None and r.check.unverified:
            out += [f"**{r.name} is unverified.** {r.check.explanation}", ""]
    for note in memo.row_notes:
        out += [note, ""]
    if chart:
        out += [f"![Writing speed per server against the speed limit]({chart})", ""]
    return out


def _kv_math(memo: Memo) -> list[str]:
    dtype = memo.per_token.key_dtype.name
    out = ["## KV cache math", "", memo.per_token.explanation, ""]
    head = ["tokens in one conversation", f"cache ({dtype})"]
    rows = [
        [
            whole_text(c.context),
            f"{mib_text(c.per_conversation.bytes)} = {size_text(c.per_conversation.bytes, 2)}",
        ]
        for c in memo.concurrency
    ]
    if not memo.already_fp8:
        out += [
            f"In fp8 (8 bits per number): {memo.per_token_fp8.formula} "
            f"({binary_size_text(memo.per_token_fp8.bytes)}), half as much.",
            "",
        ]
        head.append("cache (fp8)")
        for row, c in zip(rows, memo.concurrency, strict=True):
            fp8 = c.per_conversation_fp8.bytes
            row.append(f"{mib_text(fp8)} = {size_text(fp8, 2)}")
    out += [_table(head, rows, right=range(len(head))), ""]
    for note in memo.context_notes:
        out += [note, ""]
    return out


def _concurrency(memo: Memo, chart: str | None) -> list[str]:
    out = [
        "## Conversations at once",
        "",
        f"Cache memory: {memo.budget.source}",
        "",
        memo.headline.capacity.explanation,
        "",
    ]
    head = [
        "tokens per conversation",
        "cache tokens ÷ length",
        f"conversations ({memo.per_token.key_dtype.name})",
    ]
    rows = [
        [
            whole_text(c.context) + (" (as planned)" if c.context == memo.max_len else ""),
            decimal_text(c.capacity.concurrency, 2),
            whole_text(c.capacity.whole_requests),
        ]
        for c in memo.concurrency
    ]
    if not memo.already_fp8:
        head += ["conversations (fp8 cache)", "fp8 gain"]
        for row, c in zip(rows, memo.concurrency, strict=True):
            row.append("-" if c.fp8 is None else whole_text(c.fp8.whole_requests))
            row.append("-" if c.fp8_factor is None else f"x{tidy_text(c.fp8_factor)}")
    out += [
        _table(head, rows, right=range(len(head))),
        "",
        "Each figure is the worst case, every conversation using its full length: what you can "
        "promise. Shorter conversations leave room for more.",
        "",
        *(f"- {w.explanation}" for w in memo.what_ifs),
        "",
        "Before capping the length, check how long the customer's real conversations are: a "
        "limit below what they need breaks their product.",
        "",
    ]
    if chart:
        out += [f"![Conversations at once by context length]({chart})", ""]
    return out


def _flag_lines(memo: Memo) -> list[str]:
    out = [
        "## Flags to try first",
        "",
        "These are vLLM's settings, the server built for many users at once. Same machine, same "
        "model: only the settings change.",
        "",
    ]
    for i, f in enumerate(memo.flags, 1):
        out += [f"{i}. **{f.title}** (`{f.flag}`): {f.buys}", f"   {f.numbers}"]
        if f.default_note:
            out.append(f"   {f.default_note}")
        out.append("")
    return [*out, "Then, and only then, argue about hardware.", ""]


_HOW_TO_READ = [
    "## How to read this memo",
    "",
    "- Speed limit: to write one token the machine reads every weight once, so one conversation "
    "can never write faster than memory bandwidth ÷ bytes of weights. Measured runs usually land "
    "at 55-85 % of it; above 100 % is impossible and means the measurement is off.",
    "- KV cache (notes): the model's notes on each conversation so far, kept in memory; they grow "
    "with every token.",
    "- Conversations at once: cache tokens ÷ tokens per conversation, counted in whole blocks.",
    "- Every number here comes from felab's sizing functions; rerun `felab memo` after new "
    "`felab bench` runs.",
    "",
]


def chart_names(stem: str = "memo") -> tuple[str, str]:
    """The two chart files for a memo named STEM.md: STEM-speed.png, STEM-concurrency.png."""
    return f"{stem}-speed.png", f"{stem}-concurrency.png"


def render_markdown(memo: Memo, *, charts: tuple[str, str] | None = chart_names()) -> str:
    """The memo as Markdown a person can hand a customer; `charts` are linked by file name."""
    newest = max((r.measured_at for r in memo.rows), default=None)
    intro = (
        f"Written by `felab memo` from `{memo.source}`: {_plural(memo.rows_read, 'timing row')}, "
        "the newest run per server and machine shown"
        + (f" (latest {_when_text(newest)} UTC)." if newest else ".")
    )
    out = [f"# {memo.title}", "", intro, "", "## Summary", "", *_summary(memo), ""]
    out += _machine_and_model(memo)
    out += _timing(memo, charts[0] if charts else None)
    out += _kv_math(memo)
    out += _concurrency(memo, charts[1] if charts else None)
    out += _flag_lines(memo)
    out += _HOW_TO_READ
    return "\n".join(out)
