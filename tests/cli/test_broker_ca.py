"""`felab broker ca` prints only a CA's certificate: the broker's own certificate (redis.pem)
named as FELAB_BROKER_CA_FILE is refused, with nothing printed (tenth sweep, M5: students were
handed the server's leaf certificate as "the CA certificate students need")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.settings import get_settings

runner = CliRunner()


@pytest.fixture
def tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in ("FELAB_BROKER_PUBLIC_URL", "FELAB_BROKER_CA_FILE", "FELAB_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FELAB_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    made = runner.invoke(app, ["broker", "tls", "--dir", str(tmp_path / "tls1")])
    assert made.exit_code == 0, made.output
    yield tmp_path / "tls1"
    get_settings.cache_clear()


def _ca(monkeypatch: pytest.MonkeyPatch, path: Path) -> tuple[int, str, str]:
    monkeypatch.setenv("FELAB_BROKER_CA_FILE", str(path))
    get_settings.cache_clear()
    done = runner.invoke(app, ["broker", "ca"])
    return done.exit_code, done.stdout, done.stderr


def test_the_ca_is_printed(tls: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = _ca(monkeypatch, tls / "ca.pem")
    assert code == 0
    assert x509.load_pem_x509_certificate(out.encode()) == x509.load_pem_x509_certificate(
        (tls / "ca.pem").read_bytes()
    )


def test_the_servers_certificate_is_not_the_ca(tls: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, said = _ca(monkeypatch, tls / "redis.pem")
    assert code == 2
    assert out == ""
    assert f"{tls / 'redis.pem'} is the server's certificate, not the CA: give ca.pem" in said


def test_a_chain_with_the_servers_certificate_is_refused(
    tls: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = tls.parent / "chain.pem"
    chain.write_bytes((tls / "redis.pem").read_bytes() + (tls / "ca.pem").read_bytes())
    code, out, said = _ca(monkeypatch, chain)
    assert code == 2 and out == "" and "not the CA" in said


def test_the_worker_refuses_the_servers_certificate_as_its_ca(tls: Path) -> None:
    """The worker's TLS would trust no broker with redis.pem as its CA: said at start, not as
    "could not reach the broker"."""
    from felab_core.errors import Invalid
    from felab_core.settings import Settings
    from felab_worker.broker import ca_file

    assert ca_file(Settings(broker_ca_file=tls / "ca.pem")) == str(tls / "ca.pem")
    with pytest.raises(Invalid, match="is the server's certificate, not the CA"):
        ca_file(Settings(broker_ca_file=tls / "redis.pem"))


def test_a_host_the_kept_certificate_lacks_fails_with_advice_that_keeps_the_ca(tls: Path) -> None:
    """Eleventh sweep (M7): a new --host was said with "move the folder aside (then give
    students the new ca.pem)" and exit 0. Deleting the server's pair is enough: the kept CA
    signs the new certificate, and students keep their ca.pem."""
    ca_before = (tls / "ca.pem").read_bytes()
    asked = runner.invoke(app, ["broker", "tls", "--dir", str(tls), "--host", "new.example"])
    assert asked.exit_code == 2, asked.output
    assert "does not name new.example" in asked.output and "redis.key" in asked.output
    assert "students keep their ca.pem" in asked.output
    (tls / "redis.pem").unlink()
    (tls / "redis.key").unlink()
    again = runner.invoke(app, ["broker", "tls", "--dir", str(tls), "--host", "new.example"])
    assert again.exit_code == 0, again.output
    assert (tls / "ca.pem").read_bytes() == ca_before
    cert = x509.load_pem_x509_certificate((tls / "redis.pem").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "new.example" in names.get_values_for_type(x509.DNSName)
