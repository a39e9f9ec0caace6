"""felab_core.jobs.keys: a worker's name."""

from __future__ import annotations

import pytest

from felab_core.errors import Invalid
from felab_core.jobs.keys import check_worker_name


@pytest.mark.parametrize("name", ["lap9\n", "lap9\r", "-lap", "a" * 65, "lap 9"])
def test_a_worker_name_is_the_whole_text(name: str) -> None:
    """Fourteenth sweep M5: `re.match` with `$` took "lap9\\n" (a newline in its files' names)."""
    with pytest.raises(Invalid):
        check_worker_name(name)
    assert check_worker_name("lap9") == "lap9"
