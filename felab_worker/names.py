"""Every name felab uses on the broker, in one place: queues, keys and Redis users.

Per-machine names put the worker id between two dots (`host.7.jobs`), so a pattern for machine
7 never covers machine 70. Queue names are kombu's (it adds FELAB_BROKER_PREFIX itself); key
names are what Redis sees, prefix included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Events from paired machines to the ingest: machines may only push to it.
INGEST_QUEUE = "ingest.inbox"
#: Pairing requests from unpaired machines: they may only push to it.
PAIRING_QUEUE = "pairing.inbox"
#: The ingest's own timer (the reconciler): nobody else can push to it.
BEAT_QUEUE = "server.beat"

_GLOB = re.compile(r"([*?\[\]\\])")


def glob_escape(text: str) -> str:
    """`text` as a literal inside a Redis key or channel pattern."""
    return _GLOB.sub(r"\\\1", text)


@dataclass(frozen=True)
class Names:
    prefix: str  # FELAB_BROKER_PREFIX, such as "felab:"

    # ------------------------------------------------------------------ queues (kombu names)

    @staticmethod
    def jobs_queue(worker_id: int) -> str:
        """The one queue a machine consumes: its own."""
        return f"host.{worker_id}.jobs"

    # ------------------------------------------------------------------ keys (Redis names)

    def key(self, name: str) -> str:
        return self.prefix + name

    def machine_keys(self, worker_id: int) -> str:
        """The start of every key that belongs to one machine."""
        return self.key(f"host.{worker_id}.")

    def claim_key(self, worker_id: int, job_id: int) -> str:
        """A job's current attempt, which the machine claims before running it."""
        return self.key(f"host.{worker_id}.claim.{job_id}")

    def control_key(self, worker_id: int) -> str:
        """Acknowledgements and cancels for one machine: only the ingest and the bot push."""
        return self.key(f"host.{worker_id}.control")

    def answer_key(self, answer_id: str) -> str:
        """Where the answer to one pairing request waits, sealed with its code."""
        return self.key(f"pairing.answer.{answer_id}")

    # ------------------------------------------------------------------ Redis users

    @property
    def _user_base(self) -> str:
        """The prefix as a user name part: "felab:" -> "felab" (no characters a URL escapes)."""
        return re.sub(r"[^A-Za-z0-9._-]+", "-", self.prefix).strip("-") or "felab"

    def machine_user(self, worker_id: int) -> str:
        return f"{self._user_base}-machine.{worker_id}"

    @property
    def pairing_user(self) -> str:
        return f"{self._user_base}-pairing"
