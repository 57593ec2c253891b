"""Certificates and kubeconfigs of the sandbox control plane, generated locally.

One CA signs the API server's serving certificate (for 127.0.0.1 and the in-cluster names) and a
client certificate per component; the service-account signing key is a separate RSA pair. Private
keys and kubeconfigs are written with mode 0600. Nothing here is meant to leave the machine: the
sandbox listens on 127.0.0.1 only.

What it touches: the ``pki`` folder and the kubeconfig files under the sandbox state directory.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.fields import Below

VALIDITY = datetime.timedelta(days=365)
API_SERVER_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
API_SERVER_IPS = ("127.0.0.1", "10.96.0.1")


@dataclasses.dataclass(frozen=True)
class ClientIdentity:
    """A component's client certificate: file stem, user name (CN) and groups (O)."""

    stem: str
    user: str
    groups: tuple[str, ...] = ()


# The admin and KWOK act for the whole cluster (KWOK writes node and pod status of every simulated
# node), so they are in system:masters. The controller-manager and scheduler get the users their
# built-in RBAC roles are bound to.
CLIENTS = (
    ClientIdentity("admin", "clusterproof-admin", ("system:masters",)),
    ClientIdentity("kube-controller-manager", "system:kube-controller-manager"),
    ClientIdentity("kube-scheduler", "system:kube-scheduler"),
    ClientIdentity("kwok", "kwok-controller", ("system:masters",)),
)


def _write(path: Path, data: bytes, private: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, groups: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _certificate(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    server_names: tuple[str, ...] = (),
    server_ips: tuple[str, ...] = (),
    client: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        builder = builder.add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
        )
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server_names or server_ips else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        )
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server_names or server_ips:
        alt_names: list[x509.GeneralName] = [x509.DNSName(name) for name in server_names]
        alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclasses.dataclass(frozen=True)
class PkiPaths:
    """The sandbox's PKI folder: the CA, the API server's serving pair, the service-account key
    pair, and a certificate and key per client (``CLIENTS``)."""

    root: Path

    ca_cert = Below("root", "ca.crt")
    ca_key = Below("root", "ca.key")
    apiserver_cert = Below("root", "apiserver.crt")
    apiserver_key = Below("root", "apiserver.key")
    service_account_key = Below("root", "sa.key")
    service_account_pub = Below("root", "sa.pub")

    def client_cert(self, stem: str) -> Path:
        return self.root / (f"{stem}.crt")

    def client_key(self, stem: str) -> Path:
        return self.root / (f"{stem}.key")

    def all_files(self) -> list[Path]:
        files = [
            self.ca_cert,
            self.ca_key,
            self.apiserver_cert,
            self.apiserver_key,
            self.service_account_key,
            self.service_account_pub,
        ]
        for client in CLIENTS:
            files += [self.client_cert(client.stem), self.client_key(client.stem)]
        return files


def ensure_pki(paths: PkiPaths) -> bool:
    """Create the CA, serving, client and service-account keys unless all exist. True if created."""
    if all(path.exists() for path in paths.all_files()):
        return False
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("clusterproof-sandbox-ca")
    ca_cert = _certificate(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)
    _write(paths.ca_key, _key_pem(ca_key), private=True)
    _write(paths.ca_cert, _cert_pem(ca_cert), private=False)

    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = _certificate(
        _name("kube-apiserver"),
        server_key.public_key(),
        ca_name,
        ca_key,
        server_names=API_SERVER_NAMES,
        server_ips=API_SERVER_IPS,
    )
    _write(paths.apiserver_key, _key_pem(server_key), private=True)
    _write(paths.apiserver_cert, _cert_pem(server_cert), private=False)

    for identity in CLIENTS:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(_name(identity.user, identity.groups), key.public_key(), ca_name, ca_key, client=True)
        _write(paths.client_key(identity.stem), _key_pem(key), private=True)
        _write(paths.client_cert(identity.stem), _cert_pem(cert), private=False)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write(paths.service_account_key, _key_pem(sa_key), private=True)
    _write(
        paths.service_account_pub,
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
        private=False,
    )
    return True


def kubeconfig_text(
    server: str, ca_cert: Path, client_cert: Path, client_key: Path, name: str = "clusterproof-sandbox"
) -> str:
    """A kubeconfig that embeds the CA and the client's certificate and key."""
    import base64

    def b64(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    user = f"{name}-{client_cert.stem}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": b64(ca_cert)}}],
        "users": [
            {"name": user, "user": {"client-certificate-data": b64(client_cert), "client-key-data": b64(client_key)}}
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name,
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_kubeconfig(path: Path, text: str) -> bool:
    """Write a kubeconfig with mode 0600 unless it already has this content. True if written."""
    if path.exists() and path.read_text() == text and (path.stat().st_mode & 0o777) == 0o600:
        return False
    _write(path, text.encode(), private=True)
    return True


def ensure_serving_certificate(
    paths: PkiPaths, cert_path: Path, key_path: Path, common_name: str, server_ips: tuple[str, ...]
) -> bool:
    """A serving certificate signed by the sandbox CA, for an add-on that serves on loopback (an
    admission webhook the API server calls by URL). Kept while it exists and was signed by the CA
    in force; True if written."""
    ca_cert = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    if cert_path.exists() and key_path.exists():
        current = x509.load_pem_x509_certificate(cert_path.read_bytes())
        try:
            current.verify_directly_issued_by(ca_cert)
            return False
        except (ValueError, TypeError, InvalidSignature):
            pass  # signed by an earlier CA of a sandbox that was torn down: issue a new one
    ca_key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate(
        _name(common_name),
        key.public_key(),
        ca_cert.subject,
        ca_key,
        server_names=("localhost",),
        server_ips=server_ips,
    )
    _write(key_path, _key_pem(key), private=True)
    _write(cert_path, _cert_pem(cert), private=False)
    return True
