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
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from felab_core.errors import Invalid
from felab_core.files import MiB, NamedFileError, read_named_bytes

CA_FILE = "ca.pem"
CA_KEY_FILE = "ca.key"
CERT_FILE = "redis.pem"
KEY_FILE = "redis.key"


class CAFileError(Invalid):
    """FELAB_BROKER_CA_FILE names no CA certificate: a setting to fix (exit 2), though it is
    met while reaching the broker."""


class TLSFolderError(ValueError):
    """The folder holds part of a CA felab cannot use; the message says what to do."""


@dataclass(frozen=True)
class Made:
    folder: Path
    created: bool  # False: the files were there already and are kept
    missing: tuple[str, ...] = ()  # hosts asked for that the kept certificate does not name
    kept_ca: bool = False  # a new server certificate, signed by the CA already there


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
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    except OSError as exc:  # said of the folder asked for, not of the scratch file's name
        raise TLSFolderError(
            f"cannot write in {path.parent} ({exc.strerror or exc}): choose another --dir"
        ) from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, mode)
    tmp.replace(path)


def is_ca(cert: x509.Certificate) -> bool:
    """Whether `cert` is a CA's certificate (basicConstraints CA:TRUE; a version-1 certificate,
    which has no extensions, when it signed itself), not a server's such as redis.pem."""
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return cert.version == x509.Version.v1 and cert.issuer == cert.subject
    except ValueError:  # extensions that cannot be parsed: nothing to trust
        return False
    return constraints.ca


def read_ca_file(path: Path) -> list[x509.Certificate]:
    """The certificates of FELAB_BROKER_CA_FILE, refusing what TLS (or a student given it by
    `felab broker ca`) could not use: a key, a folder, a missing file, the server's own
    certificate. Each refusal is an Invalid that names the file and the setting."""
    try:
        data = read_named_bytes(path, what="CA certificate (ca.pem)", limit=MiB)
    except NamedFileError as exc:
        raise CAFileError(f"{exc} (FELAB_BROKER_CA_FILE)") from None
    if b"PRIVATE KEY" in data:
        raise CAFileError(
            f"{path} holds a private key: FELAB_BROKER_CA_FILE must name the CA certificate "
            f"({CA_FILE}), never a key"
        )
    not_pem = f"{path} is not a PEM certificate: FELAB_BROKER_CA_FILE must name {CA_FILE}"
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise CAFileError(not_pem)
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise CAFileError(not_pem) from None
    if not all(is_ca(c) for c in certs):  # redis.pem: TLS would trust no broker with it
        raise CAFileError(
            f"{path} is the server's certificate, not the CA: give {CA_FILE} (FELAB_BROKER_CA_FILE)"
        )
    return certs


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

    A CA already in the folder (ca.key and ca.pem) signs the new certificate: students keep
    the ca.pem they installed. Both keys are owner-only (0600): docker-compose's `tls` service
    writes them as root and its `redis` runs redis-server as root too (its entrypoint is
    replaced, so the image never drops to its `redis` user). A Redis run as another user needs
    redis.key given to that user (chown), never opened to everyone.
    """
    folder.mkdir(parents=True, exist_ok=True)
    if all((folder / f).exists() for f in (CA_FILE, CERT_FILE, KEY_FILE)):
        _check_kept(folder)
        return Made(folder, False, tuple(h for h in hosts if h not in named_hosts(folder)))
    now = dt.datetime.now(dt.UTC)
    kept = _existing_ca(folder)
    ca_key, ca = kept if kept else _new_ca(now, days)
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
    if not kept:
        no_password = serialization.NoEncryption()
        key_bytes = ca_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, no_password)
        _write(folder / CA_KEY_FILE, key_bytes, 0o600)
    _write(
        folder / KEY_FILE,
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        0o600,  # the server's private key: whoever reads it can pose as the broker
    )
    _write(folder / CERT_FILE, cert.public_bytes(pem), 0o644)
    if not kept:
        _write(folder / CA_FILE, ca.public_bytes(pem), 0o644)
    return Made(folder, True, kept_ca=kept is not None)


def _check_kept(folder: Path) -> None:
    """Refuse TLS files that are kept but unusable: a ca.pem or redis.pem that is no PEM
    certificate, a redis.key that is not redis.pem's key, a redis.pem the ca.pem beside it did
    not sign. Each had been "kept the TLS files", exit 0 (twentieth sweep, b B13, B14), and
    Redis or every student's TLS then failed."""
    anew = f"move {folder} aside to start anew (students would then need its new {CA_FILE})"
    again = (
        f"delete {folder / CERT_FILE} and {folder / KEY_FILE} and run this again (the CA is "
        f"kept, so students keep their {CA_FILE})"
    )
    try:
        ca = x509.load_pem_x509_certificate((folder / CA_FILE).read_bytes())
    except (OSError, ValueError):
        raise TLSFolderError(
            f"{folder / CA_FILE} is not a PEM certificate: put the CA's own {CA_FILE} back, or "
            f"{anew}"
        ) from None
    if not is_ca(ca):
        raise TLSFolderError(
            f"{folder / CA_FILE} is not a CA's certificate (a server's?): put the CA's own "
            f"{CA_FILE} back, or {anew}"
        )
    try:
        cert = x509.load_pem_x509_certificate((folder / CERT_FILE).read_bytes())
    except (OSError, ValueError):
        raise TLSFolderError(f"{folder / CERT_FILE} is not a PEM certificate: {again}") from None
    try:
        key = serialization.load_pem_private_key((folder / KEY_FILE).read_bytes(), None)
        matches = key.public_key() == cert.public_key()
    except (OSError, ValueError, TypeError):
        raise TLSFolderError(f"{folder / KEY_FILE} is not a PEM private key: {again}") from None
    if not matches:
        raise TLSFolderError(f"{folder / KEY_FILE} is not the key of {CERT_FILE}: {again}")
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        raise TLSFolderError(
            f"{folder / CERT_FILE} was not signed by the {CA_FILE} beside it, so no student's "
            f"{CA_FILE} trusts it: {again}"
        ) from None


def _new_ca(now: dt.datetime, days: int) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
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
    return ca_key, ca


def _existing_ca(folder: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate] | None:
    """The CA already in `folder` (its key and certificate), None when neither file is there.

    Every student installed its ca.pem: a CA is never replaced here. Half of one (a ca.pem
    without its key, or the reverse) or one that cannot be read is refused with what to do.
    """
    there = [
        f for f in (CA_KEY_FILE, CA_FILE) if (folder / f).exists() or (folder / f).is_symlink()
    ]
    if not there:
        return None
    if len(there) == 1:
        lacking = CA_FILE if there == [CA_KEY_FILE] else CA_KEY_FILE
        raise TLSFolderError(
            f"{folder} holds {there[0]} but not {lacking}: felab would have to make a new CA, "
            f"and every student would need its new {CA_FILE}; put {lacking} back, or move "
            f"{folder} aside to start anew"
        )
    try:
        key = serialization.load_pem_private_key((folder / CA_KEY_FILE).read_bytes(), None)
        cert = x509.load_pem_x509_certificate((folder / CA_FILE).read_bytes())
    except (OSError, ValueError, TypeError):
        raise TLSFolderError(
            f"{folder}'s {CA_KEY_FILE} and {CA_FILE} cannot be read as a PEM key and "
            f"certificate: put the CA's own files back, or move {folder} aside to start anew"
        ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        raise TLSFolderError(
            f"{folder}'s {CA_KEY_FILE} is not the key of its {CA_FILE}: put the CA's own files "
            f"back, or move {folder} aside to start anew"
        )
    return key, cert
