"""felab_core.jobs.keys.Identity.load: the identity file a person names through
FELAB_WORKER_KEY_FILE is read only when it is a small regular file; a pipe would wait forever."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from felab_core.errors import Invalid
from felab_core.jobs.keys import Identity


def test_a_saved_identity_loads_again(tmp_path: Path) -> None:
    path = tmp_path / "worker-box.json"
    Identity(7, "box", Ed25519PrivateKey.generate()).save(path)
    again = Identity.load(path)
    assert (again.worker_id, again.name) == (7, "box")


def test_a_pipe_a_folder_and_a_huge_file_are_refused_at_once(tmp_path: Path) -> None:
    pipe = tmp_path / "fifo"
    os.mkfifo(pipe)
    with pytest.raises(Invalid, match="is not a regular file"):
        Identity.load(pipe)  # before: blocked in open() waiting for a writer
    with pytest.raises(Invalid, match="is a folder"):
        Identity.load(tmp_path)
    huge = tmp_path / "huge.json"
    huge.write_bytes(b" " * (1 << 20))
    with pytest.raises(Invalid, match="is 1,048,576 bytes"):
        Identity.load(huge)
    with pytest.raises(Invalid, match="no worker identity at"):
        Identity.load(tmp_path / "missing.json")
