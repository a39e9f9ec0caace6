"""What a run sends and when: prompts, arrival schedules and the named presets.

Everything is derived from a seed, so two students who run the same preset send the same bytes
in the same rhythm and their rows compare.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from felab_core.engine.words import synthetic_words

if TYPE_CHECKING:
    from felab_core.engine.trace import Trace

DEFAULT_PROMPT = (
    "Explain in plain words, step by step, how a busy restaurant kitchen keeps every table "
    "served during the dinner rush. Write at least three long paragraphs."
)


#: The bounds `felab bench` holds every workload to (its --help says them). Beyond them a run
#: is a typo, not a measurement: a billion users exhaust memory, a million-token prompt takes
#: the client longer to write than the server to read.
MAX_CONCURRENCY = 4096
MAX_SWEEP = 64
MAX_RATE = 100_000.0
MIN_RATE = 0.01  # one request every 100 s: slower, and a run of a few requests takes hours
MAX_BURSTINESS = 1000.0
#: Burstier than this, the gamma gaps degenerate (almost all requests at one instant).
MIN_BURSTINESS = 0.01
MAX_REQUESTS = 1_000_000
MAX_DURATION_S = 86_400.0
#: The shortest run: less sends no request at all.
MIN_DURATION_S = 0.1
MAX_WARMUP = 1_000  # a warm-up fills caches and loads the model: more is a run of its own
MAX_TOKENS = 262_144


@dataclass(frozen=True, slots=True)
class PromptPlan:
    """How prompts are built: a fixed text, or synthetic words of about N tokens."""

    prompt_tokens: int | None = None  # None: the default instruction prompt
    shared_prefix_tokens: int = 0
    seed: int = 0
    default: str = DEFAULT_PROMPT  # the fixed text, when no size is asked for

    def prompts(self) -> Iterator[str]:
        """Endless prompts; each opens with the shared prefix, then a per-request nonce.

        The nonce stops a server's prefix cache from reusing anything past the shared part.
        """
        prefix = ""
        if self.shared_prefix_tokens > 0:
            prefix_rng = random.Random(f"prefix-{self.seed}")
            prefix = synthetic_words(prefix_rng, self.shared_prefix_tokens) + " "
        rng = random.Random(f"prompts-{self.seed}")
        i = 0
        while True:
            nonce = f"[request {i} {rng.randrange(16**6):06x}]"
            if self.prompt_tokens is None:
                body = self.default
            else:
                # The nonce costs a few tokens; keep the total near the asked-for size.
                rest = self.prompt_tokens - self.shared_prefix_tokens - 6
                body = synthetic_words(rng, rest)
            yield f"{prefix}{nonce} {body}".strip()
            i += 1


# The function a tool-call workload offers (OpenAI's format; Ollama reads the same).
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather forecast for a city, day by day.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Lisbon"},
                "days": {"type": "integer", "description": "How many days ahead, 1-14"},
                "notes": {"type": "string", "description": "What the user wants to know"},
            },
            "required": ["city", "days", "notes"],
        },
    },
}
TOOL_PROMPT = (
    "Call get_weather for Lisbon for the next 7 days, and in notes write, at length, every "
    "question a traveller packing for a week of walking would want the forecast to answer."
)


def turn_message(seed: int, session: int, turn: int, words: int | None) -> str:
    """A user's message in a multi-turn session: its own words, marked with where it sits."""
    rng = random.Random(f"turn-{seed}-{session}-{turn}")
    if words is None:
        return f"[session {session} turn {turn}] " + (
            DEFAULT_PROMPT if turn == 1 else "Go on: say more about that, with an example."
        )
    return f"[session {session} turn {turn}] " + synthetic_words(rng, max(1, words - 5))


def arrival_offsets_s(
    rate: float, burstiness: float, seed: int, *, count: int | None, duration_s: float | None
) -> Iterator[float]:
    """Absolute send times (seconds from the start) for an open-loop run.

    Gaps are gamma-distributed with mean 1/rate; burstiness 1 is Poisson, below 1 burstier,
    above 1 steadier. Times are cumulative sums, so a late send never pushes later ones back.
    """
    if rate <= 0:
        raise ValueError("rate must be positive")
    if burstiness <= 0:
        raise ValueError("burstiness must be positive")
    rng = random.Random(f"arrivals-{seed}")
    t = 0.0
    i = 0
    while (count is None or i < count) and (duration_s is None or t < duration_s):
        yield t
        t += rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
        i += 1


@dataclass(frozen=True, slots=True)
class Workload:
    """Every knob that makes two runs comparable."""

    # Closed loop: users sending back to back. Open loop: a cap on requests in flight (0: none).
    concurrency: tuple[int, ...] = (1,)
    rate: float | None = None  # requests/s; None means closed loop
    burstiness: float = 1.0
    requests: int | None = 8
    duration_s: float | None = None
    warmup: int = 1
    max_tokens: int | None = 256
    prompt_tokens: int | None = None
    shared_prefix_tokens: int = 0
    seed: int = 0
    temperature: float | None = 0.0
    preset: str | None = None
    trace: Trace | None = None  # replay these arrival times, lengths and shared blocks
    sessions: int | None = None  # multi-turn conversations, `concurrency` of them at a time
    turns: int = 1
    think_time_s: float = 0.0  # a user's pause between an answer and their next turn
    tools: bool = False  # offer a function and require a call: the answer is tool-call deltas
    ramp_up_s: float = 0.0  # requests sent this early in a run are left out of the figures
    ramp_down_s: float = 0.0  # ...and those still running this close to its end
    stop_when_saturated: bool = False  # open loop: stop sending once the server falls behind

    @property
    def open_loop(self) -> bool:
        """Requests leave on a schedule (a rate, or a trace's times), not as users free up."""
        return self.rate is not None or self.trace is not None

    def quiet_gap_s(self) -> float:
        """How long the schedule itself may leave the server with nothing to do: the longest
        gap of a trace, or three mean gaps of a rate (Poisson gaps often reach that). A closed
        loop always has a request in flight. A notice of silence shorter than this says the
        schedule, not the server, is why nothing finished."""
        if self.trace is not None:
            return self.trace.longest_gap_s
        if self.rate is not None:
            return 3.0 / self.rate
        return 0.0

    def offered_window_s(self) -> float:
        """How long a run of a schedule lasting --duration offered requests for (0 for any
        other run): its throughputs are counts over at least this. A 0.01 req/s probe of 10 s
        sends one request at 0 s and none after; over the 0.1 s that one took it had read as
        "finished 10 req/s"."""
        if self.open_loop and self.duration_s is not None and self.sessions is None:
            return self.duration_s
        return 0.0

    def prompt_plan(self) -> PromptPlan:
        default = TOOL_PROMPT if self.tools else DEFAULT_PROMPT
        return PromptPlan(self.prompt_tokens, self.shared_prefix_tokens, self.seed, default)

    def validate(self) -> None:
        """Refuse a workload felab cannot run as asked: every number finite and in range
        (the bounds are in `felab bench --help`), never silently replaced."""
        problems = []
        lowest = 0 if self.open_loop else 1  # open loop: 0 means no cap on in-flight
        if not self.concurrency or any(
            not lowest <= c <= MAX_CONCURRENCY for c in self.concurrency
        ):
            comma = (  # said only where a comma split the number: 1,000 reads as 1 and 0
                "; a comma separates the steps of a sweep (-c 1,4,16), so write 1000, not 1,000"
                if len(self.concurrency) > 1
                else ""
            )
            problems.append(
                f"concurrency must be whole numbers from {lowest} to {MAX_CONCURRENCY}{comma}"
            )
        if len(self.concurrency) > MAX_SWEEP:
            problems.append(f"a concurrency sweep has at most {MAX_SWEEP} steps")
        twice = sorted({c for c in self.concurrency if self.concurrency.count(c) > 1})
        if twice:  # a record holds one run a load: compare could not tell the two apart
            problems.append(
                f"the concurrency sweep gives {', '.join(map(str, twice))} twice: give each "
                "step once (--repeat runs the whole sweep again)"
            )
        if self.rate is not None and not (MIN_RATE <= self.rate <= MAX_RATE):
            problems.append(
                f"--rate must be a number of requests per second from {MIN_RATE:g} to "
                f"{MAX_RATE:,.0f}"
            )
        if not (MIN_BURSTINESS <= self.burstiness <= MAX_BURSTINESS):  # 1e-300: degenerate
            problems.append(
                f"--burstiness must be from {MIN_BURSTINESS:g} to {MAX_BURSTINESS:g} (1 = Poisson)"
            )
        if self.burstiness != 1.0 and self.rate is None:
            problems.append("--burstiness shapes the gaps of an open loop: give --rate too")
        if self.sessions is not None:
            if not 1 <= self.sessions <= MAX_REQUESTS:
                problems.append(f"--sessions must be from 1 to {MAX_REQUESTS:,}")
            elif self.sessions * self.turns > MAX_REQUESTS:
                problems.append(
                    f"--sessions x --turns is {self.sessions * self.turns:,} requests: at most "
                    f"{MAX_REQUESTS:,}"
                )
            if self.open_loop:
                problems.append("--sessions runs conversations back to back: drop --rate/--trace")
        if not (0 <= self.ramp_up_s <= 86_400 and 0 <= self.ramp_down_s <= 86_400):
            problems.append("--ramp-up and --ramp-down must be 0-86400 seconds")
        if not 1 <= self.turns <= 1000:
            problems.append("--turns must be 1-1000")
        if not 0 <= self.think_time_s <= 3600:
            problems.append("--think-time must be 0-3600 seconds")
        if self.trace is not None and self.rate is not None:
            problems.append("--trace sets the arrival times: drop --rate (or use --trace-speed)")
        if (
            self.requests is None
            and self.duration_s is None
            and self.trace is None
            and self.sessions is None
        ):
            problems.append("give --requests N or --duration SECONDS")
        if self.requests is not None and not 1 <= self.requests <= MAX_REQUESTS:
            problems.append(f"--requests must be from 1 to {MAX_REQUESTS:,}")
        if self.duration_s is not None and not (
            MIN_DURATION_S <= self.duration_s <= MAX_DURATION_S
        ):  # 1e-9 s sent nothing and ended as if the server could not be reached
            problems.append(
                f"--duration must be from {MIN_DURATION_S:g} s to {MAX_DURATION_S:,.0f} s (a day)"
            )
        if not 0 <= self.warmup <= MAX_WARMUP:
            problems.append(f"--warmup must be from 0 to {MAX_WARMUP:,}")
        if self.max_tokens is not None and not 1 <= self.max_tokens <= MAX_TOKENS:
            problems.append(f"--max-tokens must be from 1 to {MAX_TOKENS:,}")
        if self.prompt_tokens is not None and not 1 <= self.prompt_tokens <= MAX_TOKENS:
            problems.append(f"--prompt-tokens must be from 1 to {MAX_TOKENS:,}")
        if not 0 <= self.shared_prefix_tokens <= MAX_TOKENS:
            problems.append(f"--shared-prefix-tokens must be from 0 to {MAX_TOKENS:,}")
        if (
            self.shared_prefix_tokens
            and self.prompt_tokens is not None
            and self.shared_prefix_tokens >= self.prompt_tokens
        ):
            problems.append("--shared-prefix-tokens must be smaller than --prompt-tokens")
        if self.shared_prefix_tokens and self.prompt_tokens is None and self.trace is None:
            problems.append(
                "--shared-prefix-tokens needs --prompt-tokens: the prefix opens a synthetic prompt"
            )
        if self.stop_when_saturated and not self.open_loop:
            problems.append(
                "--stop-when-saturated watches an open loop: give --rate (or --trace) too"
            )
        if (
            self.duration_s is not None
            and self.ramp_up_s + self.ramp_down_s >= self.duration_s
            and (self.ramp_up_s or self.ramp_down_s)
        ):
            problems.append(
                f"--ramp-up and --ramp-down ({self.ramp_up_s + self.ramp_down_s:g} s together) "
                f"leave nothing of a {self.duration_s:g} s run to measure: shorten them or "
                "lengthen --duration"
            )
        if not 0 <= self.seed < 2**63:
            problems.append("--seed must be from 0 to 2**63 - 1")
        if problems:
            raise ValueError("; ".join(problems))

    def with_overrides(self, **changes: Any) -> Workload:
        """Apply flags on top of a preset; a changed preset no longer claims the preset's name."""
        real = {k: v for k, v in changes.items() if v is not None and getattr(self, k) != v}
        if not real:
            return self
        label = f"{self.preset}+custom" if self.preset else None
        return replace(self, **real, preset=label)

    def to_record(self) -> dict[str, Any]:
        """The workload as a `felab bench --json` record keeps it; the fleet's ingest holds a
        machine's record to the one its job's workload gives."""
        sessions = self.sessions is not None
        return {
            "preset": self.preset,
            "concurrency": list(self.concurrency),
            "rate": self.rate,
            "burstiness": self.burstiness,
            "requests": self.requests,
            "duration_s": self.duration_s,
            "warmup": self.warmup,
            "max_tokens": self.max_tokens,
            "prompt_tokens": self.prompt_tokens,
            "shared_prefix_tokens": self.shared_prefix_tokens,
            "seed": self.seed,
            "tools": self.tools,
            "temperature": self.temperature,
            "trace": None if self.trace is None else self.trace.summary(),
            "sessions": self.sessions,
            "turns": self.turns if sessions else None,
            "think_time_s": self.think_time_s if sessions else None,
        }


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    summary: str
    workload: Workload = field(default_factory=Workload)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "day2",
            "The course's Day 2 run: one user, the writing speed a person sees. 1 warm-up, "
            "8 requests one at a time, default prompt, 256 output tokens, temperature 0.",
            Workload(concurrency=(1,), requests=8, warmup=1, max_tokens=256, seed=2, preset="day2"),
        ),
        Preset(
            "quick",
            "A smoke test: 1 warm-up, 3 requests, 32 output tokens.",
            Workload(concurrency=(1,), requests=3, warmup=1, max_tokens=32, seed=1, preset="quick"),
        ),
        Preset(
            "sweep",
            "How speed falls as users arrive: concurrency 1, 4 and 16, 32 requests each, "
            "a ~256-token prompt, 128 output tokens.",
            Workload(
                concurrency=(1, 4, 16),
                requests=32,
                warmup=1,
                max_tokens=128,
                prompt_tokens=256,
                seed=3,
                preset="sweep",
            ),
        ),
        Preset(
            "chat",
            "Multi-turn chat: 4 conversations of 5 turns, 1 s to think between turns, ~128-token "
            "messages, 64 output tokens; each turn resends the history, so TTFT by turn shows "
            "what the prefix cache buys.",
            Workload(
                concurrency=(4,),
                requests=None,
                sessions=4,
                turns=5,
                think_time_s=1.0,
                warmup=1,
                max_tokens=64,
                prompt_tokens=128,
                seed=5,
                preset="chat",
            ),
        ),
        Preset(
            "agent",
            "An agentic turn: a function offered and a call required, 8 requests one at a time, "
            "up to 128 tokens of arguments, streamed as tool-call deltas.",
            Workload(
                concurrency=(1,),
                requests=8,
                warmup=1,
                max_tokens=128,
                tools=True,
                seed=6,
                preset="agent",
            ),
        ),
        Preset(
            "prefix",
            "The prefix-caching lesson: every ~1,280-token prompt opens with the same 1,024 "
            "tokens; 4 users, 32 requests, 64 output tokens.",
            Workload(
                concurrency=(4,),
                requests=32,
                warmup=1,
                max_tokens=64,
                prompt_tokens=1280,
                shared_prefix_tokens=1024,
                seed=4,
                preset="prefix",
            ),
        ),
    )
}
