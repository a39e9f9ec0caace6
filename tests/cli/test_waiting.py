"""The note a long command gives when it has heard nothing for a while."""

from __future__ import annotations

import time

from felab.cli.waiting import SilenceNotice


def test_silence_is_said_once() -> None:
    said: list[float] = []
    with SilenceNotice(0.2, said.append):
        time.sleep(0.8)
    assert len(said) == 1 and said[0] >= 0.2


def test_progress_keeps_it_quiet() -> None:
    said: list[float] = []
    with SilenceNotice(0.3, said.append) as notice:
        for _ in range(12):
            time.sleep(0.05)
            notice.poke()
    assert said == []
