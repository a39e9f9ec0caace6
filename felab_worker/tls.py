"""TLS for the broker: a private CA and a server certificate, made once (docker-compose's `tls`
service runs `felab broker tls` on first start). Students need only the CA's certificate
(`felab broker ca`), which is public; the keys never leave the server's volume.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CA_FILE = "ca.pem"
CERT_FILE = "redis.pem"
KEY_FILE = "redis.key"


@dataclass(frozen=True)
class Made:
    folder: Path
    created: bool  # False: the files were there already and are kept
    missing: tuple[str, ...] = ()  # hosts asked for that the kept certificate does not name


_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _san(hosts: list[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(h for h in hosts if h):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, mode)
    tmp.replace(path)


def named_hosts(folder: Path) -> set[str]:
    """The names and IP addresses the certificate in `folder` is good for (empty if unread)."""
    try:
        cert = x509.load_pem_x509_certificate((folder / CERT_FILE).read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return set()
    dns = names.get_values_for_type(x509.DNSName)
    ips = [str(ip) for ip in names.get_values_for_type(x509.IPAddress)]
    return {*dns, *ips}


def make_certificates(folder: Path, hosts: list[str], *, days: int = 3650) -> Made:
    """A CA and a certificate for `hosts` (names or IPs) signed by it, unless already there.

    The key is readable by the redis container's user too (mode 0644 in a volume only the
    server's containers mount); the CA's own key is kept owner-only.
    """
    folder.mkdir(parents=True, exist_ok=True)
    if all((folder / f).exists() for f in (CA_FILE, CERT_FILE, KEY_FILE)):
        return Made(folder, False, tuple(h for h in hosts if h not in named_hosts(folder)))
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("felab broker CA"))
        .issuer_name(_name("felab broker CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_USAGE, critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0] if hosts else "redis"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(_san(hosts), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    _write(
        folder / "ca.key",
        ca_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        0o600,
    )
    _write(
        folder / KEY_FILE,
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        0o644,
    )
    _write(folder / CERT_FILE, cert.public_bytes(pem), 0o644)
    _write(folder / CA_FILE, ca.public_bytes(pem), 0o644)
    return Made(folder, True)
