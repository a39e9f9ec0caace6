"""The docs cannot drift: the settings table (docs/operator.md) is the Settings class, field for
field and default for default; the README's Quick start is the two commands, CI runs the second,
the README stays a door (~200 lines) and every page it links exists."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from felab_core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
OPERATOR = (ROOT / "docs" / "operator.md").read_text()


def section(title: str, text: str = README) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"no '## {title}' section"
    return m.group(1)


def settings_rows() -> list[tuple[str, str]]:
    rows = []
    for line in section("Settings", OPERATOR).splitlines():
        m = re.match(r"^\| `(FELAB_[A-Z0-9_]+)` \| ([^|]*) \|", line)
        if m:
            rows.append((m.group(1), m.group(2).strip()))
    return rows


def test_settings_table_lists_every_setting_exactly_once() -> None:
    names = [name for name, _ in settings_rows()]
    fields = [f"FELAB_{n.upper()}" for n in Settings.model_fields]
    dupes = {n for n in names if names.count(n) > 1}
    assert not dupes, f"listed twice: {sorted(dupes)}"
    assert set(names) == set(fields), (
        f"missing from the README: {sorted(set(fields) - set(names))}; "
        f"not settings: {sorted(set(names) - set(fields))}"
    )


def test_settings_table_defaults_are_the_real_ones() -> None:
    defaults = Settings.model_construct()
    for name, shown in settings_rows():
        field = name.removeprefix("FELAB_").lower()
        real: Any = getattr(defaults, field)
        assert shown, f"{name}: no default shown"
        if real is None:
            assert not shown.startswith("`") or "FELAB_" in shown, (
                f"{name} has no default, but the README shows {shown}"
            )
            continue
        m = re.match(r"^`([^`]*)`", shown)
        assert m, f"{name}: show the default {real!r} in backticks, not {shown!r}"
        value = m.group(1)
        if field == "cache_dir":
            assert Path(value).expanduser() == real
            continue
        parsed = getattr(Settings.model_validate({field: value}), field)
        assert parsed == real, f"{name}: README says {value!r}, felab's default is {real!r}"


def test_quick_start_is_the_two_commands_and_ci_runs_the_second() -> None:
    quick = section("Quick start")
    block = re.search(r"```sh\n(.*?)```", quick, re.S)
    assert block, "Quick start has no shell block"
    assert block.group(1).splitlines() == ["./scripts/demo", "./scripts/test"]
    ci = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci == ["./scripts/test"]


def test_the_readme_is_a_door_and_its_links_lead_somewhere() -> None:
    assert len(README.splitlines()) <= 200
    links = re.findall(r"\]\(((?:docs/)[^)#]+)", README)
    assert {"docs/student.md", "docs/instructor.md", "docs/operator.md"} <= set(links)
    for link in links:
        assert (ROOT / link).exists(), link
