"""A writing speed set against the speed limit (felab_core.sizing.speed_limit's Ceiling): its
share, a plain verdict, and for one above the limit the likely causes. Speeds and shares are
shown to their first figure where a fixed count of decimals would show one above zero as 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from felab_core.sizing.units import about_text, as_fraction, figure_text, require_speed


class Ceiling(Protocol):
    """What a check reads of speed_limit's Ceiling (named here, so speed_limit, which reads
    this module, is not read back: one arrow between the two)."""

    @property
    def tokens_per_second(self) -> Fraction: ...

    @property
    def lower_bound(self) -> bool: ...


#: The verdict on a speed above a limit that is only a lower bound.
UNVERIFIED = "above the lower-bound limit (unverified)"

# Measured single-stream runs usually land at 55-85 % of the ceiling (peer benchmark notes).
TYPICAL_LOW = Fraction(55, 100)
TYPICAL_HIGH = Fraction(85, 100)

IMPOSSIBLE_CAUSES: tuple[str, ...] = (
    "prompt tokens were counted as written tokens (reading the prompt is far faster than writing)",
    "the reply came from a cache (a repeated prompt or a cached response), not from writing",
    "a different, smaller or more compressed model is loaded than the file you typed",
    "several conversations' tokens were added together (server throughput, not one stream's speed)",
    "speculative decoding or multi-token prediction writes several tokens per read of the weights",
    "the wrong chip or bandwidth was given",
)


@dataclass(frozen=True)
class SpeedCheck:
    """A writing speed set against its ceiling, with a plain verdict."""

    measured: Fraction
    ceiling: Ceiling

    @property
    def share(self) -> Fraction:
        """Measured speed as a fraction of the ceiling (0.8 = 80 %)."""
        return self.measured / self.ceiling.tokens_per_second

    @property
    def impossible(self) -> bool:
        """Above the limit; never above a limit that is only a lower bound (a mixture of
        experts of unknown active share): that speed is `unverified`."""
        return self.share > 1 and not self.ceiling.lower_bound

    @property
    def unverified(self) -> bool:
        """Above a limit that is only a lower bound: neither shown possible nor impossible."""
        return self.share > 1 and self.ceiling.lower_bound

    @property
    def measured_text(self) -> str:
        """The speed as shown, '44.6'; '0.001' where one decimal would show 0.0."""
        return figure_text(self.measured, 1)

    @property
    def percent_text(self) -> str:
        """The share as shown, '80 %'; '0.0002 %' where a whole percent would show 0."""
        return f"{figure_text(self.share * 100, 0)} %"

    @property
    def verdict(self) -> str:
        share = self.share
        if self.unverified:
            return UNVERIFIED
        if share > 1:
            return "impossible"
        if share > TYPICAL_HIGH:
            return "very close to the limit"
        if share < TYPICAL_LOW:
            return "well below the limit"
        return "typical"

    @property
    def explanation(self) -> str:
        limit = about_text(self.ceiling.tokens_per_second)
        head = (
            f"{self.measured_text} tokens per second is {self.percent_text} of the "
            f"{limit} tokens per second this machine can reach."
        )
        verdict = self.verdict
        if verdict == UNVERIFIED:
            return (
                f"{self.measured_text} tokens per second is {self.percent_text} of the at least "
                f"{limit} tokens per second this machine can reach with every expert's weights "
                "read; a mixture of experts reads only its active experts, whose share is not "
                "known here, so this speed may be right: give the model's GGUF (or its "
                "safetensors beside config.json) for the exact limit."
            )
        if verdict == "impossible":
            causes = "; ".join(IMPOSSIBLE_CAUSES)
            return (
                f"{head} That is above the physical limit, so something in the measurement is off. "
                f"Likely causes: {causes}."
            )
        if verdict == "very close to the limit":
            return (
                f"{head} Measured runs rarely pass 85 %: check that only written tokens were "
                "counted and that the model and chip are the ones you typed."
            )
        if verdict == "well below the limit":
            return (
                f"{head} Runs usually reach 55-85 %: something else is slowing it (other work on "
                "the machine, part of the model off the GPU, a debug build, or a long context)."
            )
        return f"{head} Runs usually land at 55-85 % of the limit, so this is in range."


def check_speed(measured_tokens_per_s: int | float | str | Fraction, limit: Ceiling) -> SpeedCheck:
    """Report a writing speed as a share of the ceiling, flagging one above it as impossible."""
    measured = as_fraction(measured_tokens_per_s)
    require_speed("the measured writing speed", measured, "Give tokens per second, e.g. 44.6.")
    return SpeedCheck(measured=measured, ceiling=limit)
