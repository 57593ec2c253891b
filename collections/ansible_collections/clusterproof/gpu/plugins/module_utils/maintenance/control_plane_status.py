"""What a control-plane host reads of its control plane: etcd, its API server, the API through the
site's endpoint, and the names the API server's certificate serves.

Read on each control-plane host for the validation's ``control-plane`` section (the verdicts are
``validate/control_plane.py``'s, on the controller):

- etcd through the JSON gateway it serves on its client URL, so that no etcdctl is needed on the host:
  ``POST /v3/cluster/member/list`` on the host's own member, then, on each member's client URL,
  ``POST /v3/maintenance/status`` (its leader, raft indices, database size, errors) and ``GET /health``.
  kubeadm's etcd answers only clients with a certificate of its CA: kubeadm's health-check client's;
- the API server's ``/readyz`` at the address it advertises (the annotation kubeadm puts on its static
  pod), and through the site's endpoint (the declared one, or the server kubeadm wrote into
  ``admin.conf``: the first control plane's address when none was declared), both checked against the
  cluster's CA, as a kubelet would;
- the subjectAltName of the API server's certificate, through ``openssl x509 -ext subjectAltName``.

Every read has a timeout (a member whose host is powered off must not hang the validation) and a read
that fails is recorded with its reason, never raised: the section then says what could not be read and
why. ``https_reader`` makes the one function that reads a URL; the functions that take apart what it
returns (``members_of``, ``status_of``, ``health_of``, ``sans_of``, ``advertised_endpoint``,
``kubeconfig_server``) are pure and are fed recorded output in the unit tests.

May import: the standard library, ``host_command``. Touches: the network (the HTTPS reads), the files
it is pointed at, and openssl on the host.
"""

from __future__ import annotations

import ipaddress
import json
import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import host_command

# kubeadm's places for what is read.
ETCD_URL = "https://127.0.0.1:2379"
ETCD_CA = "/etc/kubernetes/pki/etcd/ca.crt"
ETCD_CLIENT_CERTIFICATE = "/etc/kubernetes/pki/etcd/healthcheck-client.crt"
ETCD_CLIENT_KEY = "/etc/kubernetes/pki/etcd/healthcheck-client.key"
KUBERNETES_CA = "/etc/kubernetes/pki/ca.crt"
APISERVER_CERTIFICATE = "/etc/kubernetes/pki/apiserver.crt"
APISERVER_MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"
ADMIN_KUBECONFIG = "/etc/kubernetes/admin.conf"
APISERVER_PORT = 6443
# The annotation kubeadm writes on the API server's static pod: the address:port it advertises.
_ADVERTISED = re.compile(r"kube-apiserver\.advertise-address\.endpoint:\s*['\"]?([^'\"\s]+)")
_ADVERTISE_FLAG = re.compile(r"--advertise-address=([^'\"\s]+)")
_PORT_FLAG = re.compile(r"--secure-port=(\d+)")
_SERVER = re.compile(r"^\s*server:\s*['\"]?https://([^/'\"\s]+)", re.MULTILINE)
# host, or host:port, or [IPv6]:port.
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$")

# What reads a URL: (url, JSON body to POST or None to GET) -> the answer's text; ReadFailed otherwise.
Reader = Callable[[str, "bytes | None"], str]


class ReadFailed(Exception):
    """A read that did not answer, or answered with an error: the message says which URL and why."""


def https_reader(timeout: float, ca_file: str, certificate: str = "", key: str = "") -> Reader:
    """A function that reads an HTTPS URL, checking the server against ``ca_file`` (and its name, as
    any client does), presenting ``certificate`` when given, giving up after ``timeout`` seconds.
    ReadFailed when the files cannot be loaded."""
    try:
        context = ssl.create_default_context(cafile=ca_file)
        if certificate:
            context.load_cert_chain(certificate, key or None)
    except (OSError, ssl.SSLError) as error:
        files = ", ".join(filter(None, (ca_file, certificate, key)))
        raise ReadFailed("cannot load %s: %s" % (files, error)) from error
    # No proxy: a host's https_proxy must not carry reads of its own control plane elsewhere.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))

    def read(url: str, body: bytes | None = None) -> str:
        request = urllib.request.Request(url, data=body, method="GET" if body is None else "POST")
        if body is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with opener.open(request, timeout=timeout) as response:
                return response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            answer = error.read().decode("utf-8", "replace")
            raise ReadFailed("%s answered HTTP %d: %s" % (url, error.code, error_text(answer))) from error
        except urllib.error.URLError as error:
            raise ReadFailed("%s: %s" % (url, error.reason)) from error
        except (OSError, ssl.SSLError) as error:  # a timeout while reading the answer, a reset
            raise ReadFailed("%s: %s" % (url, error or type(error).__name__)) from error

    return read


def error_text(answer: str) -> str:
    """What an error answer says: the gateway's ``message``, the checks /readyz says failed, or the text."""
    try:
        data = json.loads(answer)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])
    failed = [line.strip() for line in answer.splitlines() if line.strip().startswith("[-]")]
    return "; ".join(failed) if failed else answer.strip()[:300]


def _json(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ValueError("%s: not JSON (%s): %r" % (what, error, text[:200])) from error
    if not isinstance(data, dict):
        raise ValueError("%s: expected a JSON object, found %r" % (what, text[:200]))
    return data


def _count(data: dict[str, Any], field: str) -> int:
    """A uint64 of the gateway's JSON: a string of digits; absent when zero."""
    return int(data.get(field) or 0)


def members_of(text: str) -> list[dict[str, Any]]:
    """``/v3/cluster/member/list``'s answer -> each member: id (decimal, as the gateway writes it), name
    (empty for one added but never started), client and peer URLs, and whether it is a learner."""
    data = _json(text, "etcd member list")
    if not isinstance(data.get("members"), list):
        raise ValueError("etcd member list: expected members, found %r" % text[:200])
    return [
        {
            "id": str(member.get("ID") or ""),
            "name": str(member.get("name") or ""),
            "client_urls": [str(url) for url in member.get("clientURLs") or []],
            "peer_urls": [str(url) for url in member.get("peerURLs") or []],
            "learner": bool(member.get("isLearner", False)),
        }
        for member in data["members"]
    ]


def status_of(text: str) -> dict[str, Any]:
    """``/v3/maintenance/status``'s answer -> the member's id, the leader it follows (empty: none), its
    raft term, index and applied index, database size, version and errors (``etcdserver: no leader``)."""
    data = _json(text, "etcd status")
    header = data.get("header") if isinstance(data.get("header"), dict) else {}
    leader = str(data.get("leader") or "")
    return {
        "member_id": str(header.get("member_id") or ""),
        "leader": "" if leader == "0" else leader,
        "raft_term": _count(data, "raftTerm"),
        "raft_index": _count(data, "raftIndex"),
        "raft_applied_index": _count(data, "raftAppliedIndex"),
        "db_size": _count(data, "dbSize"),
        "version": str(data.get("version") or ""),
        "errors": [str(error) for error in data.get("errors") or []],
    }


def health_of(text: str) -> tuple[bool, str]:
    """``/health``'s answer -> healthy, and etcd's reason when not (``RAFT NO LEADER``)."""
    data = _json(text, "etcd health")
    return str(data.get("health")) == "true", str(data.get("reason") or "")


def read_etcd(read: Reader, url: str) -> dict[str, Any]:
    """The members as the etcd at ``url`` lists them, each with its status and health read on its
    own client URL. ``error``: why the list could not be read (then ``members`` is None)."""
    try:
        members = members_of(read(url.rstrip("/") + "/v3/cluster/member/list", b"{}"))
    except (ReadFailed, ValueError) as error:
        return {"url": url, "error": str(error), "members": None}
    for member in members:
        member.update(status=None, status_error="", health=None, health_reason="")
        if not member["client_urls"]:
            member["status_error"] = "no client URL: the member was added but has never started"
            continue
        client_url = member["client_urls"][0].rstrip("/")
        try:
            member["status"] = status_of(read(client_url + "/v3/maintenance/status", b"{}"))
            member["health"], member["health_reason"] = health_of(read(client_url + "/health", None))
        except (ReadFailed, ValueError) as error:
            # A member that did not answer its status is not asked its health: one timeout, not two.
            member["status_error" if member["status"] is None else "health_reason"] = str(error)
    return {"url": url, "error": "", "members": members}


def host_port(address: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[IPv6]:port`` -> (host without brackets, port; the API server's
    6443 when none). ValueError naming what was found."""
    match = _HOST_PORT.match(address.strip())
    port = int(match.group(2)) if match and match.group(2) else APISERVER_PORT
    if not match or not 0 < port < 65536:
        raise ValueError("expected host or host:port (port 1-65535), found %r" % address)
    return match.group(1).strip("[]"), port


def url_of(address: str, path: str) -> str:
    """https://host:port/path, the host in brackets when it is an IPv6 address."""
    host, port = host_port(address)
    return "https://%s:%d%s" % ("[%s]" % host if ":" in host else host, port, path)


def advertised_endpoint(manifest: str) -> str:
    """The address:port the API server advertises, from its static pod: kubeadm's annotation, else its
    --advertise-address and --secure-port. ValueError when the manifest says neither."""
    annotated = _ADVERTISED.search(manifest)
    if annotated:
        return annotated.group(1)
    flag = _ADVERTISE_FLAG.search(manifest)
    if not flag:
        raise ValueError("neither kubeadm's advertise-address annotation nor --advertise-address in the manifest")
    port = _PORT_FLAG.search(manifest)
    address = flag.group(1)
    return "%s:%s" % ("[%s]" % address if ":" in address else address, port.group(1) if port else APISERVER_PORT)


def kubeconfig_server(kubeconfig: str) -> str:
    """The host:port of the (first) server a kubeconfig names. ValueError when it names none."""
    found = _SERVER.search(kubeconfig)
    if not found:
        raise ValueError("no https server in the kubeconfig")
    return found.group(1)


def sans_of(text: str) -> dict[str, list[str]]:
    """``openssl x509 -noout -ext subjectAltName``'s output -> the DNS names and the IP addresses
    (openssl writes IPv6 in full and in capitals: written here as Python writes them)."""
    names: list[str] = []
    addresses: list[str] = []
    for entry in re.split(r",\s*|\n\s*", text):
        kind, _, value = entry.strip().partition(":")
        if kind == "DNS":
            names.append(value.strip())
        elif kind == "IP Address":
            try:
                addresses.append(str(ipaddress.ip_address(value.strip())))
            except ValueError:
                addresses.append(value.strip())
    return {"dns": names, "ips": addresses}


def read_readyz(read: Reader, address: str) -> dict[str, Any]:
    """The API server's /readyz at ``address``: ok, or the error."""
    url = url_of(address, "/readyz")
    try:
        answer = read(url, None).strip()
    except ReadFailed as error:
        return {"address": address, "url": url, "ok": False, "error": str(error)}
    return {"address": address, "url": url, "ok": answer == "ok", "error": "" if answer == "ok" else answer[:300]}


def _file(path: str) -> str:
    with open(path, encoding="utf-8") as opened:
        return opened.read()


def read_host(
    etcd_url: str,
    etcd_tls: tuple[str, str, str],
    kubernetes_ca: str,
    endpoint: str,
    apiserver_address: str,
    timeout: float,
    kubeconfig: str = ADMIN_KUBECONFIG,
    apiserver_manifest: str = APISERVER_MANIFEST,
    apiserver_certificate: str = APISERVER_CERTIFICATE,
) -> dict[str, Any]:
    """Everything this host reads: ``etcd``, ``apiserver`` (its own /readyz), ``endpoint`` (/readyz
    through the site's endpoint) and ``sans``; each part that could not be read holds ``error``.
    ``endpoint`` empty: the server of ``kubeconfig``; ``apiserver_address`` empty: the one advertised
    in ``apiserver_manifest``."""
    try:
        etcd = read_etcd(https_reader(timeout, *etcd_tls), etcd_url)
    except ReadFailed as error:
        etcd = {"url": etcd_url, "error": str(error), "members": None}

    try:
        read_api: Reader | None = https_reader(timeout, kubernetes_ca)
        api_error = ""
    except ReadFailed as error:
        read_api, api_error = None, str(error)
    results: dict[str, Any] = {"etcd": etcd}
    for part, address, source, find in (
        ("apiserver", apiserver_address, apiserver_manifest, advertised_endpoint),
        ("endpoint", endpoint, kubeconfig, kubeconfig_server),
    ):
        try:
            address = address or find(_file(source))
            results[part] = read_readyz(read_api, address) if read_api else {"address": address, "ok": False}
        except (OSError, ValueError) as error:  # no such file, nothing to read in it, no host:port
            results[part] = {"address": address, "ok": False, "error": "%s: %s" % (address or source, error)}
        results[part].setdefault("error", api_error)

    try:
        command = ["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", apiserver_certificate]
        printed = host_command.run(command)
        results["sans"] = {**sans_of(printed), "error": ""}
    except RuntimeError as error:
        results["sans"] = {"dns": [], "ips": [], "error": str(error)}
    return results
