"""The memo's two charts (speed against the limit, conversations against the cache), as PNG."""

from __future__ import annotations

from pathlib import Path

from felab_core.chart_text import words_as_written
from felab_core.files import MEMO_CHART, chart_metadata
from felab_core.reports.memo.markdown import chart_names
from felab_core.reports.memo.model import Memo
from felab_core.sizing import speed_limit
from felab_core.sizing.units import about_text, figure_text, whole_text

_LIMIT_COLORS = ("#333333", "#8e44ad", "#b9770e", "#117a65")


def write_charts(memo: Memo, directory: Path, stem: str = "memo") -> tuple[Path, Path]:
    """Two PNGs beside the memo: writing speed vs the speed limit, conversations vs context."""
    with words_as_written():  # a model or host named `a$\frac{b$` is text
        return _write_charts(memo, directory, stem)


def _write_charts(memo: Memo, directory: Path, stem: str) -> tuple[Path, Path]:
    from matplotlib.figure import Figure  # no pyplot: no global backend or window state

    directory.mkdir(parents=True, exist_ok=True)
    speed_name, conc_name = chart_names(stem)
    speed_path, conc_path = directory / speed_name, directory / conc_name

    fig = Figure(figsize=(8, 4.6), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    labels = [
        r.server_label if len(memo.machines) == 1 else f"{r.server_label}\n{r.host}"
        for r in memo.rows
    ]
    values = [float(r.writing_tps) if r.writing_tps is not None else 0.0 for r in memo.rows]
    colors = [
        "#c0392b" if r.check is not None and r.check.impossible else "#2e86c1" for r in memo.rows
    ]
    bars = ax.bar(range(len(values)), values, color=colors, width=0.6, zorder=2)
    top = max([*values, *(float(m.limit.tokens_per_second) for m in memo.machines)]) * 1.32
    for bar, r in zip(bars, memo.rows, strict=True):
        text = (
            "no data"
            if r.writing_tps is None
            else (f"{figure_text(r.writing_tps, 1)}\n{r.percent_text}")
        )
        if r.check is not None and r.check.impossible:
            text += "\nimpossible"
        ax.annotate(
            text,
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=9,
        )
    for n, m in enumerate(memo.machines):
        idx = [i for i, r in enumerate(memo.rows) if r.machine == m]
        limit = float(m.limit.tokens_per_second)
        lo, hi = min(idx) - 0.45, max(idx) + 0.45
        ax.hlines(
            limit,
            lo,
            hi,
            colors=_LIMIT_COLORS[n % len(_LIMIT_COLORS)],
            linestyles="--",
            zorder=3,
            label=f"speed limit, {m.label}: {about_text(m.limit.tokens_per_second)} tokens/s",
        )
        ax.fill_between(
            [lo, hi],
            limit * float(speed_limit.TYPICAL_LOW),
            limit * float(speed_limit.TYPICAL_HIGH),
            color="#7dcea0",
            alpha=0.25,
            zorder=1,
            label="typical runs: 55-85 % of the limit" if n == 0 else None,
        )
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_ylim(0, top)
    ax.set_ylabel("writing speed, tokens per second (p50)")
    ax.set_title(f"{memo.shape.name}: writing speed for one user vs the speed limit", fontsize=11)
    ax.grid(axis="y", alpha=0.3, zorder=0)
    ax.legend(loc="upper left", fontsize=9)
    fig.savefig(speed_path, format="png", metadata=chart_metadata(MEMO_CHART, "png"))

    fig = Figure(figsize=(8, 4.6), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    xs = list(range(len(memo.concurrency)))
    base = [c.capacity.whole_requests for c in memo.concurrency]
    dtype = memo.per_token.key_dtype.name
    has_fp8 = any(c.fp8 is not None for c in memo.concurrency)
    width = 0.38 if has_fp8 else 0.6
    shift = width / 2 if has_fp8 else 0.0
    b1 = ax.bar(
        [x - shift for x in xs], base, width, color="#2e86c1", label=f"{dtype} cache", zorder=2
    )
    ax.bar_label(b1, fontsize=8, padding=2)
    if has_fp8:
        fp8 = [c.fp8.whole_requests if c.fp8 is not None else 0 for c in memo.concurrency]
        b2 = ax.bar(
            [x + shift for x in xs], fp8, width, color="#e67e22", label="fp8 cache", zorder=2
        )
        ax.bar_label(b2, fontsize=8, padding=2)
    ticks = [
        _k(c.context) + ("\n(as planned)" if c.context == memo.max_len else "")
        for c in memo.concurrency
    ]
    ax.set_xticks(xs, ticks)
    ax.set_xlabel("tokens per conversation (max model length)")
    ax.set_ylabel("conversations at once (worst case)")
    ax.set_title(f"{memo.shape.name}: conversations that fit in {memo.budget.short}", fontsize=11)
    ax.set_ylim(
        0, max([*base, *([c.fp8.whole_requests for c in memo.concurrency if c.fp8])]) * 1.15 + 1
    )
    ax.grid(axis="y", alpha=0.3, zorder=0)
    ax.legend(fontsize=9)
    fig.savefig(conc_path, format="png", metadata=chart_metadata(MEMO_CHART, "png"))
    return speed_path, conc_path


def _k(tokens: int) -> str:
    """8192 -> '8K', 131072 -> '128K', 1000 -> '1,000': how people name context lengths."""
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else whole_text(tokens)
