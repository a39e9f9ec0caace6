"""What a comparison says of the two records beside their figures: a record compared unsealed
(on purpose, `--unsealed`), requests that failed, and another machine, address, temperature or
warm-up. Apart from felab_core/engine/compare.py, which does the statistics."""

from __future__ import annotations

from typing import Any

from felab_core.engine.record_seal import SEAL_KEY, SEAL_STATE, SealState
from felab_core.text import with_hidden_shown

_ABSENT = object()  # a key a record does not hold (an older felab's): not told apart by it


def unsealed_sides(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """ "A", "B", both or neither: the records read without a seal that matches (`--unsealed`).
    A record that did not come through load_record (a test's dict) carries no state: none."""
    return [
        side
        for side, record in (("A", a), ("B", b))
        if record.get(SEAL_STATE) in (SealState.unsealed, SealState.changed)
    ]


def seal_notes(a: dict[str, Any], b: dict[str, Any], a_name: str, b_name: str) -> list[str]:
    notes = []
    for side, record, name in (("A", a, a_name), ("B", b, b_name)):
        state = record.get(SEAL_STATE)
        if state is SealState.changed:
            notes.append(
                f"{side} ({name}) is unsealed: its seal does not match its contents (changed "
                "after felab wrote it), compared as asked (--unsealed): its figures were checked "
                "field by field, not proven unchanged"
            )
        elif state is SealState.unsealed:
            notes.append(
                f"{side} ({name}) is unsealed (it has no seal), compared as asked (--unsealed): "
                "its figures were checked field by field, not proven unchanged"
            )
    return notes


#: The note for two records of one run; the CLI says "the same file" instead when it is.
SAME_RUN = "A and B are one run (their seals match): a copy, not two runs that measured alike"


def copy_note(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Two files of one run, told by their seals (a hash of every figure): a copy compared
    with itself had read "within noise" as if two runs had measured alike."""
    seal = a.get(SEAL_KEY)
    if not (isinstance(seal, str) and seal and seal == b.get(SEAL_KEY)):
        return []
    proven = all(r.get(SEAL_STATE, SealState.sealed) is SealState.sealed for r in (a, b))
    return [SAME_RUN] if proven else []


def _failed(record: dict[str, Any]) -> tuple[int, int] | None:
    """The failed requests of a record's runs and all of them, from each run's summary."""
    failed = total = 0
    for run in record.get("runs") or []:
        summary = run.get("summary") if isinstance(run, dict) else None
        if not isinstance(summary, dict):
            return None
        ok, bad = summary.get("ok"), summary.get("failed")
        if type(ok) is not int or type(bad) is not int or ok < 0 or bad < 0:
            return None
        failed, total = failed + bad, total + ok + bad
    return failed, total


def failed_note(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Each side's failed share, when any failed or the shares differ: the figures are of the
    answered requests alone, so a B that lost half its requests had compared in silence."""
    fa, fb = _failed(a), _failed(b)
    if fa is None or fb is None or (fa[0] == 0 and fb[0] == 0):
        return []

    def share(failed: int, total: int) -> str:
        return f"{failed:,} of {total:,} ({failed / total:.0%})" if total else "0 of 0"

    return [
        f"requests failed: {share(*fa)} in A, {share(*fb)} in B: the figures are of the "
        "answered requests only"
    ]


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(with_hidden_shown(value[:60]) + ("..." if len(value) > 60 else ""))
    return repr(value)


def setting_notes(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The machine felab ran on, the address it timed, the temperature and the warm-up: a
    note for each that differs (records that do not hold one are not told apart by it)."""
    notes = []
    ta, tb = a.get("target") or {}, b.get("target") or {}
    wa, wb = a.get("workload") or {}, b.get("workload") or {}
    for what, va, vb in (
        ("host (the machine felab ran on)", _get(a, "host"), _get(b, "host")),
        ("target url", _get(ta, "url"), _get(tb, "url")),
        ("workload temperature", _get(wa, "temperature"), _get(wb, "temperature")),
        ("workload warm-up (--warmup)", _get(wa, "warmup"), _get(wb, "warmup")),
    ):
        if va is not _ABSENT and vb is not _ABSENT and va != vb:
            notes.append(f"{what} differs: {_shown(va)} in A, {_shown(vb)} in B")
    return notes


def _get(part: Any, key: str) -> Any:
    return part.get(key, _ABSENT) if isinstance(part, dict) else _ABSENT
