"""`--repeat N`: the same run N times, each headline figure with its 95 % interval.

One run's percentile is one draw: the machine, the server's batching and the schedule's seed
all move it. Repeating the run and giving the mean of each figure with a Student-t interval over
the repeats says how far the next run may land, which a single run cannot.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from felab_core.engine.metrics import RunSummary

# Two-sided 95 % Student-t critical values by degrees of freedom (1-30); 1.96 beyond.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
MAX_REPEATS = 100


def t95(degrees: int) -> float:
    return _T95[degrees - 1] if 1 <= degrees <= len(_T95) else 1.96


@dataclass(frozen=True, slots=True)
class Headline:
    key: str
    label: str
    unit: str
    read: Callable[[RunSummary], float | None]


def _stat(name: str, which: str, scale: float) -> Callable[[RunSummary], float | None]:
    def read(s: RunSummary) -> float | None:
        stats = getattr(s, name)
        return None if stats is None else getattr(stats, which) * scale

    return read


HEADLINES: tuple[Headline, ...] = (
    Headline("writing_tps_p50", "writing speed p50", "tok/s", _stat("writing_tps", "p50", 1)),
    Headline("ttft_p50", "TTFT p50", "ms", _stat("ttft_s", "p50", 1e3)),
    Headline("ttft_p95", "TTFT p95", "ms", _stat("ttft_s", "p95", 1e3)),
    Headline("itl_p50", "ITL p50", "ms", _stat("itl_s", "p50", 1e3)),
    Headline("tpot_p50", "TPOT p50", "ms", _stat("tpot_s", "p50", 1e3)),
    Headline("e2e_p50", "end-to-end p50", "s", _stat("e2e_s", "p50", 1)),
    Headline("output_tps", "total tok/s", "tok/s", lambda s: s.output_tps),
)


@dataclass(frozen=True, slots=True)
class Interval:
    """One figure over the repeats: mean, 95 % half-width, spread and each repeat's value."""

    headline: Headline
    values: tuple[float, ...]

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def half_width(self) -> float | None:
        n = len(self.values)
        if n < 2:
            return None
        return t95(n - 1) * statistics.stdev(self.values) / math.sqrt(n)

    @property
    def relative(self) -> float | None:
        """The half-width as a share of the mean: how sure the figure is."""
        if self.mean is None or self.half_width is None or not self.mean:
            return None
        return self.half_width / abs(self.mean)


def measured(summary: RunSummary) -> bool:
    """A repeat with no request that succeeded measured nothing: its 0 tok/s is not a draw of
    the server's speed, and averaged in it had dragged every mean down without a word."""
    return summary.ok > 0


def intervals(summaries: Sequence[RunSummary]) -> list[Interval]:
    """Every headline figure over the repeats of one run (one load, one target), leaving out
    a repeat in which no request succeeded."""
    out = []
    kept = [s for s in summaries if measured(s)]
    for h in HEADLINES:
        values = [h.read(s) for s in kept]
        finite = tuple(v for v in values if v is not None and math.isfinite(v))
        out.append(Interval(h, finite))
    return out
