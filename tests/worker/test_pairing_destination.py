"""`felab worker pair --code` checks where the identity goes before the code is sent (sweep
20, b, B23/B24): a folder it cannot write, or a file that is not a felab identity, is refused
with the code unspent (no broker is asked: here none listens)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from felab_core.errors import Invalid
from felab_core.jobs.keys import Identity, new_private_key
from felab_core.settings import Settings
from felab_worker.pairing import BrokerUnreachable, pair_machine

CODE = "863EC9-1F1AFE-9B59FC"
NOWHERE = "redis://127.0.0.1:1/0"  # nothing listens: reaching the broker would say so


def test_a_file_that_is_not_an_identity_is_not_replaced(tmp_path: Path) -> None:
    notes = tmp_path / "important.txt"
    notes.write_text("my precious notes\n")
    settings = Settings(broker_url=NOWHERE, data_dir=tmp_path, worker_key_file=notes)
    says = (
        r"important.txt \(FELAB_WORKER_KEY_FILE\) is not a felab worker identity \(it is not "
        r"JSON\).*the pairing code was not used"
    )
    with pytest.raises(Invalid, match=says):
        pair_machine(settings, CODE, timeout_s=2)
    assert notes.read_text() == "my precious notes\n"


def test_an_earlier_identity_may_be_replaced(tmp_path: Path) -> None:
    old = tmp_path / "id.json"
    Identity(3, "mac", new_private_key()).save(old)
    settings = Settings(broker_url=NOWHERE, data_dir=tmp_path, worker_key_file=old)
    with pytest.raises(BrokerUnreachable):  # past the check, on to the broker
        pair_machine(settings, CODE, timeout_s=2)


def test_a_folder_it_cannot_write_is_refused_before_the_code_is_sent(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    # Settings refuse a data folder under a file when read (setting_folders); one that became
    # a file after they were read is still refused by pairing before the code is sent.
    settings = Settings(broker_url=NOWHERE, data_dir=blocker / "data")
    blocker.write_text("x")
    with pytest.raises(
        Invalid, match=r"cannot write this machine's identity in .*code was not used"
    ):
        pair_machine(settings, CODE, timeout_s=2)
    if os.geteuid() != 0:  # root writes any folder
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(Invalid, match=r"cannot write this machine's identity"):
            pair_machine(Settings(broker_url=NOWHERE, data_dir=ro), CODE, timeout_s=2)
