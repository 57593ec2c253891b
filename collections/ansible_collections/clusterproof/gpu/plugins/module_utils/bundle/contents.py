"""What the offline bundle holds, worked out from the pins: pure functions and data, no I/O.

The bundle is one directory an air-gapped site (or the lab) installs from: a signed apt repository,
a container image registry's storage, and a manifest listing every artefact with its version and
digest (docs/bundle.md). This module says *what* goes in; ``bundle.build`` makes it, ``bundle.serve``
serves it.

The Kubernetes images are the ones the pinned kubeadm asks for (``kubeadm config images list``), so
a new Kubernetes pin moves etcd, CoreDNS and pause with it; the CNI's images are the ones its pinned
manifest references. The bundle carries the previous Kubernetes minor too
(``versions.KUBERNETES_PREVIOUS``: its kubeadm, kubelet and kubectl packages, and the images its
kubeadm asks for where they are not the pinned one's), so that a site can be installed at N-1 and
upgraded to N offline, one minor at a time as kubeadm upgrades. Its programs go by
``<name>@<tag>`` (``kubeadm@v1.<minor>.<patch>``, ``etcd@<version>-0``), the pinned release's by
their names alone. Every image is built here from its upstream source at the version in its tag.

May import: the standard library and ``versions`` (the pins). Touches nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions

# Bump when the way an artefact is made changes, so the cache does not reuse old ones.
RECIPE_REVISION = "1"

# The registries a site's images come from: containerd on every host is told to pull each of them
# through the bundle's registry (hosts.toml per registry, see containerd_hosts_toml).
UPSTREAM_REGISTRIES = ("registry.k8s.io", "docker.io", "ghcr.io", "nvcr.io", "quay.io")
# The bundle's own images (its Debian base) go by this registry name, mirrored like the others.
BUNDLE_REGISTRY = "clusterproof.local"
MIRRORED_REGISTRIES = UPSTREAM_REGISTRIES + (BUNDLE_REGISTRY,)

# Debian's own packages the hosts need beside the Kubernetes ones, taken from Debian's mirror with
# whatever they depend on that a minimal Debian 12 host lacks: the container runtime, and the tools
# kubeadm's preflight and kube-proxy look for, and the Kubernetes Python client kubernetes.core's modules
# need on the first control-plane host (the CNI, and every later stage, run there).
DEBIAN_PACKAGES = (
    "containerd",
    "runc",
    "iptables",
    "conntrack",
    "ethtool",
    "socat",
    "containernetworking-plugins",
    "python3-kubernetes",
    # The API endpoint on the control planes of a site with clusterproof_control_plane_vip (role
    # api_endpoint, docs/ha.md): the VIP's VRRP and the TCP proxy in front of the API servers.
    "keepalived",
    "haproxy",
)

# The NVIDIA container toolkit's commands, built from its Go module (NVIDIA's package repository is
# out of reach), packaged as NVIDIA names its packages: -base holds the runtime and nvidia-ctk.
TOOLKIT_MODULE = versions.NVIDIA_CONTAINER_TOOLKIT.source
TOOLKIT_PACKAGES = {
    "nvidia-container-toolkit-base": ("nvidia-ctk", "nvidia-container-runtime", "nvidia-cdi-hook"),
    "nvidia-container-toolkit": ("nvidia-container-runtime-hook",),
}

# etcd's clients, for the etcd backup and restore on the control planes (docs/etcd.md): etcdctl takes a
# snapshot from the running etcd, etcdutl reads and restores a snapshot file. Each is its own Go module
# (its main package at the module's root), released with the server at the same version (versions.ETCD).
# The package takes Debian's name for etcdctl's package, which it replaces on a host that has Debian's
# (Debian 12's is older and has no etcdutl): one etcdctl on the host, never two.
ETCD_CLIENT_PACKAGE = "etcd-client"
ETCD_CLIENT_MODULES = {
    "etcdctl": "go.etcd.io/etcd/etcdctl/v3",
    "etcdutl": "go.etcd.io/etcd/etcdutl/v3",
}

# Where flannel's CNI plugin (the flannel-cni-plugin image) is built from, as <module>, <version>,
# <package> (versions.FLANNEL_CNI_PLUGIN says why that module).
FLANNEL_CNI_SOURCE = (
    versions.FLANNEL_CNI_PLUGIN.source,
    versions.FLANNEL_CNI_PLUGIN.version,
    "%s/%s" % (versions.FLANNEL_CNI_PLUGIN.source, versions.FLANNEL_CNI_PLUGIN.path),
)

# The bundle's own small Debian image (the pinned suite with iptables and a shell): the base of the
# images whose binaries call iptables or cp (kube-proxy, flannel), and the image the lab's probe pod
# runs.
DEBIAN_BASE_PACKAGES = ("iptables", "conntrack", "ca-certificates")


class BundleInputError(ValueError):
    """A pin or a listing the bundle is made from is not what it must be; the message names it."""


@dataclasses.dataclass(frozen=True)
class BundlePins:
    """The versions the bundle is made from: by default the pins (module_utils/versions.py). The
    fields, in this order, are the manifest's ``pins``."""

    kubernetes: str = versions.KUBERNETES.version
    # Upstream's package revision: the bundle's packages take the same name and version, so the
    # kubernetes_packages role's pin holds for either source.
    package_revision: str = versions.KUBERNETES.package_revision
    cni: str = "flannel"
    cni_version: str = versions.FLANNEL.version
    nvidia_container_toolkit: str = versions.NVIDIA_CONTAINER_TOOLKIT.version
    debian_suite: str = versions.DEBIAN_SUITE.version
    # The previous minor, carried beside ``kubernetes`` for upgrades (empty: none).
    kubernetes_previous: str = versions.KUBERNETES_PREVIOUS.version
    # etcdctl and etcdutl: the version of the etcd the pinned kubeadm runs (bundle.build checks that).
    etcd_client: str = versions.ETCD.version

    @property
    def kubernetes_versions(self) -> tuple[str, ...]:
        """The Kubernetes releases the bundle carries: the pinned one first, then the previous minor."""
        return tuple(version for version in (self.kubernetes, self.kubernetes_previous) if version)

    def package_version(self, kubernetes: str = "") -> str:
        """kubeadm's, kubelet's and kubectl's package version for ``kubernetes`` (by default the pinned
        release): <version without v>-<upstream's revision>."""
        return "%s-%s" % ((kubernetes or self.kubernetes).lstrip("v"), self.package_revision)

    def program(self, name: str, kubernetes: str) -> str:
        """The build name of Kubernetes ``kubernetes``'s program ``name``: the pinned release's is its
        name, another's is tagged with its version (release_program)."""
        return name if kubernetes == self.kubernetes else release_program(name, kubernetes)

    def etcd_client_package_version(self) -> str:
        """etcd-client's package version: <etcd version without v>-<revision>."""
        return "%s-%s" % (self.etcd_client.lstrip("v"), versions.ETCD.package_revision)

    def toolkit_package_version(self) -> str:
        # As NVIDIA versions its own packages: the module version and a revision.
        return "%s-%s" % (self.nvidia_container_toolkit.lstrip("v"), versions.NVIDIA_CONTAINER_TOOLKIT.package_revision)


@dataclasses.dataclass(frozen=True)
class ImageRef:
    """An image reference split as the registry sees it: host, repository path, tag."""

    host: str
    path: str
    tag: str

    @property
    def ref(self) -> str:
        return "%s/%s:%s" % (self.host, self.path, self.tag)

    @property
    def mirror_repository(self) -> str:
        """The repository the bundle's registry keeps it under: the upstream host is the first
        path element, which is what containerd asks a mirror for (hosts.toml with override_path)."""
        return "%s/%s" % (self.host, self.path)

    @property
    def name(self) -> str:
        """The last path element (kube-apiserver, coredns)."""
        return self.path.rsplit("/", 1)[-1]


_REFERENCE = re.compile(r"^(?P<host>[a-z0-9.-]+\.[a-z]{2,}(?::\d+)?)/(?P<path>[a-z0-9._/-]+):(?P<tag>[A-Za-z0-9._-]+)$")


def parse_ref(text: str, field: str = "image") -> ImageRef:
    """``registry.k8s.io/kube-apiserver:<tag>`` → ImageRef. An image named without its registry
    (``nginx:1.27``) is docker.io's, as every container runtime reads it."""
    text = text.strip()
    if "/" in text and "." in text.split("/", 1)[0]:
        candidate = text
    else:
        path = text if "/" in text else "library/" + text
        candidate = "docker.io/" + path
    if ":" not in candidate.rsplit("/", 1)[-1]:
        raise BundleInputError(
            "%s: expected an image reference with a tag, such as '%s'; found %r" % (field, versions.PAUSE.image, text)
        )
    match = _REFERENCE.match(candidate)
    if match is None:
        raise BundleInputError(
            "%s: expected an image reference such as '%s'; found %r" % (field, versions.PAUSE.image, text)
        )
    return ImageRef(match["host"], match["path"], match["tag"])


def kubeadm_images(listing: str) -> dict[str, ImageRef]:
    """``kubeadm config images list`` output → {kube-apiserver: ImageRef, ..., etcd, coredns, pause}."""
    images: dict[str, ImageRef] = {}
    for number, line in enumerate(listing.splitlines(), start=1):
        if not line.strip():
            continue
        ref = parse_ref(line, "kubeadm config images list, line %d" % number)
        images[ref.name] = ref
    wanted = {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "etcd", "coredns", "pause"}
    missing = sorted(wanted - set(images))
    if missing:
        raise BundleInputError(
            "kubeadm config images list: expected the images %s; %s missing from %r"
            % (", ".join(sorted(wanted)), ", ".join(missing), listing)
        )
    return images


def release_program(name: str, tag: str) -> str:
    """The build name of a program of a release other than the pinned one: <name>@<its image tag>
    (kube-apiserver@v1.<minor>.<patch>, etcd@<version>-0), beside the pinned one's <name>."""
    return "%s@%s" % (name, tag)


# What the previous minor's kubeadm asks for beside its own programs, as pinned (versions.py): the
# build checks its listing agrees (check_previous_images).
PREVIOUS_IMAGE_PINS = {
    "etcd": versions.ETCD_PREVIOUS,
    "coredns": versions.COREDNS_PREVIOUS,
    "pause": versions.PAUSE_PREVIOUS,
}


def check_previous_images(kubeadm: Mapping[str, ImageRef], kubernetes: str) -> None:
    """The etcd, CoreDNS and pause that ``kubernetes``'s kubeadm (the previous minor) asks for must be
    the pinned ones (ETCD_PREVIOUS, COREDNS_PREVIOUS, PAUSE_PREVIOUS): they are built from those
    versions. A mismatch names the pin to set and what kubeadm asks for."""
    for name, pin in PREVIOUS_IMAGE_PINS.items():
        wanted = upstream_version(kubeadm[name])
        if wanted != pin.version:
            raise BundleInputError(
                "%s: kubeadm %s asks for %s, and %s is pinned to %s; set %s in module_utils/versions.py to %s"
                % (name, kubernetes, kubeadm[name].ref, pin.name, pin.version, pin.name.upper(), wanted)
            )


def check_etcd_client(pins: BundlePins, kubeadm: Mapping[str, ImageRef]) -> None:
    """etcdctl and etcdutl must be at the version of the etcd the pinned kubeadm runs: a snapshot is
    restored with the etcdutl of the etcd that will serve it."""
    wanted = upstream_version(kubeadm["etcd"])
    if pins.etcd_client != wanted:
        raise BundleInputError(
            "etcd_client: expected the version of the etcd kubeadm %s runs (%s, %s); found %s"
            % (pins.kubernetes, wanted, kubeadm["etcd"].ref, pins.etcd_client)
        )


def upstream_version(ref: ImageRef) -> str:
    """The source version an image's tag names: etcd's <x.y.z>-0 is v<x.y.z>, pause's tag is its
    version as it is (a C file in Kubernetes' tree), CoreDNS's v<x.y.z> is its module's v<x.y.z>."""
    if ref.name == "etcd":
        return "v" + ref.tag.split("-", 1)[0]
    return ref.tag


@dataclasses.dataclass(frozen=True)
class ImageSpec:
    """One image the bundle builds: its reference, the programs it holds (<build name>: <path in the
    image>), its entry point, and its base ("scratch" for a static binary alone, "debian" for the
    bundle's Debian base)."""

    ref: ImageRef
    files: tuple[tuple[str, str], ...]
    entrypoint: tuple[str, ...]
    base: str = "scratch"
    env_path: str = "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    # As upstream's image has them: the user, the default command, the working directory, folders
    # copied in (<build name>: <path in the image>) and symbolic links (<path>: <target>).
    user: str = ""
    cmd: tuple[str, ...] = ()
    workdir: str = ""
    trees: tuple[tuple[str, str], ...] = ()
    links: tuple[tuple[str, str], ...] = ()

    def recipe(self, inputs: Mapping[str, str]) -> str:
        """The cache key of this image: its spec and the digests of the files that go in."""
        text = json.dumps(
            {"spec": dataclasses.asdict(self), "inputs": dict(sorted(inputs.items())), "recipe": RECIPE_REVISION},
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()


def debian_base_ref(suite: str) -> ImageRef:
    return ImageRef(BUNDLE_REGISTRY, "debian-base", suite)


def kubeadm_image_specs(kubeadm: Mapping[str, ImageRef], tagged: bool = False) -> list[ImageSpec]:
    """kubeadm's seven images, each of the program of its name; ``tagged``: of the program
    <name>@<tag> (release_program), another release's."""

    def program(name: str) -> str:
        return release_program(name, kubeadm[name].tag) if tagged else name

    specs = []
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        specs.append(
            ImageSpec(kubeadm[name], ((program(name), "/usr/local/bin/" + name),), ("/usr/local/bin/" + name,))
        )
    specs.append(
        ImageSpec(
            kubeadm["kube-proxy"],
            ((program("kube-proxy"), "/usr/local/bin/kube-proxy"),),
            ("/usr/local/bin/kube-proxy",),
            "debian",
        )
    )
    specs.append(ImageSpec(kubeadm["etcd"], ((program("etcd"), "/usr/local/bin/etcd"),), ("/usr/local/bin/etcd",)))
    specs.append(ImageSpec(kubeadm["coredns"], ((program("coredns"), "/coredns"),), ("/coredns",)))
    specs.append(ImageSpec(kubeadm["pause"], ((program("pause"), "/pause"),), ("/pause",)))
    return specs


def previous_image_specs(previous: Mapping[str, ImageRef], pinned: Mapping[str, ImageRef]) -> list[ImageSpec]:
    """The images the previous minor's kubeadm asks for that the pinned one's does not: its control
    plane and kube-proxy, and etcd, CoreDNS and pause where their versions differ; each of the
    programs <name>@<tag>."""
    held = {ref.ref for ref in pinned.values()}
    return [spec for spec in kubeadm_image_specs(previous, tagged=True) if spec.ref.ref not in held]


def image_specs(kubeadm: Mapping[str, ImageRef], cni_images: Iterable[ImageRef], suite: str) -> list[ImageSpec]:
    """The images to build: kubeadm's seven, the CNI's, and the bundle's Debian base."""
    specs = kubeadm_image_specs(kubeadm)
    for ref in cni_images:
        if ref.name == "flannel":
            specs.append(ImageSpec(ref, (("flanneld", "/opt/bin/flanneld"),), ("/opt/bin/flanneld",), "debian"))
        elif ref.name == "flannel-cni-plugin":
            # The manifest's init container runs "cp -f /flannel /opt/cni/bin/flannel": a shell and cp.
            specs.append(ImageSpec(ref, (("flannel-cni", "/flannel"),), ("/bin/sh",), "debian"))
        else:
            raise BundleInputError("the CNI's manifest references %s, which the bundle cannot build" % ref.ref)
    specs.append(ImageSpec(debian_base_ref(suite), (), ("/bin/sh",), "debian"))
    return specs


KAI_MODULE = versions.KAI_SCHEDULER.source
# KAI scheduler's images: the operator the chart deploys, and the components the operator deploys
# (their image names are the operator's defaults, pkg/apis/kai/v1/*, and the chart's Config), each
# built from cmd/<name> of KAI's module; and crd-upgrader, the chart's hook image (kubectl and the CRDs).
KAI_COMMANDS = (
    "operator",
    "admission",
    "binder",
    "nodescaleadjuster",
    "podgroupcontroller",
    "podgrouper",
    "queuecontroller",
    "resourcereservation",
    "scalingpod",
    "scheduler",
)
# Those that link NVML through cgo (go-nvml): built with cgo, on the Debian base (glibc), as KAI's
# own images are on a base with glibc.
KAI_CGO_COMMANDS = ("resourcereservation",)
# Kueue's image where its releases are published (the chart's default is a staging registry; the
# kueue_scheduler role names this one).
KUEUE_REPOSITORY = "registry.k8s.io/kueue/kueue"
LOCAL_PATH_REPOSITORY = "docker.io/rancher/local-path-provisioner"
# local-path's helper pods make and remove a volume's directory: busybox, here Debian's static build
# (busybox-static), tagged with its upstream version; storage_classes_helper_image names it, as
# "busybox" (docker.io/library/busybox, as parse_ref reads it).
BUSYBOX_REPOSITORY = versions.BUSYBOX.source


@dataclasses.dataclass(frozen=True)
class ChartPins:
    """The engines' and storage's versions whose images the bundle holds (the pins the sandbox is
    built from, module_utils/versions.py)."""

    kai_scheduler: str = versions.KAI_SCHEDULER.version
    kueue: str = versions.KUEUE.version
    local_path_provisioner: str = versions.LOCAL_PATH_PROVISIONER.version
    busybox: str = versions.BUSYBOX.version
    # The chart tool, packaged for the control-plane host that kubernetes.core.helm runs on.
    helm: str = versions.HELM.version

    def helm_package_version(self) -> str:
        return "%s-%s" % (self.helm.lstrip("v"), versions.HELM.package_revision)


def chart_image_specs(pins: ChartPins, busybox_applets: Iterable[str] = ()) -> list[ImageSpec]:
    """The images the charts (KAI scheduler, Kueue, local-path-provisioner) and local-path's helper
    pods reference, built as upstream builds them: a static program in an image of its own, with
    upstream's path, user and entry point."""
    specs = []
    for command in KAI_COMMANDS:
        ref = ImageRef("ghcr.io", "nvidia/kai-scheduler/" + command, pins.kai_scheduler)
        specs.append(
            ImageSpec(
                ref,
                (("kai-" + command, "/workspace/app"),),
                ("/workspace/app",),
                "debian" if command in KAI_CGO_COMMANDS else "scratch",
                user="65532:65532",
                workdir="/workspace",
            )
        )
    upgrader = ImageRef("ghcr.io", "nvidia/kai-scheduler/crd-upgrader", pins.kai_scheduler)
    specs.append(
        ImageSpec(
            upgrader,
            (("kubectl", "/usr/bin/kubectl"), ("kai-apply-crds", "/apply-crds.sh")),
            (),
            "debian",
            user="65532:65532",
            cmd=("/apply-crds.sh",),
            trees=(("kai-crds", "/internal-crds"),),
        )
    )
    kueue = parse_ref("%s:%s" % (KUEUE_REPOSITORY, pins.kueue))
    specs.append(ImageSpec(kueue, (("kueue", "/manager"),), ("/manager",), user="65532:65532"))
    local_path = parse_ref("%s:%s" % (LOCAL_PATH_REPOSITORY, pins.local_path_provisioner))
    specs.append(
        ImageSpec(
            local_path,
            (("local-path-provisioner", "/usr/bin/local-path-provisioner"),),
            (),
            cmd=("local-path-provisioner",),
        )
    )
    busybox = parse_ref("%s:%s" % (BUSYBOX_REPOSITORY, pins.busybox))
    links = tuple(("/bin/" + applet, "busybox") for applet in sorted(set(busybox_applets)) if applet != "busybox")
    specs.append(ImageSpec(busybox, (("busybox", "/bin/busybox"),), (), cmd=("sh",), links=links))
    return specs


def monitoring_image_specs() -> list[ImageSpec]:
    """The monitoring stage's images on a kubeadm site (monitoring.cluster), as upstream lays them
    out: Debian's Prometheus (linked against glibc, so on the Debian base) as ``/bin/prometheus``,
    and kube-state-metrics (static, from the pinned module as the sandbox builds it) as
    ``/kube-state-metrics``; both run as nobody."""
    return [
        ImageSpec(
            parse_ref(versions.PROMETHEUS_IMAGE),
            (("prometheus", "/bin/prometheus"),),
            ("/bin/prometheus",),
            "debian",
            user="65534:65534",
            workdir="/prometheus",
        ),
        ImageSpec(
            parse_ref(versions.KUBE_STATE_METRICS_IMAGE),
            (("kube-state-metrics", "/kube-state-metrics"),),
            ("/kube-state-metrics",),
            user="65534:65534",
        ),
    ]


def manifest_images(documents: Iterable[Mapping[str, Any]]) -> list[ImageRef]:
    """Every image a list of Kubernetes objects references (containers and init containers of pod
    templates and pods), each once, in order."""
    seen: dict[str, ImageRef] = {}
    for document in documents:
        for image in _images_in(document):
            seen.setdefault(
                image, parse_ref(image, "%s %s" % (document.get("kind"), document.get("metadata", {}).get("name")))
            )
    return list(seen.values())


def _images_in(node: Any) -> Iterable[str]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("containers", "initContainers", "ephemeralContainers") and isinstance(value, list):
                for container in value:
                    if isinstance(container, Mapping) and isinstance(container.get("image"), str):
                        yield container["image"]
            elif key.endswith(("image", "Image")) and isinstance(value, Mapping) and _whole_image(value):
                # An operator's configuration (KAI's Config): {name, repository, tag}.
                yield "%s/%s:%s" % (value["repository"], value["name"], value["tag"])
            else:
                yield from _images_in(value)
    elif isinstance(node, list):
        for item in node:
            yield from _images_in(item)


def _whole_image(value: Mapping[str, Any]) -> bool:
    return all(isinstance(value.get(key), str) and value.get(key) for key in ("name", "repository", "tag"))


def missing_images(manifest: Mapping[str, Any], wanted: Iterable[ImageRef]) -> list[str]:
    """The references in ``wanted`` the bundle's manifest does not list with a digest."""
    held = {entry["ref"] for entry in manifest.get("images", []) if entry.get("digest")}
    return [ref.ref for ref in wanted if ref.ref not in held]


def containerd_hosts_toml(upstream: str, mirror: str, insecure: bool) -> str:
    """containerd's hosts.toml for ``upstream`` (certs.d/<upstream>/hosts.toml): pull through the
    bundle's registry at ``mirror`` (host:port), which keeps upstream's images under
    <upstream>/<path>; upstream itself stays the fallback, unreachable on an air-gapped site."""
    server = "https://registry-1.docker.io" if upstream == "docker.io" else "https://" + upstream
    scheme = "http" if insecure else "https"
    return (
        "# Written by clusterproof: pull %s's images through the site's bundle registry.\n"
        'server = "%s"\n\n'
        '[host."%s://%s/v2/%s"]\n'
        '  capabilities = ["pull", "resolve"]\n'
        "  override_path = true\n"
    ) % (upstream, server, scheme, mirror, upstream)


def deb_control(package: str, version: str, description: str, depends: Sequence[str] = ()) -> str:
    """A binary package's control file for the packages the bundle makes."""
    fields = {
        "Package": package,
        "Version": version,
        "Architecture": "amd64",
        "Maintainer": "clusterproof bundle <bundle@clusterproof.invalid>",
        "Section": "admin",
        "Priority": "optional",
    }
    if depends:
        fields["Depends"] = ", ".join(depends)
    fields["Description"] = description
    return "".join("%s: %s\n" % item for item in fields.items())


# Upstream's kubelet unit and kubeadm's drop-in for it, as the kubelet and kubeadm packages of
# Kubernetes' own repository install them.
KUBELET_SERVICE = """[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
"""

KUBEADM_DROPIN = """# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# "kubeadm init" and "kubeadm join" write this file, which sets KUBELET_KUBEADM_ARGS
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
# The admin's last-resort overrides of the kubelet's arguments (KUBELET_EXTRA_ARGS); prefer
# .nodeRegistration.kubeletExtraArgs in kubeadm's configuration.
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""  # noqa: E501 (upstream's drop-in, its lines as they are)


@dataclasses.dataclass(frozen=True)
class PackageSpec:
    """A package the bundle makes from built programs: name, files (<build name>: <path on the
    host>), text files (<path>: <content>), dependencies."""

    name: str
    version: str
    description: str
    files: tuple[tuple[str, str], ...]
    texts: tuple[tuple[str, str], ...] = ()
    depends: tuple[str, ...] = ()

    def recipe(self, inputs: Mapping[str, str]) -> str:
        text = json.dumps(
            {"spec": dataclasses.asdict(self), "inputs": dict(sorted(inputs.items())), "recipe": RECIPE_REVISION},
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def filename(self) -> str:
        return "%s_%s_amd64.deb" % (self.name, self.version)


# kubeadm, kubelet and kubectl as upstream packages them: the program, what it is, the files beside it and
# what it depends on.
KUBERNETES_PACKAGES: tuple[tuple[str, str, tuple[tuple[str, str], ...], tuple[str, ...]], ...] = (
    (
        "kubelet",
        "Kubernetes node agent",
        (("/usr/lib/systemd/system/kubelet.service", KUBELET_SERVICE),),
        ("iptables", "conntrack", "containernetworking-plugins"),
    ),
    (
        "kubeadm",
        "Kubernetes cluster bootstrapping tool",
        (("/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", KUBEADM_DROPIN),),
        ("kubelet", "kubectl"),
    ),
    ("kubectl", "Kubernetes command-line client", (), ()),
)


def kubernetes_package_specs(pins: BundlePins, kubernetes: str) -> list[PackageSpec]:
    """kubeadm, kubelet and kubectl of release ``kubernetes`` under upstream's names and version
    (<version>-<revision>): the repository holds them at each version the bundle carries, and apt
    installs the one the kubernetes_packages role pins."""
    version = pins.package_version(kubernetes)
    return [
        PackageSpec(
            program,
            version,
            "%s (built from k8s.io/kubernetes %s)" % (what, kubernetes),
            ((pins.program(program, kubernetes), "/usr/bin/" + program),),
            texts,
            depends,
        )
        for program, what, texts, depends in KUBERNETES_PACKAGES
    ]


def package_specs(pins: BundlePins, charts: ChartPins | None = None) -> list[PackageSpec]:
    """The packages the bundle makes: kubeadm, kubelet and kubectl under upstream's names, at the
    pinned version and at the previous minor's, the NVIDIA container toolkit's two, helm, and
    etcd-client (etcdctl and etcdutl)."""
    charts = charts or ChartPins()
    toolkit = pins.toolkit_package_version()
    kubernetes = [spec for version in pins.kubernetes_versions for spec in kubernetes_package_specs(pins, version)]
    return kubernetes + [
        PackageSpec(
            "nvidia-container-toolkit-base",
            toolkit,
            "NVIDIA container runtime and nvidia-ctk (built from %s %s)"
            % (TOOLKIT_MODULE, pins.nvidia_container_toolkit),
            tuple((command, "/usr/bin/" + command) for command in TOOLKIT_PACKAGES["nvidia-container-toolkit-base"]),
        ),
        PackageSpec(
            "nvidia-container-toolkit",
            toolkit,
            "NVIDIA container runtime hook (built from %s %s)" % (TOOLKIT_MODULE, pins.nvidia_container_toolkit),
            tuple((command, "/usr/bin/" + command) for command in TOOLKIT_PACKAGES["nvidia-container-toolkit"]),
            depends=("nvidia-container-toolkit-base (= %s)" % toolkit,),
        ),
        PackageSpec(
            "helm",
            charts.helm_package_version(),
            "The Kubernetes package manager (built from helm.sh/helm/v3 %s)" % charts.helm,
            (("helm", "/usr/bin/helm"),),
        ),
        PackageSpec(
            ETCD_CLIENT_PACKAGE,
            pins.etcd_client_package_version(),
            "etcd's command-line clients, etcdctl and etcdutl (built from %s %s)"
            % (", ".join(ETCD_CLIENT_MODULES.values()), pins.etcd_client),
            tuple((command, "/usr/bin/" + command) for command in ETCD_CLIENT_MODULES),
        ),
    ]
