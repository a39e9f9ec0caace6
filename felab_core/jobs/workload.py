"""What a job may ask for: a named preset, a few overrides, within the fleet's limits.

No database here: the server checks a job before queueing it, and the student's worker checks
the message again before running it (a message read off the broker is not trusted to have come
through the server).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from felab_core.engine.shards import Shard
from felab_core.engine.workloads import PRESETS, Workload
from felab_core.errors import Invalid
from felab_core.settings import Settings, get_settings

PARAM_NAMES = ("concurrency", "requests", "max_tokens")


@dataclass(frozen=True)
class Limits:
    """What a job may ask for (FELAB_JOB_MAX_*): a shared Mac is not a load generator."""

    concurrency: int
    requests: int
    max_tokens: int
    per_hour: int

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Limits:
        s = settings or get_settings()
        return cls(s.job_max_concurrency, s.job_max_requests, s.job_max_tokens, s.job_max_per_hour)


def job_workload(preset: str, params: dict[str, int], limits: Limits) -> Workload:
    """The workload a job runs: a named preset with validated overrides, within the limits."""
    if preset not in PRESETS:
        raise Invalid(f"unknown preset {preset!r}: use one of {', '.join(PRESETS)}")
    unknown = set(params) - set(PARAM_NAMES)
    if unknown:
        raise Invalid(
            f"a job cannot set {', '.join(sorted(unknown))}: only {', '.join(PARAM_NAMES)}"
        )
    base = PRESETS[preset].workload
    overrides: dict[str, Any] = {}
    if "concurrency" in params:
        overrides["concurrency"] = (params["concurrency"],)
    if "requests" in params:
        overrides["requests"] = params["requests"]
    if "max_tokens" in params:
        overrides["max_tokens"] = params["max_tokens"]
    w = base.with_overrides(**overrides)
    problems = []
    if any(c < 1 or c > limits.concurrency for c in w.concurrency):
        problems.append(f"concurrency must be 1 to {limits.concurrency}")
    sent = w.sessions * w.turns if w.sessions is not None else w.requests
    if w.sessions is not None and "requests" in params:
        problems.append("a multi-turn preset sets its own number of requests")
    elif sent is None or not 1 <= sent <= limits.requests:
        problems.append(f"requests must be 1 to {limits.requests}")
    if w.max_tokens is None or not 1 <= w.max_tokens <= limits.max_tokens:
        problems.append(f"max tokens must be 1 to {limits.max_tokens}")
    if problems:
        raise Invalid("this job asks too much: " + "; ".join(problems))
    try:
        w.validate()
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    return w


def too_large_reason(size: int, limit: int) -> str:
    """Why a result was not accepted: it is bigger than FELAB_RESULT_MAX_BYTES."""
    return (
        f"the result is {size:,} bytes, over the {limit:,}-byte limit (FELAB_RESULT_MAX_BYTES): "
        "ask for fewer requests"
    )


def spread_problem(workload: Workload, slices: int) -> str | None:
    """Why `workload` cannot be cut into `slices` machines' slices, or None when it can.

    A slice is a share of one schedule: one concurrency, a fixed count of requests, and no
    figure that needs the whole run at once (conversations, traces, ramps, saturation).
    """
    if len(workload.concurrency) != 1:
        return "a spread run measures one concurrency: give one --concurrency"
    if workload.sessions is not None or workload.trace is not None:
        return "conversations and trace replays run on one machine"
    if workload.duration_s is not None or workload.requests is None:
        return "a spread run needs a count of requests, not a duration"
    if workload.ramp_up_s or workload.ramp_down_s or workload.stop_when_saturated:
        return "a steady-state window or a stop at saturation needs the whole run on one machine"
    if workload.requests < slices:
        return f"{workload.requests} requests cannot be cut into {slices} slices: ask for more"
    users = workload.concurrency[0]
    if not workload.open_loop and users < slices:
        return f"{users} users cannot be cut into {slices} slices: ask for more concurrency"
    return None


#: Limits no stored job is held to again: it was checked when it was asked for.
ASKED = Limits(10**9, 10**9, 10**9, 0)


def progress_total(preset: str, params: dict[str, Any], shard: int | None, shards: int) -> int:
    """The requests a machine's progress counts up to for this job, as felab_core.jobs.run
    counts them (a slice's share of each run, times the runs); 0 where it counts none (a
    multi-turn preset) or the job cannot be read."""
    try:
        workload = job_workload(preset, params, ASKED)
    except Invalid:
        return 0
    each = workload.requests if shard is None else Shard(shard, shards).requests(workload.requests)
    return (each or 0) * len(workload.concurrency)
