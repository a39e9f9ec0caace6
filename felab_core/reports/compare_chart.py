"""The picture of `felab compare`: each figure's change from A to B, with its 95 % interval.

One row per figure and load, the change in percent of A's value, the interval as a bar, and
the band of changes too small to name shaded, so "beyond noise" is what lies outside both.
"""

from __future__ import annotations

from pathlib import Path

from felab_core.engine.compare import Comparison


def draw_comparison(comparison: Comparison, path: Path) -> Path:
    """Write the chart as a PNG and return its path."""
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
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": None})
    plt.close(fig)
    return path
