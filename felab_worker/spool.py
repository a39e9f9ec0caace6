"""What a machine keeps on disk between its worker's processes: the events the ingest has not
acknowledged yet, cancel flags, the job running now, and the heartbeat's sequence number.

A result is written here before it is sent and deleted only when the ingest acknowledges it, so
a broker restart, a lost connection or a killed worker never loses a finished measurement: the
next heartbeat (or the next start) sends it again, re-signed. The ingest applies an event once
however often it arrives.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("felab.worker")

#: An unacknowledged event is sent again after this long, and given up after a day.
RESEND_AFTER_S = 30.0
GIVE_UP_AFTER_S = 86_400.0


@dataclass(frozen=True)
class Pending:
    path: Path
    payload: dict[str, Any]


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    tmp.replace(path)


class Spool:
    """One machine's state folder (beside its identity file)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.pending_dir = folder / "pending"
        self.cancel_dir = folder / "cancel"
        for d in (self.pending_dir, self.cancel_dir):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)

    # ------------------------------------------------------------------ unacknowledged events

    @staticmethod
    def _name(job_id: int, attempt: str) -> str:
        safe = "".join(c for c in attempt if c.isalnum())[:40]
        return f"{int(job_id)}-{safe}.json"

    def keep(self, payload: dict[str, Any]) -> None:
        """Write an event (unsigned) to disk before it is sent."""
        name = self._name(int(payload["job_id"]), str(payload["attempt"]))
        _write(self.pending_dir / name, json.dumps(payload))

    def acknowledged(self, job_id: int, attempt: str) -> bool:
        """Forget the event of this job's attempt: the ingest has it."""
        path = self.pending_dir / self._name(job_id, attempt)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        return True

    def due(self, now: float | None = None, *, all_of_them: bool = False) -> Iterator[Pending]:
        """Events to send again: older than RESEND_AFTER_S since the last send (or all)."""
        now = now or time.time()
        for path in sorted(self.pending_dir.glob("*.json")):
            try:
                age = now - path.stat().st_mtime
                payload = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            created = float(payload.get("at") or now)
            if now - created > GIVE_UP_AFTER_S:
                log.warning("gave up sending %s: no acknowledgement for a day", path.name)
                path.unlink(missing_ok=True)
                continue
            if all_of_them or age >= RESEND_AFTER_S:
                yield Pending(path, payload)

    @staticmethod
    def touch(item: Pending) -> None:
        """Record a send (the file's time), so the next resend waits RESEND_AFTER_S."""
        with contextlib.suppress(FileNotFoundError):
            os.utime(item.path)

    def pending_count(self) -> int:
        return sum(1 for _ in self.pending_dir.glob("*.json"))

    # ------------------------------------------------------------------ cancels

    def cancel(self, job_id: int) -> None:
        (self.cancel_dir / str(int(job_id))).touch()

    def is_cancelled(self, job_id: int) -> bool:
        return (self.cancel_dir / str(int(job_id))).exists()

    def forget_cancels(self, older_than_s: float = 86_400.0) -> None:
        now = time.time()
        for path in self.cancel_dir.iterdir():
            try:
                if now - path.stat().st_mtime > older_than_s:
                    path.unlink()
            except OSError:
                continue

    # ------------------------------------------------------------------ the job running now

    def running(self, job_id: int | None) -> None:
        """Say which job this machine runs now (None: idle), with the running process's id."""
        path = self.folder / "running"
        if job_id is None:
            path.unlink(missing_ok=True)
        else:
            _write(path, json.dumps({"job_id": int(job_id), "pid": os.getpid()}))

    def running_job(self) -> int | None:
        """The job running now, if the process that started it is still alive."""
        try:
            data = json.loads((self.folder / "running").read_text(encoding="utf-8"))
            os.kill(int(data["pid"]), 0)
            return int(data["job_id"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    # ------------------------------------------------------------------ heartbeat sequence

    def next_seq(self) -> int:
        """The next heartbeat number, kept across restarts: the ingest refuses any it has seen."""
        path = self.folder / "seq"
        try:
            last = int(path.read_text(encoding="utf-8").strip() or 0)
        except (OSError, ValueError):
            last = 0
        seq = max(last + 1, int(time.time() * 1000))
        _write(path, str(seq))
        return seq
