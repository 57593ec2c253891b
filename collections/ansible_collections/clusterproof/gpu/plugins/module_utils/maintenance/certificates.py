"""The cluster's certificates: when each expires, the verdict, and kubeadm's renewal.

A kubeadm cluster's certificates last a year (its CAs ten): a site that runs for years meets the
day its API server stops answering, unless someone renews them (an upgrade renews them too). What
is read, per host:

- on a control plane, ``kubeadm certs check-expiration -o json``: every certificate kubeadm made
  (the API server's, etcd's, the kubeconfigs' client certificates) and the CAs;
- on every node, the kubelet's client certificate (``/var/lib/kubelet/pki/kubelet-client-current.pem``),
  through ``openssl x509 -enddate``: the kubelet rotates it itself, so one close to its end means the
  rotation failed.

The pure half parses what those print (``kubeadm_certificates``, ``kubelet_certificate``), judges each
certificate (``status``: a warning under ``warn_days``, a failure under ``fail_days``) and makes the
report's section (``section``). ``read_host`` and ``renew`` touch the host they run on: they run
kubeadm and openssl, and ``renew`` restarts the control plane's static pods (each manifest moved out of
the kubelet's manifest directory until the component's port closes, then back until it opens again,
as kubeadm's manual says). May import: the standard library, ``common.wait``, ``report.model``,
``host_command``.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import host_command
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check, Section, Table

SECTION_ID = "certificates"
KUBEADM = "kubeadm"
KUBEADM_CA = "kubeadm CA"
KUBELET = "kubelet client"
KUBELET_CLIENT_CERTIFICATE = "/var/lib/kubelet/pki/kubelet-client-current.pem"
DAY = 86400
RENEW_PLAYBOOK = "playbooks/renew_certificates.yml"
# The control plane's static pods, in the order renew restarts them, with the local port each listens on
# (etcd's plain-HTTP metrics and health port, kubeadm's default; the others' secure ports).
STATIC_PODS: tuple[tuple[str, int], ...] = (
    ("etcd", 2381),
    ("kube-apiserver", 6443),
    ("kube-controller-manager", 10257),
    ("kube-scheduler", 10259),
)


@dataclasses.dataclass(frozen=True)
class Certificate:
    """One certificate of one host: its name (kubeadm's, or the kubelet's), its kind, when it expires
    (RFC 3339, UTC), the seconds left when read, and whether an external CA manages it."""

    host: str
    name: str
    kind: str
    expires: str
    seconds_left: int
    externally_managed: bool = False

    @property
    def days_left(self) -> float:
        return self.seconds_left / DAY

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Certificate:
        return cls(
            host=str(data["host"]),
            name=str(data["name"]),
            kind=str(data["kind"]),
            expires=str(data["expires"]),
            seconds_left=int(data["seconds_left"]),
            externally_managed=bool(data.get("externally_managed", False)),
        )


# What kubeadm writes on the first control plane alone (``kubeadm init``; since v1.29 the cluster-admin
# kubeconfig): the other control planes list it as missing, as they must.
MADE_ON_INIT_ONLY = ("super-admin.conf",)


def kubeadm_certificates(text: str, host: str) -> list[Certificate]:
    """``kubeadm certs check-expiration -o json`` (kind CertificateExpirationInfo) -> its certificates
    and CAs. Raises ValueError saying what is missing."""
    try:
        info = json.loads(text)
    except ValueError as error:
        raise ValueError("kubeadm certs check-expiration on %s: not JSON (%s)" % (host, error)) from error
    if not isinstance(info, dict) or info.get("kind") != "CertificateExpirationInfo":
        raise ValueError(
            "kubeadm certs check-expiration on %s: expected kind CertificateExpirationInfo, found %r"
            % (host, info.get("kind") if isinstance(info, dict) else type(info).__name__)
        )
    found = []
    for field, kind in (("certificates", KUBEADM), ("certificateAuthorities", KUBEADM_CA)):
        for entry in info.get(field) or []:
            if isinstance(entry, dict) and entry.get("missing") and entry.get("name") in MADE_ON_INIT_ONLY:
                continue
            try:
                found.append(
                    Certificate(
                        host=host,
                        name=str(entry["name"]),
                        kind=kind,
                        expires="missing" if entry.get("missing") else str(entry["expirationDate"]),
                        seconds_left=int(entry["residualTime"]),
                        externally_managed=bool(entry.get("externallyManaged", False)),
                    )
                )
            except (KeyError, TypeError, ValueError) as error:
                raise ValueError(
                    "kubeadm certs check-expiration on %s: %s entry %r lacks %s" % (host, field, entry, error)
                ) from error
    return found


def kubelet_certificate(enddate: str, now: datetime.datetime, host: str) -> Certificate:
    """``openssl x509 -noout -enddate`` (``notAfter=Nov 27 22:53:30 2027 GMT``) read at ``now`` (UTC)."""
    text = enddate.strip()
    if not text.startswith("notAfter="):
        raise ValueError("openssl x509 -enddate on %s: expected notAfter=<date>, found %r" % (host, text))
    try:
        # openssl pads a day below 10 with a space ("Nov  7"): split() takes any run of spaces.
        expires = datetime.datetime.strptime(" ".join(text.removeprefix("notAfter=").split()), "%b %d %H:%M:%S %Y %Z")
    except ValueError as error:
        raise ValueError(
            "openssl x509 -enddate on %s: cannot read the date in %r (%s)" % (host, text, error)
        ) from error
    expires = expires.replace(tzinfo=datetime.UTC)
    return Certificate(
        host=host,
        name="kubelet-client-current.pem",
        kind=KUBELET,
        expires=expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        seconds_left=int((expires - now).total_seconds()),
    )


def status(certificate: Certificate, warn_days: float, fail_days: float) -> str:
    """fail under ``fail_days`` left (or expired), warn under ``warn_days``, else pass."""
    if certificate.days_left < fail_days:
        return "fail"
    if certificate.days_left < warn_days:
        return "warn"
    return "pass"


def check_days(warn_days: Any, fail_days: Any) -> tuple[float, float]:
    """The two thresholds, checked: numbers of days, ``fail_days`` no more than ``warn_days``."""
    for field, value in (("warn_days", warn_days), ("fail_days", fail_days)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError("%s: expected a number of days (0 or more); found %r" % (field, value))
    if fail_days > warn_days:
        raise ValueError("fail_days: expected no more than warn_days (%r); found %r" % (warn_days, fail_days))
    return float(warn_days), float(fail_days)


def _action(certificate: Certificate) -> str:
    if certificate.externally_managed:
        return "renew it with the external CA that signed it"
    if certificate.kind == KUBEADM:
        return "renew the control plane's certificates: ansible-playbook -i <inventory> %s" % RENEW_PLAYBOOK
    if certificate.kind == KUBEADM_CA:
        return "rotate the CA (kubeadm does not renew CAs): Kubernetes' manual rotation of CA certificates"
    return (
        "the kubelet rotates this certificate itself: see why it did not (journalctl -u kubelet; "
        "kubectl get csr for requests left pending), or join the node again"
    )


def _days(certificate: Certificate) -> str:
    return "expired" if certificate.seconds_left <= 0 else "%.0f days" % certificate.days_left


def section(
    certificates: Iterable[Certificate],
    warn_days: float,
    fail_days: float,
    unread: Mapping[str, str] | None = None,
    skipped: str = "",
) -> Section:
    """The report's section: a check per host (its worst certificate, named with its days left and
    what to do), a failed check per host that could not be read (``unread``: host -> why), and the
    table of every certificate. ``skipped``: why nothing was read (a site that kubeadm did not make)."""
    title = "Cluster certificates"
    if skipped:
        return Section(SECTION_ID, title, [Check(SECTION_ID + "/read", "certificates read", "skip", message=skipped)])
    by_host: dict[str, list[Certificate]] = {}
    for certificate in certificates:
        by_host.setdefault(certificate.host, []).append(certificate)
    checks = []
    rows, row_status = [], []
    for host in sorted(set(by_host) | set(unread or {})):
        if host in (unread or {}):
            checks.append(
                Check(
                    "%s/%s" % (SECTION_ID, host), "%s: certificates read" % host, "fail",
                    message=(unread or {})[host], category="configuration",
                    action="make the host reachable (or take it out of the inventory), then validate again",
                )
            )  # fmt: skip
            continue
        judged = sorted(
            ((status(c, warn_days, fail_days), c) for c in by_host[host]), key=lambda pair: pair[1].seconds_left
        )
        for verdict, certificate in judged:
            rows.append([host, certificate.name, certificate.kind, certificate.expires, _days(certificate)])
            row_status.append(verdict)
        bad = [(verdict, c) for verdict, c in judged if verdict != "pass"]
        worst = "fail" if any(v == "fail" for v, _ in bad) else "warn" if bad else "pass"
        soonest = judged[0][1]
        message = (
            "; ".join("%s (%s) expires %s: %s left" % (c.name, c.kind, c.expires, _days(c)) for _, c in bad)
            if bad
            else "%d certificates; the first to expire: %s in %s" % (len(judged), soonest.name, _days(soonest))
        )
        actions = sorted({_action(c) for _, c in bad})
        checks.append(
            Check(
                "%s/%s" % (SECTION_ID, host),
                "%s: no certificate expires within %g days" % (host, warn_days),
                worst,
                expected=">= %g days left (warning under %g)" % (fail_days, warn_days),
                observed={c.name: _days(c) for _, c in bad} or _days(soonest),
                message=message,
                category="configuration" if bad else None,
                action="; ".join(actions) if actions else None,
            )
        )
    table = Table(
        SECTION_ID,
        "Certificates by host, soonest first",
        ["Host", "Certificate", "Kind", "Expires", "Left"],
        rows,
        row_status,
    )
    return Section(SECTION_ID, title, checks, [table])


# --- on the host ------------------------------------------------------------------------------------


def read_host(
    host: str, kubeadm: bool, kubelet_certificate_path: str = KUBELET_CLIENT_CERTIFICATE
) -> list[Certificate]:
    """This host's certificates: kubeadm's when ``kubeadm`` (a control plane), and the kubelet's
    client certificate when the host has one."""
    found = []
    if kubeadm:
        found += kubeadm_certificates(host_command.run(["kubeadm", "certs", "check-expiration", "-o", "json"]), host)
    if os.path.exists(kubelet_certificate_path):
        enddate = host_command.run(["openssl", "x509", "-noout", "-enddate", "-in", kubelet_certificate_path])
        found.append(kubelet_certificate(enddate, datetime.datetime.now(datetime.UTC), host))
    return found


def due(certificates: Iterable[Certificate], renew_days: float) -> list[str]:
    """kubeadm's certificates (not the CAs, not the externally managed) with under ``renew_days`` left."""
    return sorted(
        c.name for c in certificates if c.kind == KUBEADM and not c.externally_managed and c.days_left < renew_days
    )


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _wait_port(component: str, port: int, open_: bool, timeout: float) -> None:
    waited = wait_until(lambda: _port_open(port), lambda is_open: is_open == open_, timeout=timeout, interval=1.0)
    if not waited.held:
        raise RuntimeError(
            "%s did not %s within %.0f s (port %d still %s)"
            % (component, "start again" if open_ else "stop", timeout, port, "closed" if open_ else "open")
        )


def static_pod_port(component: str) -> int:
    """The local port ``component`` (one of STATIC_PODS) listens on."""
    ports = dict(STATIC_PODS)
    if component not in ports:
        raise ValueError("component: expected one of %s; found %r" % (", ".join(ports), component))
    return ports[component]


def stop_static_pod(component: str, manifest_dir: str, parking_dir: str, timeout: float) -> bool:
    """Move ``component``'s manifest to ``parking_dir`` and wait until its port closes (the kubelet
    stopped it). False when it was parked already (nothing to do); a host without the manifest is an
    error naming it."""
    manifest = Path(manifest_dir) / (component + ".yaml")
    parked = Path(parking_dir) / manifest.name
    Path(parking_dir).mkdir(parents=True, exist_ok=True)
    if not manifest.exists():
        if parked.exists():
            _wait_port(component, static_pod_port(component), False, timeout)
            return False
        raise RuntimeError("%s: no manifest in %s nor in %s" % (component, manifest_dir, parking_dir))
    os.replace(manifest, parked)
    _wait_port(component, static_pod_port(component), False, timeout)
    return True


def start_static_pod(component: str, manifest_dir: str, parking_dir: str, timeout: float) -> bool:
    """Put ``component``'s parked manifest back and wait until its port opens. False when it was not
    parked (nothing to do)."""
    manifest = Path(manifest_dir) / (component + ".yaml")
    parked = Path(parking_dir) / manifest.name
    if not parked.exists():
        return False
    os.replace(parked, manifest)
    _wait_port(component, static_pod_port(component), True, timeout)
    return True


def restart_static_pods(manifest_dir: str, parking_dir: str, timeout: float) -> list[str]:
    """Restart the control plane's static pods one at a time: each manifest moved to ``parking_dir``
    until its component's port closes (the kubelet stopped it), then back until the port opens. A
    manifest the host lacks is skipped; one an interrupted run left parked is put back first. Returns
    the components restarted."""
    restarted = []
    Path(parking_dir).mkdir(parents=True, exist_ok=True)
    for component, port in STATIC_PODS:
        manifest = Path(manifest_dir) / (component + ".yaml")
        parked = Path(parking_dir) / manifest.name
        if parked.exists() and not manifest.exists():
            os.replace(parked, manifest)
        if not manifest.exists():
            continue
        os.replace(manifest, parked)
        try:
            _wait_port(component, port, False, timeout)
        finally:
            os.replace(parked, manifest)
        _wait_port(component, port, True, timeout)
        restarted.append(component)
    return restarted


def renew(names: Sequence[str]) -> None:
    """``kubeadm certs renew`` each of ``names`` (``all``: every certificate kubeadm made, not the CAs)."""
    for name in names:
        host_command.run(["kubeadm", "certs", "renew", name])
