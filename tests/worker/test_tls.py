"""The broker's TLS files are made once and kept; a host asked for later that the kept
certificate does not name is said (seventh sweep: it was silently left out)."""

from __future__ import annotations

from pathlib import Path

from felab_worker.tls import make_certificates, named_hosts


def test_kept_files_say_which_asked_hosts_they_do_not_name(tmp_path: Path) -> None:
    made = make_certificates(tmp_path / "tls", ["redis", "127.0.0.1", "a.example"])
    assert made.created and not made.missing
    assert {"redis", "127.0.0.1", "a.example"} <= named_hosts(tmp_path / "tls")
    again = make_certificates(tmp_path / "tls", ["redis", "a.example", "b.example", "10.0.0.9"])
    assert not again.created
    assert again.missing == ("b.example", "10.0.0.9")
