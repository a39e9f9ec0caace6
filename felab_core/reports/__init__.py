"""Reports built from measured results: the sizing memo (Day 10) a field engineer hands a customer.

Reports read the results CSV that `felab bench` writes and the sizing package's arithmetic; they
add no numbers of their own, so every figure in a report can be traced to a row or a formula.
"""

from felab_core.reports.memo import (
    Memo,
    MemoError,
    MemoInputs,
    build_memo,
    chart_names,
    load_results,
    render_markdown,
    write_charts,
)

__all__ = [
    "Memo",
    "MemoError",
    "MemoInputs",
    "build_memo",
    "chart_names",
    "load_results",
    "render_markdown",
    "write_charts",
]
