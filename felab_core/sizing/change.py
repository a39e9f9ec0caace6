"""Before-and-after comparisons as the course words them: 'times as many', 'a cut of N %'.

Tuning results come as two numbers (16 conversations then 50; a 1.6 s wait then 0.5 s). Saying
what changed needs the ratio both ways round, and the cut as a percentage, all from one place so
the wording matches the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from felab_core.sizing.units import as_fraction, decimal_text, require_positive


@dataclass(frozen=True)
class Change:
    """Two values of one quantity, before and after a change."""

    before: Fraction
    after: Fraction

    @property
    def ratio(self) -> Fraction:
        """after ÷ before: 50 ÷ 16 = 3.1 times as many; 0.5 ÷ 1.6 = 0.31 of the wait."""
        return self.after / self.before

    @property
    def inverse(self) -> Fraction:
        """before ÷ after: how many times faster a shorter wait is (1.6 ÷ 0.5 = 3.2)."""
        return self.before / self.after

    @property
    def cut_percent(self) -> Fraction:
        """How much smaller the after value is, in percent (1.6 s to 0.5 s: 69 %)."""
        return (1 - self.ratio) * 100

    def more_text(self) -> str:
        """For counts that grew: '50 ÷ 16 = 3.1 times as many'."""
        return (
            f"{decimal_text(self.after, 0)} ÷ {decimal_text(self.before, 0)} = "
            f"{decimal_text(self.ratio, 1)} times as many"
        )

    def wait_text(self) -> str:
        """For waits that shrank: 'a 69 % cut, 3.2 times faster'."""
        return (
            f"{decimal_text(self.after, 1)} ÷ {decimal_text(self.before, 1)} = "
            f"{decimal_text(self.ratio, 2)} of the wait: "
            f"a {decimal_text(self.cut_percent, 0)} % cut, "
            f"{decimal_text(self.inverse, 1)} times faster"
        )


def compare(before: int | float | str | Fraction, after: int | float | str | Fraction) -> Change:
    """Compare two positive values of one quantity (typed numbers stay exact: 1.6 is 8/5)."""
    b, a = as_fraction(before), as_fraction(after)
    require_positive("the value before", b)
    require_positive("the value after", a)
    return Change(before=b, after=a)
