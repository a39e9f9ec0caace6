"""The picture of `felab compare`: each figure's change from A to B, with its 95 % interval.

One row per figure and load, the change in percent of A's value, the interval as a bar, and
the band of changes too small to name shaded, so "beyond noise" is what lies outside both.
"""

from __future__ import annotations

from pathlib import Path

from felab_core.chart_text import words_as_written
from felab_core.engine.compare import Comparison
from felab_core.engine.record_requests import CompareError
from felab_core.files import COMPARE_CHART, chart_metadata, make_folder_for

#: What --chart writes, by the file's suffix: matplotlib draws each, and each opens as a picture.
#: Metadata that would change with every run (the date, the library's version) is left out.
CHART_FORMATS: dict[str, tuple[str, dict[str, str | None]]] = {
    ".png": ("png", chart_metadata(COMPARE_CHART, "png")),
    ".svg": ("svg", chart_metadata(COMPARE_CHART, "svg")),
    ".pdf": ("pdf", chart_metadata(COMPARE_CHART, "pdf")),
}


def chart_format(path: Path) -> str:
    """The format a --chart path asks for by its suffix; CompareError for any other name.

    matplotlib would write a PNG under any name (chart.txt), which no reader expects."""
    if path.name in ("-", "") or path.name.startswith("."):  # stdout, or a suffix alone
        raise CompareError(
            f"--chart {path}: the chart is a file of its own; name it, such as change.png "
            "(or .svg, .pdf)"
        )
    if path.exists() and not path.is_file():  # /dev/null, a fifo, a folder: nothing to name
        what = "a folder" if path.is_dir() else "not a regular file"
        raise CompareError(
            f"--chart {path} is {what}: the chart is a file of its own; name one to write, "
            "such as change.png (or .svg, .pdf)"
        )
    found = CHART_FORMATS.get(path.suffix.lower())
    if found is None:
        what = f"ends in {path.suffix!r}" if path.suffix else "has no suffix"
        raise CompareError(
            f"--chart {path} {what}: the chart is written as PNG, SVG or PDF, so name the file "
            f"{path.stem or 'chart'}.png (or .svg, .pdf)"
        )
    return found[0]


def draw_comparison(comparison: Comparison, path: Path) -> Path:
    """Write the chart in the format its suffix names (.png, .svg, .pdf) and return its path."""
    with words_as_written():  # the records' file names are text, `$` and all
        return _draw_comparison(comparison, path)


def _draw_comparison(comparison: Comparison, path: Path) -> Path:
    fmt = chart_format(path)
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    rows = [
        (f"{pair.load}: {c.figure.label}", c)
        for pair in comparison.runs
        for c in pair.changes
        if c.a and c.low is not None and c.high is not None and c.diff is not None
    ]
    height = max(2.5, 0.35 * len(rows) + 1.2)
    fig, ax = plt.subplots(figsize=(7, height), dpi=100)
    band = comparison.min_effect * 100
    ax.axvspan(-band, band, color="0.9", label=f"under {band:g} %: not named")
    ax.axvline(0, color="0.5", linewidth=0.8)
    colours = {"better": "tab:green", "worse": "tab:red", "within noise": "0.4"}
    for y, (_label, c) in enumerate(reversed(rows)):
        assert c.a and c.diff is not None and c.low is not None and c.high is not None
        scale = 100 / abs(c.a)
        colour = colours.get(c.verdict, "0.4")
        ax.errorbar(
            c.diff * scale,
            y,
            xerr=[[c.diff * scale - c.low * scale], [c.high * scale - c.diff * scale]],
            fmt="o",
            color=colour,
            capsize=3,
        )
    ax.set_yticks(range(len(rows)), [label for label, _ in reversed(rows)])
    ax.set_xlabel(f"change from {comparison.a_name} to {comparison.b_name} (% of A)")
    ax.set_title("felab compare: change with its 95 % interval")
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    make_folder_for(path, what="chart")  # one missing folder, as bench's files; no tree
    fig.savefig(path, format=fmt, metadata=CHART_FORMATS[path.suffix.lower()][1])
    plt.close(fig)
    return path
