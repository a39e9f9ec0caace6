"""The sizing memo: the course's Day 10 hardware recommendation, written from measured rows.

The results CSV knows what was measured (server, model, preset, writing speed) but not the
machine's memory bandwidth, the model's shape, or how much memory is left for the cache. The
caller supplies those (`MemoInputs`); `build_memo` joins them with the latest row per server and
machine through the sizing package, so every figure is the course's arithmetic, done exactly.
`render_markdown` and `write_charts` only present a `Memo`: they compute nothing new.

One module per step: `model` (inputs and figures), `results` (reading the CSV), `build`,
`markdown` and `charts`; this package's names are the ones callers use.
"""

from __future__ import annotations

from felab_core.reports.memo.build import build_memo
from felab_core.reports.memo.charts import write_charts
from felab_core.reports.memo.markdown import chart_names, render_markdown
from felab_core.reports.memo.model import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_CONTEXTS,
    DEFAULT_MAX_LEN,
    REQUIRED_COLUMNS,
    VIDEO_CONVERSATIONS_AFTER,
    CacheBudget,
    ConcurrencyRow,
    FlagAdvice,
    Machine,
    MachineSpec,
    Memo,
    MemoError,
    MemoInputs,
    TimingRow,
    parse_machine,
)
from felab_core.reports.memo.results import load_results

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_CONTEXTS",
    "DEFAULT_MAX_LEN",
    "REQUIRED_COLUMNS",
    "VIDEO_CONVERSATIONS_AFTER",
    "CacheBudget",
    "ConcurrencyRow",
    "FlagAdvice",
    "Machine",
    "MachineSpec",
    "Memo",
    "MemoError",
    "MemoInputs",
    "TimingRow",
    "build_memo",
    "chart_names",
    "load_results",
    "parse_machine",
    "render_markdown",
    "write_charts",
]
