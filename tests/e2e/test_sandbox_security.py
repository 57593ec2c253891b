"""What a local user who is not the sandbox's owner can reach: nothing but 127.0.0.1, and no etcd
without a certificate of the sandbox CA."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai

from .listeners import off_loopback, sandbox_listeners

pytestmark = pytest.mark.sandbox


def test_every_listening_socket_of_the_sandbox_is_on_loopback(sandbox, kai_site):
    listeners = sandbox_listeners(sandbox.state_dir)
    # The control plane, KAI's components and the GPU agent are all there to be looked at.
    assert {"etcd", "kube-apiserver", "kwok", "kai-scheduler", "sandbox-gpu-agent"} <= set(listeners), listeners
    ports = control_plane.Ports(sandbox.port_base)
    assert {port for _, port in listeners["etcd"]} == {ports.etcd_client, ports.etcd_peer}
    assert ("127.0.0.1", ports.apiserver) in listeners["kube-apiserver"]
    # KAI's plugin server listened on every interface; it no longer listens at all.
    assert {port for _, port in listeners["kai-scheduler"]} == {kai.KaiPorts(sandbox.port_base).port(0)}
    assert off_loopback(listeners) == {}, "listening beyond 127.0.0.1: %s" % json.dumps(off_loopback(listeners))


def _etcd_health(url: str, context: ssl.SSLContext | None) -> dict:
    with urllib.request.urlopen(url + "/health", timeout=5, context=context) as response:
        return json.loads(response.read())


def test_etcd_answers_only_a_client_with_a_certificate_of_the_sandbox_ca(sandbox):
    pki = control_plane.Layout(sandbox.state_dir).pki
    port = control_plane.Ports(sandbox.port_base).etcd_client
    https = "https://127.0.0.1:%d" % port
    # Plain HTTP: etcd speaks TLS only.
    with pytest.raises((urllib.error.HTTPError, urllib.error.URLError, ConnectionError)) as plain:
        _etcd_health("http://127.0.0.1:%d" % port, None)
    assert not isinstance(plain.value, urllib.error.HTTPError) or plain.value.code == 400
    # TLS that trusts etcd's certificate but presents none: the handshake is refused.
    anonymous = ssl.create_default_context(cafile=str(pki.ca_cert))
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        _etcd_health(https, anonymous)
    # A certificate of another CA is refused alike.
    stranger = ssl.create_default_context(cafile=str(pki.ca_cert))
    stranger.load_cert_chain(*_self_signed(sandbox.state_dir.parent))
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        _etcd_health(https, stranger)
    # The sandbox's health-check client certificate is answered.
    client = ssl.create_default_context(cafile=str(pki.ca_cert))
    client.load_cert_chain(pki.client_cert("etcd-healthcheck-client"), pki.client_key("etcd-healthcheck-client"))
    assert _etcd_health(https, client)["health"] == "true"


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A client certificate and key that no sandbox CA signed."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "stranger")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "stranger.crt", folder / "stranger.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path
