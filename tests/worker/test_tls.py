"""The broker's TLS files are made once and kept; a host asked for later that the kept
certificate does not name is said (seventh sweep: it was silently left out)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cryptography import x509

from felab_core.errors import Invalid
from felab_worker.tls import TLSFolderError, is_ca, make_certificates, named_hosts, read_ca_file


def test_kept_files_say_which_asked_hosts_they_do_not_name(tmp_path: Path) -> None:
    made = make_certificates(tmp_path / "tls", ["redis", "127.0.0.1", "a.example"])
    assert made.created and not made.missing
    assert {"redis", "127.0.0.1", "a.example"} <= named_hosts(tmp_path / "tls")
    again = make_certificates(tmp_path / "tls", ["redis", "a.example", "b.example", "10.0.0.9"])
    assert not again.created
    assert again.missing == ("b.example", "10.0.0.9")


def test_a_ca_already_there_is_never_replaced(tmp_path: Path) -> None:
    """Every student installed ca.pem: a missing server certificate is signed by the CA that is
    there; half a CA, or one that cannot be read, is refused and left as it was."""
    folder = tmp_path / "tls"
    make_certificates(folder, ["redis"])
    ca = {f: (folder / f).read_bytes() for f in ("ca.key", "ca.pem")}
    (folder / "redis.pem").unlink()
    made = make_certificates(folder, ["redis", "b.example"])
    assert made.created and made.kept_ca
    assert {f: (folder / f).read_bytes() for f in ca} == ca
    issuer = x509.load_pem_x509_certificate(ca["ca.pem"])
    cert = x509.load_pem_x509_certificate((folder / "redis.pem").read_bytes())
    cert.verify_directly_issued_by(issuer)
    assert "b.example" in named_hosts(folder)

    half = tmp_path / "half"
    half.mkdir()
    (half / "ca.pem").write_bytes(ca["ca.pem"])
    with pytest.raises(TLSFolderError, match=r"holds ca\.pem but not ca\.key"):
        make_certificates(half, ["redis"])
    assert sorted(p.name for p in half.iterdir()) == ["ca.pem"]

    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "ca.pem").write_text("not a certificate")
    (wrong / "ca.key").write_bytes(ca["ca.key"])
    with pytest.raises(TLSFolderError, match="cannot be read as a PEM key and certificate"):
        make_certificates(wrong, ["redis"])
    assert (wrong / "ca.pem").read_text() == "not a certificate"


def test_both_private_keys_are_owner_only(tmp_path: Path) -> None:
    """Ninth sweep (M6): redis.key, the broker's TLS private key, was written 0644. In
    docker-compose redis-server runs as root, as the `tls` service that writes it."""
    folder = tmp_path / "tls"
    make_certificates(folder, ["redis"])
    modes = {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir()}
    assert modes == {"ca.key": 0o600, "redis.key": 0o600, "ca.pem": 0o644, "redis.pem": 0o644}
    (folder / "redis.pem").unlink()  # a new server certificate beside a kept CA: the same
    (folder / "redis.key").unlink()
    assert make_certificates(folder, ["redis"]).kept_ca
    assert (folder / "redis.key").stat().st_mode & 0o777 == 0o600


def test_only_the_ca_is_a_ca(tmp_path: Path) -> None:
    folder = tmp_path / "tls"
    make_certificates(folder, ["redis"])
    assert is_ca(x509.load_pem_x509_certificate((folder / "ca.pem").read_bytes()))
    assert not is_ca(x509.load_pem_x509_certificate((folder / "redis.pem").read_bytes()))


def test_the_ca_file_is_the_ca_certificate_and_nothing_else(tmp_path: Path) -> None:
    """`felab broker ca` (what students are given) and the worker's TLS read FELAB_BROKER_CA_FILE
    through one check: the CA's certificates pass; a key, the server's certificate, a page or a
    missing file are each refused by name."""
    folder = tmp_path / "tls"
    make_certificates(folder, ["redis"])
    (ca,) = read_ca_file(folder / "ca.pem")
    assert is_ca(ca)
    (tmp_path / "page.html").write_text("<html></html>")
    refused = {
        "redis.key": "holds a private key",
        "redis.pem": "the server's certificate, not the CA",
        "../page.html": "not a PEM certificate",
        "gone.pem": "does not exist",
    }
    for name, says in refused.items():
        with pytest.raises(Invalid, match=says) as caught:
            read_ca_file(folder / name)
        assert "FELAB_BROKER_CA_FILE" in str(caught.value)


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        ("ca.pem", "ca.pem is not a PEM certificate: put the CA's own ca.pem back"),
        ("redis.pem", "redis.pem is not a PEM certificate: delete"),
        ("redis.key", "redis.key is not a PEM private key: delete"),
        ("other-key", "redis.key is not the key of redis.pem: delete"),
        ("server-as-ca", "ca.pem is not a CA's certificate"),
        ("other-ca", "redis.pem was not signed by the ca.pem beside it"),
    ],
)
def test_kept_files_that_are_unusable_are_refused(tmp_path: Path, broken: str, says: str) -> None:
    """Twentieth sweep (b) B13, B14: a garbage ca.pem or redis.pem had been "kept the TLS
    files", exit 0 (or "kept" and then "does not name redis ...")."""
    folder, other = tmp_path / "tls", tmp_path / "other"
    make_certificates(folder, ["redis"])
    make_certificates(other, ["redis"])
    if broken == "other-key":
        (folder / "redis.key").write_bytes((other / "redis.key").read_bytes())
    elif broken == "server-as-ca":
        (folder / "ca.pem").write_bytes((folder / "redis.pem").read_bytes())
    elif broken == "other-ca":
        (folder / "ca.pem").write_bytes((other / "ca.pem").read_bytes())
    else:
        (folder / broken).write_text("garbage\n")
    with pytest.raises(TLSFolderError, match=re.escape(says)):
        make_certificates(folder, ["redis"])
