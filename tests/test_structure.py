"""The house rules a tool can check: no module named service.py, and no module over 500 lines
without the reason for its length written at its top ("Long because ...")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("felab", "felab_core", "felab_bot", "felab_worker")
LIMIT = 500


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_no_module_is_named_service() -> None:
    named = [str(p.relative_to(ROOT)) for p in _modules() if p.name == "service.py"]
    assert not named, f"name these for their one job: {named}"


def test_a_long_module_says_why_at_its_top() -> None:
    unexplained = []
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines <= LIMIT:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if "Long because" not in doc:
            unexplained.append(f"{path.relative_to(ROOT)} ({lines} lines)")
    assert not unexplained, (
        "split these, or write why they are long in their docstring ('Long because ...'): "
        + ", ".join(unexplained)
    )
