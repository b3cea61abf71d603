"""A throw-away certificate authority for one test-bed cluster: every key lives in the cluster's temporary directory."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=2)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


class CertificateAuthority:
    def __init__(self, directory: Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name("railforge-testbed-ca"))
            .issuer_name(_name("railforge-testbed-ca"))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.cert_path = directory / "ca.crt"
        self.key_path = directory / "ca.key"
        self.cert_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        _write_key(self.key, self.key_path)

    def issue(
        self,
        name: str,
        common_name: str,
        organization: str | None = None,
        *,
        server_names: tuple[str, ...] = (),
        client: bool = True,
    ) -> tuple[Path, Path]:
        """A key and certificate signed by this CA; server_names (DNS names or IPs) make it a serving certificate."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organization))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if server_names:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
            alternatives: list[x509.GeneralName] = []
            for entry in server_names:
                try:
                    alternatives.append(x509.IPAddress(ipaddress.ip_address(entry)))
                except ValueError:
                    alternatives.append(x509.DNSName(entry))
            builder = builder.add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        cert = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False).sign(self.key, hashes.SHA256())
        cert_path, key_path = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, key_path)
        return cert_path, key_path


def service_account_keys(directory: Path) -> tuple[Path, Path]:
    """The key pair that signs and verifies service-account tokens."""
    key = ec.generate_private_key(ec.SECP256R1())
    private, public = directory / "sa.key", directory / "sa.pub"
    _write_key(key, private)
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public


def kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str) -> Path:
    """A kubeconfig with one cluster, one client-certificate user and one current context."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "testbed", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": user, "context": {"cluster": "testbed", "user": user}}],
        "current-context": user,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
