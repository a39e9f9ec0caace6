"""Whether a stored job reads as felab queues it: a preset and params that `job_workload`
builds a workload from (felab_core.jobs.queueing checks each job so before storing it).

A row changed by hand or restored from a changed backup can hold what felab never queues
(params [1, 2], a preset 'banana'): `felab db restore` refuses such a backup, and the
reconciler fails such a job with the reason instead of stopping on it every few seconds.
"""

from __future__ import annotations

from typing import Any

from felab_core.engine.workloads import Workload
from felab_core.errors import Invalid
from felab_core.jobs.workload import ASKED, job_workload
from felab_core.text import with_hidden_shown


def _shown(value: Any) -> str:
    return with_hidden_shown(repr(value))[:60]


def stored_workload(preset: Any, params: Any) -> Workload:
    """The workload a stored job runs, as felab builds it to queue the job (the limits of the
    day it was asked for are not applied again); Invalid saying what felab never queues."""
    if not isinstance(preset, str):
        raise Invalid(f"its preset {_shown(preset)} is not a preset's name")
    if params is None:
        params = {}
    if not isinstance(params, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in params.items()
    ):
        raise Invalid(
            f"its params {_shown(params)} are not names with whole numbers, as felab queues them"
        )
    try:
        return job_workload(preset, params, ASKED)
    except Invalid as exc:  # before ValueError, which it is; ASKED's limits are no limits
        raise Invalid(str(exc).replace(f"1 to {ASKED.concurrency}", "at least 1")) from None
    except (TypeError, ValueError, OverflowError) as exc:  # a workload's own checks
        raise Invalid(f"its preset and params build no workload ({exc})") from None


def stored_job_problem(preset: Any, params: Any) -> str | None:
    """Why felab would never have queued a job with this preset and params, or None."""
    try:
        stored_workload(preset, params)
    except Invalid as exc:
        return str(exc)
    return None
