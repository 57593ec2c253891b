"""Certificates and kubeconfigs of the sandbox control plane, generated locally.

One CA signs the API server's serving certificate (for 127.0.0.1 and the in-cluster names),
etcd's (for 127.0.0.1; etcd also presents it to its peer port) and a client certificate per
component, the API server's client certificate for etcd and etcd's health check's among them;
the service-account signing key is a separate RSA pair. Private keys and kubeconfigs are written
with mode 0600. Nothing here is meant to leave the machine: the sandbox listens on 127.0.0.1 only.

A PKI folder made by an earlier version lacks some of these: ``ensure_pki`` issues what is
missing from the CA in force, so the certificates the running processes hold stay valid.

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

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.fields import Below

VALIDITY = datetime.timedelta(days=365)
API_SERVER_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
API_SERVER_IPS = ("127.0.0.1", "10.96.0.1")
ETCD_NAMES = ("localhost",)
ETCD_IPS = ("127.0.0.1",)


@dataclasses.dataclass(frozen=True)
class ClientIdentity:
    """A component's client certificate: file stem, user name (CN) and groups (O)."""

    stem: str
    user: str
    groups: tuple[str, ...] = ()


# The admin and KWOK act for the whole cluster (KWOK writes node and pod status of every simulated
# node), so they are in system:masters. The controller-manager and scheduler get the users their
# built-in RBAC roles are bound to. etcd's two clients (the API server, and ``up``'s readiness
# check) are kubeadm's; no RBAC role is bound to their users, so the API server grants them nothing.
CLIENTS = (
    ClientIdentity("admin", "clusterproof-admin", ("system:masters",)),
    ClientIdentity("kube-controller-manager", "system:kube-controller-manager"),
    ClientIdentity("kube-scheduler", "system:kube-scheduler"),
    ClientIdentity("kwok", "kwok-controller", ("system:masters",)),
    ClientIdentity("apiserver-etcd-client", "kube-apiserver-etcd-client"),
    ClientIdentity("etcd-healthcheck-client", "kube-etcd-healthcheck-client"),
)
APISERVER_ETCD_CLIENT = "apiserver-etcd-client"
ETCD_HEALTHCHECK_CLIENT = "etcd-healthcheck-client"


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
    etcd_cert = Below("root", "etcd.crt")
    etcd_key = Below("root", "etcd.key")
    service_account_key = Below("root", "sa.key")
    service_account_pub = Below("root", "sa.pub")

    def client_cert(self, stem: str) -> Path:
        return self.root / (f"{stem}.crt")

    def client_key(self, stem: str) -> Path:
        return self.root / (f"{stem}.key")

    def leaves(self) -> list[Leaf]:
        """Every certificate the CA signs, with its key."""
        leaves = [
            Leaf(self.apiserver_cert, self.apiserver_key, _name("kube-apiserver"), API_SERVER_NAMES, API_SERVER_IPS),
            # etcd presents its certificate to its peers as a client too.
            Leaf(self.etcd_cert, self.etcd_key, _name("etcd"), ETCD_NAMES, ETCD_IPS, client=True),
        ]
        leaves += [
            Leaf(self.client_cert(c.stem), self.client_key(c.stem), _name(c.user, c.groups), client=True)
            for c in CLIENTS
        ]
        return leaves

    def all_files(self) -> list[Path]:
        files = [self.ca_cert, self.ca_key, self.service_account_key, self.service_account_pub]
        for leaf in self.leaves():
            files += [leaf.cert, leaf.key]
        return files


@dataclasses.dataclass(frozen=True)
class Leaf:
    """A certificate signed by the sandbox CA: where it and its key go, its subject, the names and
    addresses it serves (none for a client's) and whether it is a client's."""

    cert: Path
    key: Path
    subject: x509.Name
    server_names: tuple[str, ...] = ()
    server_ips: tuple[str, ...] = ()
    client: bool = False


def ensure_pki(paths: PkiPaths) -> bool:
    """Create the CA, the certificates it signs and the service-account keys, those that are
    missing. A new CA (none yet, or part of it lost) re-issues every certificate; with the CA in
    force, only the missing ones are issued (a sandbox made by an earlier version, which had fewer),
    so the processes running keep certificates that stay valid. True if anything was written."""
    if all(path.exists() for path in paths.all_files()):
        return False
    if paths.ca_cert.exists() and paths.ca_key.exists():
        ca_name = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes()).subject
        ca_key = _load_ca_key(paths)
        leaves = [leaf for leaf in paths.leaves() if not (leaf.cert.exists() and leaf.key.exists())]
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = _name("clusterproof-sandbox-ca")
        ca_cert = _certificate(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)
        _write(paths.ca_key, _key_pem(ca_key), private=True)
        _write(paths.ca_cert, _cert_pem(ca_cert), private=False)
        leaves = paths.leaves()
    for leaf in leaves:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(
            leaf.subject,
            key.public_key(),
            ca_name,
            ca_key,
            server_names=leaf.server_names,
            server_ips=leaf.server_ips,
            client=leaf.client,
        )
        _write(leaf.key, _key_pem(key), private=True)
        _write(leaf.cert, _cert_pem(cert), private=False)

    if not (paths.service_account_key.exists() and paths.service_account_pub.exists()):
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        _write(paths.service_account_key, _key_pem(sa_key), private=True)
        _write(
            paths.service_account_pub,
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
            private=False,
        )
    return True


def _load_ca_key(paths: PkiPaths) -> ec.EllipticCurvePrivateKey:
    ca_key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    return ca_key


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
    ca_key = _load_ca_key(paths)
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
