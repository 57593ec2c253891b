"""Kubernetes installed with kubeadm: the site's settings, checked, and the kubeadm configuration
rendered from them.

Cluster mode ``kubeadm`` installs a pinned Kubernetes on the inventory's hosts: the first host of
``kube_control_plane`` runs ``kubeadm init``, the other control-plane hosts and the workers
(``gpu_nodes`` and the optional ``kube_workers``) run ``kubeadm join``. Everything kubeadm is told
comes from here, as data (plain dicts), so it is unit-tested directly and checked by a real
``kubeadm config validate`` (tests/e2e/test_kubeadm_config.py).

Pure: no Ansible, no Kubernetes client. The
versions it installs by default are the pins (``versions``).
``check_settings`` returns errors as ``(field, expected, found value)`` for inventory_schema to report
with the rest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import api_endpoint, scheduler_profile

KUBEADM_API = "kubeadm.k8s.io/v1beta4"
KUBELET_API = "kubelet.config.k8s.io/v1beta1"
KUBE_PROXY_API = "kubeproxy.config.k8s.io/v1alpha1"
# containerd's CRI socket: the runtime the nvidia_container_toolkit role registers the nvidia runtime with.
CRI_SOCKET = "unix:///run/containerd/containerd.sock"
API_SERVER_PORT = 6443
# kube-scheduler's configuration (GPUs bin-packed, install.scheduler_profile) on every control-plane
# host, mounted into kubeadm's static pod; the kubeconfig is the one kubeadm writes for the scheduler.
SCHEDULER_CONFIG_PATH = "/etc/kubernetes/clusterproof-scheduler.yaml"
SCHEDULER_KUBECONFIG = "/etc/kubernetes/scheduler.conf"
# Upstream's packages are versioned <Kubernetes version>-<revision>; a mirror keeps upstream's versions.
PACKAGE_REVISION = versions.KUBERNETES.package_revision
CNIS = ("flannel", "none")
# Each CNI's pin: its version, and where its manifest comes from (the Go module that carries it, and
# the file in it).
CNI_PINS = {"flannel": versions.FLANNEL}
CNI_MANIFESTS = {name: (pin.source, pin.path) for name, pin in CNI_PINS.items()}
# The taint GPU nodes get with clusterproof_gpu_node_taint: pods that ask for no GPU stay off them
# (the GPU operator's and NVIDIA's device plugin's pods tolerate it).
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
# The label every GPU node gets at registration, before GPU feature discovery runs.
GPU_LABEL = ("nvidia.com/gpu.present", "true")

# The site-wide variables of mode kubeadm, for inventory_schema's list of known variables.
SITE_VARIABLES = {
    "clusterproof_kubernetes_version": (
        "Kubernetes version kubeadm installs, v1.<minor>.<patch> (mode kubeadm); with clusterproof_mirror, "
        "the pinned release or the previous minor, which the bundle carries"
    ),
    "clusterproof_kubernetes_package_repo": "apt source of kubeadm/kubelet/kubectl; empty: the upstream one",
    "clusterproof_kubernetes_package_key": "URL of that source's signing key; empty: the upstream one",
    "clusterproof_pod_subnet": "the pods' network (CIDR), handed to the CNI (mode kubeadm)",
    "clusterproof_service_subnet": "the services' network (CIDR), not overlapping the pods' (mode kubeadm)",
    "clusterproof_control_plane_endpoint": "host[:port] of the API server; empty: the first control-plane host",
    "clusterproof_control_plane_vip": (
        "an IPv4 address keepalived and haproxy on the control planes serve the API on (port %d); empty: the site "
        "brings its own endpoint (docs/ha.md)" % api_endpoint.ENDPOINT_PORT
    ),
    "clusterproof_cni": "the pod network: %s (mode kubeadm)" % " | ".join(CNIS),
    "clusterproof_cni_version": "the CNI's pinned version (mode kubeadm)",
    "clusterproof_gpu_node_taint": "taint GPU nodes nvidia.com/gpu=present:NoSchedule (mode kubeadm)",
    "clusterproof_mirror": "the site's mirror: {packages: apt URL, registry: host:port, insecure: bool, charts: URL}",
    "clusterproof_kubelet_config": "fields merged into kubeadm's KubeletConfiguration (mode kubeadm)",
    "clusterproof_kube_proxy_config": "fields of kubeadm's KubeProxyConfiguration (mode kubeadm)",
    "clusterproof_kubeadm_ignore_preflight_errors": "kubeadm preflight checks init and join ignore (mode kubeadm)",
}
# Kubelet fields the install depends on: the cgroup driver containerd's runc is configured with.
KUBELET_FIXED_FIELDS = ("cgroupDriver",)
# The keys of clusterproof_mirror.
MIRROR_FIELDS = ("packages", "registry", "insecure", "charts")
# Where kubernetes.core.helm finds helm on the first control-plane host of a site whose mirror serves
# the charts: the mirror's helm package (the bundle's) installs it there.
MIRROR_HELM_BINARY = "/usr/bin/helm"

# The pause image kubeadm asks for, per Kubernetes minor (`kubeadm config images list`): containerd's
# sandbox image on a site with a mirror, which holds this one and not containerd's default (pause 3.6).
# Known for the minors the bundle carries: the pinned one and the previous one.
PAUSE_IMAGES = {
    versions.KUBERNETES.minor: versions.PAUSE.image,
    versions.KUBERNETES_PREVIOUS.minor: versions.PAUSE_PREVIOUS.image,
}
# The Kubernetes releases the bundle carries (packages and images): the pinned one, so a site installs
# it, and the previous minor, so a site installed at it is upgraded to the pinned one offline (kubeadm
# upgrades one minor at a time). A site with a mirror declares one of them.
MIRROR_VERSIONS = (versions.KUBERNETES.version, versions.KUBERNETES_PREVIOUS.version)

_VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")
_CNI_VERSION = re.compile(r"^v\d+\.\d+\.\d+$")
_URL = re.compile(r"^(https?|file)://\S+$")
_HOST = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?)(:(\d{1,5}))?$")
_MIRROR_URL = re.compile(r"^https?://\S+/$")
_JOIN_TOKEN = re.compile(r"--token\s+([a-z0-9]{6}\.[a-z0-9]{16})")
_JOIN_HASH = re.compile(r"--discovery-token-ca-cert-hash\s+(sha256:[0-9a-f]{64})")
_JOIN_ENDPOINT = re.compile(r"kubeadm\s+join\s+(\S+)")
_CERTIFICATE_KEY = re.compile(r"^([0-9a-f]{64})$", re.MULTILINE)


def chart_file(name: str, version: str) -> str:
    """The file ``helm package`` makes of chart ``name`` at ``version``: its name on a chart mirror
    (the bundle's ``charts/`` folder, packaged so)."""
    return "%s-%s.tgz" % (name, version.lstrip("v"))


@dataclasses.dataclass(frozen=True)
class KubernetesSettings:
    """What mode kubeadm installs, as the inventory declares it (defaults filled in)."""

    version: str = versions.KUBERNETES.version
    package_repo: str = ""
    package_key: str = ""
    pod_subnet: str = "10.244.0.0/16"
    service_subnet: str = "10.96.0.0/12"
    control_plane_endpoint: str = ""
    # The virtual IP clusterproof's own endpoint holds (install/api_endpoint.py); empty: none installed.
    control_plane_vip: str = ""
    cni: str = "flannel"
    cni_version: str = CNI_PINS["flannel"].version
    gpu_node_taint: bool = False
    control_plane_hosts: tuple[str, ...] = ()
    worker_hosts: tuple[str, ...] = ()
    # kubeadm, kubelet and kubectl as apt versions them (filled in by check_settings).
    package_version: str = ""
    # The site's mirror (the offline bundle, or the site's own): its flat apt repository, its registry
    # (host:port) and whether that speaks plain HTTP. Empty: upstream's sources.
    mirror_packages: str = ""
    mirror_registry: str = ""
    mirror_insecure: bool = False
    # The URL of the mirror's packaged Helm charts (<name>-<version>.tgz); empty: the charts come from
    # the Go modules on the host the stages run on (module_utils/install/chart_source.py).
    mirror_charts: str = ""
    # What a site (or a test bed) adds to kubeadm's defaults: kubelet and kube-proxy fields, and the
    # preflight checks kubeadm init and join ignore (the lab: cgroup v1, conntrack; docs/lab.md).
    kubelet_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    kube_proxy_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    ignore_preflight_errors: tuple[str, ...] = ()

    @property
    def sandbox_image(self) -> str:
        """The pause image kubeadm asks for (empty for a minor this table does not know)."""
        return PAUSE_IMAGES.get(self.minor, "")

    @property
    def minor(self) -> str:
        """v1.<minor>.<patch> -> v1.<minor>: upstream's package repositories are one per minor version."""
        return self.version.rsplit(".", 1)[0]

    @property
    def package_source(self) -> str:
        # Upstream's community-owned repository; an air-gapped site sets its mirror instead, or names
        # a mirror that holds the packages (the bundle's repository does).
        return self.package_repo or self.mirror_packages or "https://pkgs.k8s.io/core:/stable:/%s/deb/" % self.minor

    @property
    def chart_refs(self) -> dict[str, str]:
        """Each engine's and provisioner's chart as kubernetes.core.helm's chart_ref: its URL on the
        mirror (empty without mirror charts)."""
        if not self.mirror_charts:
            return {}
        pinned = {
            "kai-scheduler": versions.KAI_SCHEDULER,
            "kueue": versions.KUEUE,
            "local-path-provisioner": versions.LOCAL_PATH_PROVISIONER,
        }
        return {name: self.mirror_charts + chart_file(name, pin.version) for name, pin in pinned.items()}

    @property
    def storage_chart_refs(self) -> dict[str, str]:
        """The mirror's provisioner charts by provisioner, as the storage_classes role names them."""
        refs = self.chart_refs
        return {"local-path": refs["local-path-provisioner"]} if refs else {}

    @property
    def helm_binary(self) -> str:
        return MIRROR_HELM_BINARY if self.mirror_charts else ""

    @property
    def package_source_key(self) -> str:
        if self.package_key:
            return self.package_key
        if not self.package_repo and self.mirror_packages:
            return self.mirror_packages + "key.asc"
        return self.package_source.rstrip("/") + "/Release.key"


Error = tuple[str, str, Any]


def _network(field: str, value: Any, errors: list[Error]) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return ipaddress.ip_network(value, strict=True)
    except ValueError:
        errors.append((field, "a network in CIDR notation with no host bits set, such as 10.244.0.0/16", value))
        return None


def check_settings(
    site: Mapping[str, Any], groups: Mapping[str, Sequence[str]]
) -> tuple[KubernetesSettings, list[Error]]:
    """Read and check mode kubeadm's site variables; ``site`` is the first control-plane host's variables."""
    defaults = KubernetesSettings()
    errors: list[Error] = []
    values = {
        "version": site.get("clusterproof_kubernetes_version", defaults.version),
        "package_repo": site.get("clusterproof_kubernetes_package_repo", defaults.package_repo),
        "package_key": site.get("clusterproof_kubernetes_package_key", defaults.package_key),
        "pod_subnet": site.get("clusterproof_pod_subnet", defaults.pod_subnet),
        "service_subnet": site.get("clusterproof_service_subnet", defaults.service_subnet),
        "control_plane_endpoint": site.get("clusterproof_control_plane_endpoint", defaults.control_plane_endpoint),
        "control_plane_vip": site.get("clusterproof_control_plane_vip", defaults.control_plane_vip),
        "cni": site.get("clusterproof_cni", defaults.cni),
        "cni_version": site.get("clusterproof_cni_version", defaults.cni_version),
        "gpu_node_taint": site.get("clusterproof_gpu_node_taint", defaults.gpu_node_taint),
    }
    if values["control_plane_vip"] is None:
        values["control_plane_vip"] = defaults.control_plane_vip  # left empty in YAML: no VIP
    if not isinstance(values["version"], str) or not _VERSION.match(values["version"]):
        errors.append(
            (
                "clusterproof_kubernetes_version",
                "a version v1.<minor>.<patch>, such as %s" % defaults.version,
                values["version"],
            )
        )
    for key, field in (
        ("package_repo", "clusterproof_kubernetes_package_repo"),
        ("package_key", "clusterproof_kubernetes_package_key"),
    ):
        if not isinstance(values[key], str) or (values[key] and not _URL.match(values[key])):
            errors.append((field, "an http(s):// or file:// URL, or empty for the upstream one", values[key]))
    pods = _network("clusterproof_pod_subnet", values["pod_subnet"], errors)
    services = _network("clusterproof_service_subnet", values["service_subnet"], errors)
    if pods is not None and services is not None:
        if pods.version != services.version:
            errors.append(
                (
                    "clusterproof_service_subnet",
                    "a network of the same IP version as clusterproof_pod_subnet (%s)" % pods,
                    values["service_subnet"],
                )
            )
        elif pods.overlaps(services):
            errors.append(
                (
                    "clusterproof_pod_subnet",
                    "a network that does not overlap clusterproof_service_subnet (%s)" % services,
                    values["pod_subnet"],
                )
            )
    endpoint = values["control_plane_endpoint"]
    if not isinstance(endpoint, str) or (endpoint and not _valid_endpoint(endpoint)):
        errors.append(("clusterproof_control_plane_endpoint", "host or host:port (port 1-65535), or empty", endpoint))
    elif _check_vip(values["control_plane_vip"], errors):
        endpoint = values["control_plane_endpoint"] = _vip_endpoint(values["control_plane_vip"], endpoint, errors)
    if values["cni"] not in CNIS:
        errors.append(("clusterproof_cni", "one of %s" % ", ".join(CNIS), values["cni"]))
    if not isinstance(values["cni_version"], str) or not _CNI_VERSION.match(values["cni_version"]):
        errors.append(
            (
                "clusterproof_cni_version",
                "a version v<major>.<minor>.<patch>, such as %s" % defaults.cni_version,
                values["cni_version"],
            )
        )
    if not isinstance(values["gpu_node_taint"], bool):
        errors.append(("clusterproof_gpu_node_taint", "true or false", values["gpu_node_taint"]))
    values.update(_check_mirror(site.get("clusterproof_mirror", {}), errors))
    if (
        (values.get("mirror_packages") or values.get("mirror_registry"))
        and isinstance(values["version"], str)
        and _VERSION.match(values["version"])
        and values["version"] not in MIRROR_VERSIONS
    ):
        # The mirror (the bundle) holds the packages and images of these releases only: another
        # would fail halfway, at apt or at kubeadm's image pull.
        errors.append(
            (
                "clusterproof_kubernetes_version",
                "on a site with clusterproof_mirror, a release the bundle carries: %s (pinned) or %s (the "
                "previous minor, to upgrade from)" % MIRROR_VERSIONS,
                values["version"],
            )
        )
    values.update(_check_component_configs(site, errors))
    control_plane = tuple(groups.get("kube_control_plane", ()))
    # kubeadm joins more control-plane nodes only behind one address all of them answer on: the site's
    # own, or the VIP clusterproof installs (a VIP that is not an address has its own error).
    if len(control_plane) > 1 and not endpoint and values["control_plane_vip"] == "":
        errors.append(
            (
                "clusterproof_control_plane_endpoint",
                "the load-balanced host[:port] of the API server, or clusterproof_control_plane_vip, as group "
                "kube_control_plane has %d hosts" % len(control_plane),
                endpoint,
            )
        )
    workers = [
        host for group in ("gpu_nodes", "kube_workers") for host in groups.get(group, ()) if host not in control_plane
    ]
    settings = KubernetesSettings(
        **values, control_plane_hosts=control_plane, worker_hosts=tuple(dict.fromkeys(workers))
    )
    if errors:
        return settings, errors
    # The declaration names the source and the package version the hosts get.
    return dataclasses.replace(
        settings,
        package_repo=settings.package_source,
        package_key=settings.package_source_key,
        package_version="%s-%s" % (settings.version[1:], PACKAGE_REVISION),
    ), errors


def _check_vip(vip: Any, errors: list[Error]) -> bool:
    """Whether clusterproof_control_plane_vip declares a VIP (an error where it is not an IPv4 unicast
    address; false where it is empty)."""
    if vip == "":
        return False
    try:
        if not isinstance(vip, str):
            raise ValueError(vip)
        address = ipaddress.IPv4Address(vip)
        if address.is_loopback or address.is_multicast or address.is_unspecified or address.is_reserved:
            raise ValueError(vip)
    except ValueError:
        errors.append(
            (
                "clusterproof_control_plane_vip",
                "an IPv4 unicast address on the control planes' network, such as 192.0.2.10, or empty",
                vip,
            )
        )
        return False
    return True


def _vip_endpoint(vip: str, endpoint: str, errors: list[Error]) -> str:
    """The endpoint a site with a VIP joins through: the VIP on haproxy's port, or the declared one (a
    name, such as one the site's DNS gives the VIP, or the VIP itself), on haproxy's port."""
    if not endpoint:
        return "%s:%d" % (vip, api_endpoint.ENDPOINT_PORT)
    match = _HOST.match(endpoint)
    host, port = match.group(1).strip("[]"), match.group(4)
    expected = "%s:%d, or a name of it on port %d (haproxy's port on clusterproof_control_plane_vip), or empty" % (
        vip,
        api_endpoint.ENDPOINT_PORT,
        api_endpoint.ENDPOINT_PORT,
    )
    try:
        ipaddress.ip_address(host)
        is_address = True
    except ValueError:
        is_address = False
    # Another address would bypass the VIP; another port would reach one API server, not haproxy.
    if (is_address and host != vip) or (port is not None and int(port) != api_endpoint.ENDPOINT_PORT):
        errors.append(("clusterproof_control_plane_endpoint", expected, endpoint))
        return endpoint
    return "%s:%d" % (host, api_endpoint.ENDPOINT_PORT)


def _check_mirror(mirror: Any, errors: list[Error]) -> dict[str, Any]:
    """clusterproof_mirror's fields as KubernetesSettings names them (checked; empty where unset)."""
    field = "clusterproof_mirror"
    if mirror is None or mirror == {}:
        return {}
    if not isinstance(mirror, Mapping):
        errors.append((field, "a mapping with %s" % ", ".join(MIRROR_FIELDS), mirror))
        return {}
    unknown = sorted(set(mirror) - set(MIRROR_FIELDS))
    if unknown:
        errors.append((field, "only the fields %s" % ", ".join(MIRROR_FIELDS), ", ".join(map(str, unknown))))
    packages = mirror.get("packages", "")
    if not isinstance(packages, str) or (packages and not _MIRROR_URL.match(packages)):
        errors.append((field + ".packages", "the http(s):// URL of a flat apt repository, ending in /", packages))
    registry = mirror.get("registry", "")
    match = _HOST.match(registry) if isinstance(registry, str) else None
    if not isinstance(registry, str) or (registry and not (match and match.group(4) and _valid_endpoint(registry))):
        errors.append((field + ".registry", "the registry as host:port, such as 10.213.0.1:5000", registry))
    insecure = mirror.get("insecure", False)
    if not isinstance(insecure, bool):
        errors.append((field + ".insecure", "true or false", insecure))
    charts = mirror.get("charts", "")
    if not isinstance(charts, str) or (charts and not _MIRROR_URL.match(charts)):
        errors.append((field + ".charts", "the http(s):// URL of the packaged Helm charts, ending in /", charts))
    if not packages and not registry:
        errors.append((field, "packages, registry or both", "neither"))
    return {
        "mirror_packages": packages,
        "mirror_registry": registry,
        "mirror_insecure": insecure,
        "mirror_charts": charts,
    }


def _check_component_configs(site: Mapping[str, Any], errors: list[Error]) -> dict[str, Any]:
    """The kubelet and kube-proxy fields and the ignored preflight checks (checked; kubeadm config
    validate checks the fields' names and values against the real types)."""
    values: dict[str, Any] = {}
    for key, field in (
        ("kubelet_config", "clusterproof_kubelet_config"),
        ("kube_proxy_config", "clusterproof_kube_proxy_config"),
    ):
        config = site.get(field, {})
        if config is None:
            config = {}
        if not isinstance(config, Mapping) or not all(isinstance(name, str) for name in config):
            errors.append((field, "a mapping of the component's fields (camelCase names) to values", config))
            continue
        if key == "kubelet_config":
            fixed = sorted(set(config) & set(KUBELET_FIXED_FIELDS))
            if fixed:
                errors.append(
                    (
                        field,
                        "no %s: clusterproof sets it to match containerd's runc" % ", ".join(fixed),
                        ", ".join(fixed),
                    )
                )
        values[key] = _plain_data(config)
    checks = site.get("clusterproof_kubeadm_ignore_preflight_errors", [])
    if not isinstance(checks, list) or not all(isinstance(check, str) and check for check in checks):
        errors.append(
            (
                "clusterproof_kubeadm_ignore_preflight_errors",
                "a list of kubeadm preflight check names, such as [SystemVerification]",
                checks,
            )
        )
    else:
        values["ignore_preflight_errors"] = tuple(str(check) for check in checks)
    return values


def _plain_data(value: Any) -> Any:
    """``value`` as plain dicts, lists and scalars: the caller's may be subclasses (Ansible tags what it
    reads) that dataclasses.asdict cannot rebuild."""
    if isinstance(value, Mapping):
        return {str(key): _plain_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_data(item) for item in value]
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value


def check_host_addresses(settings: KubernetesSettings, addresses: Mapping[str, Any]) -> list[tuple[str, str, str, Any]]:
    """The kubeadm hosts' addresses (``ansible_host``, or the inventory name) against each other and
    the control-plane endpoint, as ``(where, field, expected, found)``: two hosts at one address would
    be one machine joined twice; the VIP at a host's address would take that host's address away
    from it; with one control plane, an endpoint given as an IP address must be that host's or the VIP
    (a load balancer in front of a single control plane goes by a name)."""
    problems: list[tuple[str, str, str, Any]] = []
    hosts = list(dict.fromkeys(settings.control_plane_hosts + settings.worker_hosts))
    first_at: dict[str, str] = {}
    for host in hosts:
        address = addresses.get(host, host)
        if not isinstance(address, str):
            continue
        if address in first_at:
            expected = "an address no other host of the site has (host %s has it)" % first_at[address]
            problems.append(("host %s" % host, "ansible_host", expected, address))
        else:
            first_at[address] = host
    vip = settings.control_plane_vip
    if isinstance(vip, str) and vip in first_at:
        expected = "an address no host of the site has (host %s has it)" % first_at[vip]
        problems.append(("group all", "clusterproof_control_plane_vip", expected, vip))
    endpoint = settings.control_plane_endpoint
    # An endpoint that is no string has its own error from check_settings.
    if isinstance(endpoint, str) and endpoint and len(settings.control_plane_hosts) == 1:
        match = _HOST.match(endpoint)
        endpoint_host = match.group(1).strip("[]") if match else ""
        try:
            ipaddress.ip_address(endpoint_host)
        except ValueError:
            return problems  # a name: a load balancer's, or the host's; DNS is the site's to check
        (control_plane,) = settings.control_plane_hosts
        held = addresses.get(control_plane, control_plane)
        if endpoint_host not in (held, vip):
            expected = "the address of a host in kube_control_plane (%s: %s), or a load balancer's name" % (
                control_plane,
                held,
            )
            problems.append(("group all", "clusterproof_control_plane_endpoint", expected, endpoint))
    return problems


def _valid_endpoint(endpoint: str) -> bool:
    match = _HOST.match(endpoint)
    return bool(match) and (match.group(4) is None or 0 < int(match.group(4)) < 65536)


def settings_of(site: Mapping[str, Any]) -> KubernetesSettings:
    """The settings from the checked declaration (site_inventory's ``clusterproof_site``)."""
    data = dict(site["kubernetes"])
    data.pop("sandbox_image", None)  # a property, written beside the fields for the playbooks
    data["control_plane_hosts"] = tuple(data.get("control_plane_hosts", ()))
    data["worker_hosts"] = tuple(data.get("worker_hosts", ()))
    data["ignore_preflight_errors"] = tuple(data.get("ignore_preflight_errors", ()))
    return KubernetesSettings(**data)


def host_groups(site: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The groups playbooks/kubernetes.yml runs its plays on, per host: every host in
    ``clusterproof_kubeadm``, the first control plane in ``..._init``, the other control planes in
    ``..._control_plane_join``, the workers in ``..._worker_join``. None outside mode kubeadm."""
    if site.get("cluster_mode") != "kubeadm":
        return []
    settings = settings_of(site)
    first, *others = settings.control_plane_hosts
    entries = [{"host": first, "groups": ["clusterproof_kubeadm", "clusterproof_kubeadm_init"]}]
    entries += [
        {"host": host, "groups": ["clusterproof_kubeadm", "clusterproof_kubeadm_control_plane_join"]} for host in others
    ]
    entries += [
        {"host": host, "groups": ["clusterproof_kubeadm", "clusterproof_kubeadm_worker_join"]}
        for host in settings.worker_hosts
    ]
    return entries


def endpoint_of(settings: KubernetesSettings, first_control_plane_address: str) -> str:
    """The API server's host:port that nodes join through."""
    endpoint = settings.control_plane_endpoint or first_control_plane_address
    match = _HOST.match(endpoint)
    return endpoint if match and match.group(4) else "%s:%d" % (endpoint, API_SERVER_PORT)


def _node_of(site: Mapping[str, Any], host: str) -> Mapping[str, Any] | None:
    return next((node for node in site.get("nodes", []) if node["host"] == host), None)


def node_registration(site: Mapping[str, Any], host: str, settings: KubernetesSettings) -> dict[str, Any]:
    """nodeRegistration for ``host``: its node name, containerd, and for a GPU node its labels and taints."""
    node = _node_of(site, host)
    registration: dict[str, Any] = {"name": node["name"] if node else host, "criSocket": CRI_SOCKET}
    if settings.ignore_preflight_errors:
        registration["ignorePreflightErrors"] = list(settings.ignore_preflight_errors)
    if node is None:
        return registration
    taints = [dict(taint) for taint in node.get("taints", [])]
    if settings.gpu_node_taint and node.get("gpu_count", 0) > 0 and all(t["key"] != GPU_TAINT["key"] for t in taints):
        taints.append(dict(GPU_TAINT))
    # An empty list, not an absent field: kubeadm would otherwise add no taint to a worker either, but an
    # explicit list says the inventory was read.
    registration["taints"] = taints
    labels = _node_labels(node)
    if labels:
        value = ",".join("%s=%s" % item for item in sorted(labels.items()))
        registration["kubeletExtraArgs"] = [{"name": "node-labels", "value": value}]
    return registration


def node_patch(site: Mapping[str, Any], host: str, existing_taints: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The labels and taints a joined GPU node is patched to, so a node joined before the inventory
    changed gets what its registration would give now. Taints are replaced as a whole list by the API,
    so the node's other taints (Kubernetes' own, a cordon, the control plane's) are kept; a declared
    taint replaces one of the same key."""
    settings = settings_of(site)
    registration = node_registration(site, host, settings)
    declared = registration.get("taints", [])
    declared_keys = {taint["key"] for taint in declared}
    kept = [dict(taint) for taint in existing_taints if taint.get("key") not in declared_keys]
    node = _node_of(site, host)
    labels = _node_labels(node) if node else {}
    return {"metadata": {"labels": labels}, "spec": {"taints": kept + declared}}


def _node_labels(node: Mapping[str, Any]) -> dict[str, str]:
    labels = dict(node.get("labels", {}))
    if node.get("gpu_count", 0) > 0:
        labels.setdefault(*GPU_LABEL)
    return labels


def init_documents(site: Mapping[str, Any], host: str, advertise_address: str) -> list[dict[str, Any]]:
    """kubeadm init's configuration for the first control-plane host: InitConfiguration,
    ClusterConfiguration and KubeletConfiguration (systemd cgroups, as containerd's runc is set)."""
    settings = settings_of(site)
    init = {
        "apiVersion": KUBEADM_API,
        "kind": "InitConfiguration",
        "localAPIEndpoint": {"advertiseAddress": advertise_address, "bindPort": API_SERVER_PORT},
        "nodeRegistration": node_registration(site, host, settings),
    }
    cluster = {
        "apiVersion": KUBEADM_API,
        "kind": "ClusterConfiguration",
        "clusterName": site["site_name"],
        "kubernetesVersion": settings.version,
        "controlPlaneEndpoint": endpoint_of(settings, advertise_address),
        "networking": {"podSubnet": settings.pod_subnet, "serviceSubnet": settings.service_subnet},
        "scheduler": {
            "extraArgs": [
                {"name": "config", "value": SCHEDULER_CONFIG_PATH},
                # On every address, not kubeadm's loopback: the monitoring stage's Prometheus, a pod, scrapes
                # its /metrics/resources (every pod's requests). Metrics ask for a token the API server
                # authorizes; only the health endpoints answer anyone, as on loopback (Kubespray does the same).
                {"name": "bind-address", "value": "0.0.0.0"},
            ],
            # The file's digest in the static pod: a new file writes a new pod, which the kubelet restarts.
            "extraEnvs": [{"name": "CLUSTERPROOF_SCHEDULER_CONFIG_SHA256", "value": scheduler_config_digest()}],
            "extraVolumes": [
                {
                    "name": "clusterproof-scheduler-config",
                    "hostPath": SCHEDULER_CONFIG_PATH,
                    "mountPath": SCHEDULER_CONFIG_PATH,
                    "readOnly": True,
                    "pathType": "File",
                }
            ],
        },
    }
    if settings.control_plane_vip:
        # kubeadm names the endpoint's host in the API server's certificate; the VIP is named too, so a
        # client that goes by the VIP where the endpoint is a name of it is served a certificate it trusts.
        cluster["apiServer"] = {"certSANs": [settings.control_plane_vip]}
    documents = [init, cluster, kubelet_document(settings)]
    if settings.kube_proxy_config:
        documents.append({"apiVersion": KUBE_PROXY_API, "kind": "KubeProxyConfiguration", **settings.kube_proxy_config})
    return documents


def scheduler_config_text() -> str:
    """The file at SCHEDULER_CONFIG_PATH on every control-plane host (JSON, which kube-scheduler reads as YAML)."""
    config = scheduler_profile.configuration(SCHEDULER_KUBECONFIG, leader_elect=True)
    return json.dumps(config, indent=2) + "\n"


def scheduler_config_digest() -> str:
    return hashlib.sha256(scheduler_config_text().encode()).hexdigest()


def kubelet_document(settings: KubernetesSettings) -> dict[str, Any]:
    """The cluster's KubeletConfiguration (kubeadm stores it in the cluster; joining nodes take it from there)."""
    # systemd: the cgroup driver containerd's runc (and the nvidia runtime beside it) is configured with;
    # a kubelet on cgroupfs beside it makes two cgroup managers fight over the node.
    return {
        "apiVersion": KUBELET_API,
        "kind": "KubeletConfiguration",
        **settings.kubelet_config,
        "cgroupDriver": "systemd",
    }


def join_documents(
    site: Mapping[str, Any],
    host: str,
    join: Mapping[str, str],
    advertise_address: str = "",
    certificate_key: str = "",
) -> list[dict[str, Any]]:
    """kubeadm join's configuration for ``host``; ``join`` is what parse_join_command read off the
    first control-plane host. A control-plane host also gets its API endpoint and the key of the
    uploaded certificates."""
    settings = settings_of(site)
    document: dict[str, Any] = {
        "apiVersion": KUBEADM_API,
        "kind": "JoinConfiguration",
        "discovery": {
            "bootstrapToken": {
                "apiServerEndpoint": join["endpoint"],
                "token": join["token"],
                "caCertHashes": [join["ca_cert_hash"]],
            }
        },
        "nodeRegistration": node_registration(site, host, settings),
    }
    if host in settings.control_plane_hosts:
        document["controlPlane"] = {
            "localAPIEndpoint": {"advertiseAddress": advertise_address, "bindPort": API_SERVER_PORT},
            "certificateKey": certificate_key,
        }
    return [document]


def parse_join_command(text: str) -> dict[str, str]:
    """Read the endpoint, token and CA hash off ``kubeadm token create --print-join-command``."""
    found = {
        "endpoint": _JOIN_ENDPOINT.search(text),
        "token": _JOIN_TOKEN.search(text),
        "ca_cert_hash": _JOIN_HASH.search(text),
    }
    missing = [name for name, match in found.items() if match is None]
    if missing:
        raise ValueError("kubeadm's join command lacks %s: %r" % (", ".join(missing), text.strip()))
    return {name: match.group(1) for name, match in found.items()}


def parse_certificate_key(text: str) -> str:
    """The key ``kubeadm init phase upload-certs --upload-certs`` prints on its last line."""
    keys = _CERTIFICATE_KEY.findall(text)
    if not keys:
        raise ValueError("kubeadm printed no certificate key: %r" % text.strip())
    return keys[-1]


def to_yaml(documents: Sequence[Mapping[str, Any]]) -> str:
    """The documents as one multi-document YAML file, as kubeadm --config reads it."""
    # Imported here: the inventory checks import this file where only the controller has PyYAML.
    import yaml

    return "---\n".join(
        yaml.safe_dump(dict(document), sort_keys=False, default_flow_style=False) for document in documents
    )
