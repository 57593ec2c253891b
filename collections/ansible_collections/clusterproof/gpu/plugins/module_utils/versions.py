"""Every pinned component, its version and where it comes from, in one place.

As Kubespray's download defaults are for Kubespray: a version is written here once, and whatever
needs it reads it from here. The sandbox build (``sandbox.build``, ``modules/sandbox_binaries.py``),
the offline bundle (``bundle.contents``, ``bundle.build``), kubeadm's configuration
(``install.kubeadm_config``), the CNI manifest (``install.kubernetes_cni``), the charts
(``install.storage``, ``install.gpu_charts``, ``install.gpu_device_layer``), the lab's Debian root
(``lab.machines``), the default workload and probe images, and the roles' defaults, which ask the
lookup plugin: ``lookup('clusterproof.gpu.versions', 'kai_scheduler')`` (a pin's version) or
``lookup('clusterproof.gpu.versions', 'kubernetes.minor')`` (one of its ``ATTRIBUTES``).
tests/unit/test_versions.py fails when one of these versions is written anywhere else under
collections/, roles/ or playbooks/ (READMEs and docs/ aside).

Moving a pin: change it here. The sandbox rebuilds just the binaries whose component moved (each
binary's stamp is its component's version; the cache key is the Go toolchain and the recipe), the
bundle rebuilds what the version goes into, and a site's next run installs it. Where a comment
below says what else was learnt from a version, check that too.

Pure. May import: the standard library alone; it imports nothing of the collection, so that every package, the
lowest layers included, may import it. Touches nothing.
"""

from __future__ import annotations

import dataclasses
import re

# Where a pinned component comes from.
GO_MODULE = "Go module"  # built (or read) from its module at the version, through the Go module proxy
CHART = "chart in a Go module"  # a Helm chart taken out of its project's Go module at the version
IMAGE = "container image"  # an image reference, repository and tag
DEBIAN = "Debian"  # a Debian suite, from Debian's archive
KINDS = (GO_MODULE, CHART, IMAGE, DEBIAN)

_RELEASE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")


@dataclasses.dataclass(frozen=True)
class Pin:
    """One pinned component: its name (the lookup's), its version, and where it comes from: the
    ``kind`` of source, the ``source`` itself (a Go module path, an image repository, Debian's
    archive) and, where it matters, the ``path`` in it (a chart's folder, a command's package, a
    manifest file). ``package_revision``: the revision of the .deb packages made of it (Debian's
    <upstream version>-<revision>), where there are any."""

    name: str
    version: str
    kind: str
    source: str
    path: str = ""
    package_revision: str = ""

    @property
    def bare(self) -> str:
        """The version without its leading v (v1.36.3 -> 1.36.3), as package and chart versions write it."""
        return self.version.removeprefix("v")

    @property
    def minor(self) -> str:
        """The release line of a vX.Y.Z version (vX.Y); empty for any other version."""
        match = _RELEASE.match(self.version)
        return "v%s.%s" % match.group(1, 2) if match else ""

    @property
    def pin(self) -> str:
        """<module>@<version>, as Go names a module version."""
        return "%s@%s" % (self.source, self.version)

    @property
    def image(self) -> str:
        """<repository>:<tag> of an image pin; empty for the other kinds."""
        return "%s:%s" % (self.source, self.version) if self.kind == IMAGE else ""

    @property
    def package_version(self) -> str:
        """<version without v>-<revision> of the packages made of it; empty where there are none."""
        return "%s-%s" % (self.bare, self.package_revision) if self.package_revision else ""


# --- Kubernetes -----------------------------------------------------------------------------------

# The control plane the sandbox runs and mode kubeadm installs: built from k8s.io/kubernetes (its
# staging modules are published as v0.<minor>.<patch>, which sandbox.build derives). Its packages
# take upstream's name and version, kubeadm <version>-1.1 (upstream's revision), from upstream's
# repository for the minor or from the bundle.
KUBERNETES = Pin("kubernetes", "v1.36.3", GO_MODULE, "k8s.io/kubernetes", package_revision="1.1")
# The etcd the pinned kubeadm asks for (its image is tagged <version>-0): bundle.build checks the two
# agree. Its clients, etcdctl and etcdutl (their own modules, go.etcd.io/etcd/etcdctl/v3 and
# go.etcd.io/etcd/etcdutl/v3, released with the server at the same version), are the bundle's package
# etcd-client <version>-1, which the control planes install for the etcd backup and restore.
ETCD = Pin("etcd", "v3.6.8", GO_MODULE, "go.etcd.io/etcd/server/v3", package_revision="1")
# The pause image the pinned kubeadm asks for (kubeadm config images list): containerd's sandbox image
# on a site with a mirror, which holds this one and not containerd's default. The bundle builds it
# from build/pause/linux/pause.c of KUBERNETES's module.
PAUSE = Pin("pause", "3.10.2", IMAGE, "registry.k8s.io/pause")
# The previous minor's release, which the bundle carries beside KUBERNETES (packages and images) so
# that a site can be installed at N-1 and upgraded to N offline: kubeadm upgrades one minor at a
# time. The newest v1.35.x the module proxy serves (the others are not listed). The sandbox runs
# KUBERNETES only; sandbox.build builds this one's commands into a folder of their own
# (release_plan).
KUBERNETES_PREVIOUS = Pin("kubernetes_previous", "v1.35.4", GO_MODULE, "k8s.io/kubernetes", package_revision="1.1")
# What KUBERNETES_PREVIOUS's kubeadm asks for where it differs from KUBERNETES's (kubeadm config
# images list; cmd/kubeadm/app/constants of the module): etcd (tagged <version>-0), CoreDNS and
# pause, each built as the pinned one is. bundle.build checks the listing agrees.
ETCD_PREVIOUS = Pin("etcd_previous", "v3.6.6", GO_MODULE, "go.etcd.io/etcd/server/v3")
COREDNS_PREVIOUS = Pin("coredns_previous", "v1.13.1", GO_MODULE, "github.com/coredns/coredns")
PAUSE_PREVIOUS = Pin("pause_previous", "3.10.1", IMAGE, "registry.k8s.io/pause")
# KWOK, the sandbox's simulated nodes.
KWOK = Pin("kwok", "v0.8.0", GO_MODULE, "sigs.k8s.io/kwok")
# The chart tool: the sandbox build's, and the bundle's package for the first control-plane host
# (helm <version>-1). The newest v3 release the module proxy serves (checked 4 Dec 2026: `go list -m
# -versions helm.sh/helm/v3` ends at v3.22.0, which downloads).
HELM = Pin("helm", "v3.22.0", GO_MODULE, "helm.sh/helm/v3", package_revision="1")

# --- the scheduler engines --------------------------------------------------------------------------

# KAI scheduler: its components (sandbox), its chart (deployments/kai-scheduler, copied with them), its
# images (ghcr.io/nvidia/kai-scheduler/<component>:<version>, which the bundle builds). The engine's
# backend (scheduler/kai.py) and the fair-share model (model/fairshare.py, model/allocate.py, ...)
# were learnt from this version's source, and say so where it matters: a new version means reading
# them again. The only release the module proxy serves for download (checked 4 Dec 2026: @v0.12.1,
# @v0.13.0 and @latest answer 403, under github.com/NVIDIA/KAI-scheduler and under
# github.com/kai-scheduler/KAI-scheduler alike).
KAI_SCHEDULER = Pin("kai_scheduler", "v0.12.0", GO_MODULE, "github.com/NVIDIA/KAI-scheduler")
# Kueue, the second scheduler backend: the newest release the module proxy serves for download
# (checked on 4 Dec 2026: `go mod download -json sigs.k8s.io/kueue@v0.17.1` gives its zip;
# @v0.17.2, @v0.18.0 and @v0.16.3 answer "403 Forbidden: This module version is not available").
# Its manager (sandbox), chart, CRDs and webhooks, and its released image
# registry.k8s.io/kueue/kueue:<version>. The model's kueue policy (model/fairshare.py,
# model/fair_sharing.py, model/allocate.py) was learnt from v0.16.2's preemption and fair sharing and
# read again against this version's (docs/scheduler.md, "From Kueue v0.16.2 to v0.17.1").
KUEUE = Pin("kueue", "v0.17.1", GO_MODULE, "sigs.k8s.io/kueue")
# Koordinator's scheduler, whose ElasticQuota plugin is the guide's elastic quota tree.
# scheduler/koordinator.py follows this version's plugin. v1.7.1 and v1.6.2 are refused; v1.8.0 now
# downloads (checked 4 Dec 2026; v1.8.1 to v1.8.3 and v1.9.0 answer 403) and is not taken yet: its
# ElasticQuota plugin has to be read against koordinator.py first (issue 47's notes).
KOORDINATOR = Pin("koordinator", "v1.7.0", GO_MODULE, "github.com/koordinator-sh/koordinator")

# --- storage ------------------------------------------------------------------------------------------

# rancher's local-path-provisioner: the sandbox's provisioner, the chart a real cluster's local-path
# classes come from (deploy/chart/local-path-provisioner), and its image
# docker.io/rancher/local-path-provisioner:<version>. The newest release the module proxy serves
# (v0.0.31 and later are not).
LOCAL_PATH_PROVISIONER = Pin(
    "local_path_provisioner", "v0.0.30", GO_MODULE, "github.com/rancher/local-path-provisioner"
)
# The other two provisioners tag versions their module path cannot carry (v4.x, v26.x without a /vN
# suffix), so a release is pinned by its commit's pseudo-version: nfs-subdir-external-provisioner's
# chart 4.0.18, and Trident's v26.06.0 operator chart. Where the module proxy does not serve them, the
# storage_classes role takes a chart reference instead (storage_classes_charts).
NFS_SUBDIR_EXTERNAL_PROVISIONER = Pin(
    "nfs_subdir_external_provisioner",
    "v0.0.0-20240216040740-59a3ca2cd10f",
    CHART,
    "github.com/kubernetes-sigs/nfs-subdir-external-provisioner",
    "charts/nfs-subdir-external-provisioner",
)
TRIDENT = Pin(
    "trident", "v0.0.0-20260629215413-fe88a3aca038", CHART, "github.com/netapp/trident", "helm/trident-operator"
)
# The image of local-path's helper pods and of the storage probes: Debian's static busybox of the
# DEBIAN suite (busybox-static), which the bundle packs as docker.io/library/busybox, tagged with its
# upstream version.
BUSYBOX = Pin("busybox", "1.35", IMAGE, "busybox")

# --- the pod network ------------------------------------------------------------------------------------

# flannel, mode kubeadm's CNI: its manifest, taken from its Go module, names its images, which the
# bundle builds (flanneld from this module). Not v0.28.10, the newest the module proxy serves (checked
# 4 Dec 2026): it requires tencentcloud-sdk-go's vpc module at v1.3.188, which the proxy refuses
# (`go mod download -json github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc@v1.3.188`: 403).
FLANNEL = Pin("flannel", "v0.28.4", GO_MODULE, "github.com/flannel-io/flannel", "Documentation/kube-flannel.yml")
# flannel's CNI plugin (the flannel-cni-plugin image) lives in github.com/flannel-io/cni-plugin, which
# the Go module proxy does not serve (every version is refused). Its predecessor, the same delegating
# plugin, is served in containernetworking/plugins up to v0.9.1: the image is built from that, and
# the bundle's manifest names the source.
FLANNEL_CNI_PLUGIN = Pin(
    "flannel_cni_plugin", "v0.9.1", GO_MODULE, "github.com/containernetworking/plugins", "plugins/meta/flannel"
)
# FLANNEL requires tencentcloud-sdk-go's common module at v1.3.79, which the module proxy refuses;
# v1.3.78 is served and is what its vpc module (v1.3.75) was written against: the bundle's build of
# flanneld replaces the one with the other.
TENCENTCLOUD_SDK_COMMON = Pin(
    "tencentcloud_sdk_common", "v1.3.78", GO_MODULE, "github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common"
)

# --- the GPU stack ----------------------------------------------------------------------------------------

# The NVIDIA container toolkit's commands, built from its Go module by the bundle (NVIDIA's package
# repository is out of reach) and packaged as NVIDIA packages them: <version>-1. The newest release
# the module proxy serves (checked 4 Dec 2026: the list ends at v1.20.2, which downloads).
NVIDIA_CONTAINER_TOOLKIT = Pin(
    "nvidia_container_toolkit", "v1.20.2", GO_MODULE, "github.com/NVIDIA/nvidia-container-toolkit", package_revision="1"
)
# The GPU operator's chart. The operator publishes v25.x tags, which are not valid Go module versions
# (no /v25 suffix), so the module is reachable only at a pseudo-version: this one is the commit
# KAI_SCHEDULER requires (July 2025), whose go.sum vouches for it (the checksum database does not
# answer for a pseudo-version). The chart says v1.0.0-devel and pins component images of the v25.3
# line. Newer is served (checked 4 Dec 2026: `go list -m -json github.com/NVIDIA/gpu-operator@latest`
# gives v0.0.0-20250917190837-d73a0086a6ba) but no pinned module's go.sum vouches for it: kept.
GPU_OPERATOR_CHART = Pin(
    "gpu_operator_chart",
    "v1.8.3-0.20250724212111-616690d88d86",
    CHART,
    "github.com/NVIDIA/gpu-operator",
    "deployments/gpu-operator",
)
GPU_OPERATOR_CHART_VOUCHER = KAI_SCHEDULER
# The operator's own image (and its validator's): the chart's appVersion would be "devel-ubi8", a
# development build, so it is pinned to v25.3.2, the release of the chart's line nearest the commit
# (docs/gpu-stack.md: check it on a site).
GPU_OPERATOR = Pin("gpu_operator", "v25.3.2", IMAGE, "nvcr.io/nvidia/gpu-operator")
# NVIDIA's device plugin chart, the device layer without the operator (its image is the chart's own
# version). This version adds CAP_SYS_ADMIN to the plugin's own pod (install/gpu_device_layer.py says
# what that means for volume-mount device lists). The newest the module proxy serves for download
# (checked 4 Dec 2026: v0.19.0, v0.19.1 and v0.19.3 download; v0.19.2, v0.19.4 and later, v0.20.x answer
# 403); from v0.18.2 its chart gives the plugin and GFD a service account always, and GFD reads pods.
NVIDIA_DEVICE_PLUGIN = Pin(
    "nvidia_device_plugin",
    "v0.19.3",
    CHART,
    "github.com/NVIDIA/k8s-device-plugin",
    "deployments/helm/nvidia-device-plugin",
)

# --- hosts and workloads ---------------------------------------------------------------------------------

# The Debian suite of the bundle's packages and images and of the lab's hosts, from Debian's archive.
DEBIAN_SUITE = Pin("debian", "bookworm", DEBIAN, "http://deb.debian.org/debian")
# The image of a workload that names none (tenancy.workloads): NVIDIA's PyTorch container.
WORKLOAD_IMAGE = Pin("workload_image", "24.01-py3", IMAGE, "nvcr.io/nvidia/pytorch")

# --- monitoring ------------------------------------------------------------------------------------------

# Prometheus and promtool: Debian's package (``path``) of the DEBIAN_SUITE (prometheus <version>-<revision>), a
# build made for the field, fetched with apt-get download and unpacked (monitoring.prometheus_package);
# the monitoring stage runs its prometheus, the unit tests its promtool (promtool test rules). The rules
# (roles/monitoring/files) use only what this version's PromQL has.
PROMETHEUS = Pin("prometheus", "2.42.0+ds", DEBIAN, DEBIAN_SUITE.source, "prometheus", package_revision="5+deb12u1")
# kube-state-metrics (node allocatable and conditions, pods' requests): the newest release the module
# proxy serves whose checksum Go's sum database vouches for (v2.16.0 is served but not vouched for,
# v2.14.0 is refused).
KUBE_STATE_METRICS = Pin("kube_state_metrics", "v2.15.0", GO_MODULE, "k8s.io/kube-state-metrics/v2")
# The images of the monitoring stage on a kubeadm site, as the bundle builds them: upstream's
# repositories, tagged with the upstream version of the program that goes in (Debian's Prometheus
# 2.42.0+ds is upstream's v2.42.0).
PROMETHEUS_IMAGE = "docker.io/prom/prometheus:v%s" % PROMETHEUS.version.split("+", 1)[0]
KUBE_STATE_METRICS_IMAGE = "registry.k8s.io/kube-state-metrics/kube-state-metrics:%s" % KUBE_STATE_METRICS.version
# The Prometheus Operator's CRDs (``path``: the folder of its module that holds them), for the e2e test that
# stands in for a site running the operator: its PrometheusRule CRD, which the monitoring stage makes
# objects of (monitoring.operator). The newest release the module proxy serves.
PROMETHEUS_OPERATOR = Pin(
    "prometheus_operator",
    "v0.85.0",
    GO_MODULE,
    "github.com/prometheus-operator/prometheus-operator",
    "example/prometheus-operator-crd",
)

PINS: dict[str, Pin] = {
    pin.name: pin
    for pin in (
        KUBERNETES,
        ETCD,
        PAUSE,
        KUBERNETES_PREVIOUS,
        ETCD_PREVIOUS,
        COREDNS_PREVIOUS,
        PAUSE_PREVIOUS,
        KWOK,
        HELM,
        KAI_SCHEDULER,
        KUEUE,
        KOORDINATOR,
        LOCAL_PATH_PROVISIONER,
        NFS_SUBDIR_EXTERNAL_PROVISIONER,
        TRIDENT,
        BUSYBOX,
        FLANNEL,
        FLANNEL_CNI_PLUGIN,
        TENCENTCLOUD_SDK_COMMON,
        NVIDIA_CONTAINER_TOOLKIT,
        GPU_OPERATOR_CHART,
        GPU_OPERATOR,
        NVIDIA_DEVICE_PLUGIN,
        PROMETHEUS,
        KUBE_STATE_METRICS,
        PROMETHEUS_OPERATOR,
        DEBIAN_SUITE,
        WORKLOAD_IMAGE,
    )
}
# What value() hands out of a pin besides its version.
ATTRIBUTES = ("version", "bare", "minor", "pin", "image", "package_version", "source", "path")


def value(term: str) -> str:
    """``kai_scheduler`` -> its version; ``kubernetes.minor`` -> that attribute of the pin (the
    lookup plugin's terms). A name or attribute this file does not have is a ValueError naming the
    ones it has."""
    name, _, attribute = term.partition(".")
    if name not in PINS:
        raise ValueError("no pinned component %r; the pins are: %s" % (name, ", ".join(sorted(PINS))))
    attribute = attribute or "version"
    if attribute not in ATTRIBUTES:
        raise ValueError("%r: expected one of the attributes %s, found %r" % (term, ", ".join(ATTRIBUTES), attribute))
    found = getattr(PINS[name], attribute)
    if not found:
        raise ValueError("%r: the %s pin has no %s" % (term, name, attribute))
    return found
