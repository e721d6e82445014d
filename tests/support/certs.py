"""TLS material made at test time: a CA, a server certificate for 127.0.0.1/localhost and a
client certificate, all signed by that CA (and a second, unrelated CA for negative tests);
or an ``Authority`` issuing server certificates for given names, as PEM text (the files of
a Kubernetes Secret)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


def _write_cert(path: Path, cert: x509.Certificate) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common_name: str,
    server: bool,
    names: tuple[list[str], list[str]] = (["localhost"], ["127.0.0.1"]),
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate ``ca`` signs; a server's names ``names``: (DNS names, IP addresses)."""
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if server:
        dns, ips = names
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    *(x509.DNSName(name) for name in dns),
                    *(x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips),
                ]
            ),
            critical=False,
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = _ca("jobs test CA")
    server, server_key = _leaf(ca, ca_key, "job_service", server=True)
    client, client_key = _leaf(ca, ca_key, "a worker", server=False)
    other, _ = _ca("an unrelated CA")
    return Certs(
        ca=_write_cert(directory / "ca.pem", ca),
        server_cert=_write_cert(directory / "server.pem", server),
        server_key=_write_key(directory / "server.key", server_key),
        client_cert=_write_cert(directory / "client.pem", client),
        client_key=_write_key(directory / "client.key", client_key),
        other_ca=_write_cert(directory / "other-ca.pem", other),
    )


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


class Authority:
    """A CA issuing certificates that serve (and, for routes between servers, connect)
    under the names given."""

    def __init__(self, common_name: str = "jobs test CA") -> None:
        self._cert, self._key = _ca(common_name)

    def pem(self) -> str:
        return self._cert.public_bytes(serialization.Encoding.PEM).decode()

    def issue(self, common_name: str, dns: list[str], ips: list[str]) -> tuple[str, str]:
        """A certificate for ``dns`` and ``ips`` and its key, as PEM text."""
        cert, key = _leaf(self._cert, self._key, common_name, server=True, names=(dns, ips))
        return cert.public_bytes(serialization.Encoding.PEM).decode(), _pem_key(key)
