"""Make the offline bundle, incrementally: a signed apt repository, a registry's storage holding
every image, and a manifest (docs/bundle.md).

Each artefact is kept in the cache with the recipe key it was made from (its pins, the digests of
its inputs), so an unchanged pin rebuilds nothing, and a changed one rebuilds only what it
concerns. Progress goes to the ``progress`` callable, a line per step with its time.

The tools are the ones made for the job: Go for the programs (through ``install.go_modules``' env),
``apt-get --download-only`` for Debian's packages (apt resolves what a minimal Debian 12 host lacks),
``dpkg-deb`` and ``apt-ftparchive`` for the repository, ``gpg`` to sign it, ``debootstrap`` for the
images' Debian base, ``umoci`` to make the images, ``skopeo`` to copy them into ``docker-registry``'s
storage.

What it touches: the bundle's cache (``~/.cache/clusterproof/bundle``) and output directory, the
Go module and build caches, the sandbox cache (building kube-proxy there), Debian's mirror (first
build only), a registry process on a loopback port for the time of the copy, and the gpg-agent gpg
starts for the signing key's home for the time of signing (stopped after, however signing ended).

Run as a program: ``python -m ansible_collections.clusterproof.gpu.plugins.module_utils.bundle.build [--out DIR]``.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import contents
from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle.contents import BundlePins, ImageRef, ImageSpec
from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle.serve import registry_config
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.fields import Below
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import go_modules, kubernetes_cni
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build

Progress = Callable[[str], None]
DEBIAN_MIRROR = versions.DEBIAN_SUITE.source
TOOLS = {
    "apt-ftparchive": "apt-utils",
    "debootstrap": "debootstrap",
    "docker-registry": "docker-registry",
    "dpkg-deb": "dpkg",
    "gcc": "gcc",
    "go": "golang (or Go from go.dev)",
    "gpg": "gpg",
    "skopeo": "skopeo",
    "umoci": "umoci",
}
KEY_UID = "clusterproof bundle <bundle@clusterproof.invalid>"
# How long a program's `go build` takes cold (empty build cache) on 2 cores, in minutes, where it
# was measured; the others' progress line gives no figure.
COLD_BUILD_MINUTES = {"coredns": 8}
MANIFEST_SCHEMA = 1


class BundleBuildError(RuntimeError):
    """A step of the build failed; the message says which, and where its log is."""


def default_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "clusterproof" / "bundle"


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where things go: the build cache (never carried to a site) and the bundle itself."""

    cache: Path
    out: Path

    programs = Below("cache", "programs")
    work = Below("cache", "work")
    oci = Below("cache", "oci")
    gnupg = Below("cache", "gnupg")
    debian = Below("cache", "debian")
    log = Below("cache", "build.log")
    apt = Below("out", "apt")
    registry = Below("out", "registry")
    manifest = Below("out", "manifest.json")


def _run(cmd: list[str], log: Path, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    with log.open("a") as handle:
        handle.write("$ %s\n" % " ".join(cmd))
    result = subprocess.run(cmd, cwd=cwd, env=dict(env) if env else None, capture_output=True, text=True)
    with log.open("a") as handle:
        handle.write(result.stdout + result.stderr)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip().splitlines()[-15:]
        raise BundleBuildError(
            "'%s' failed with exit %d (log: %s):\n%s" % (" ".join(cmd), result.returncode, log, "\n".join(tail))
        )
    return result.stdout


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_tree(path: Path) -> str:
    """A digest of a folder's files: their paths and contents."""
    digest = hashlib.sha256()
    for item in sorted(path.rglob("*")):
        if item.is_file():
            digest.update(str(item.relative_to(path)).encode() + b"\0" + sha256_file(item).encode())
    return digest.hexdigest()


def _stamp_matches(stamp: Path, key: str) -> bool:
    return stamp.is_file() and stamp.read_text().strip() == key


def missing_tools() -> list[str]:
    return ["%s (%s)" % (tool, package) for tool, package in TOOLS.items() if shutil.which(tool) is None]


# --- programs -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GoProgram:
    """A program built from a Go module: its name in the bundle, module, version, package, whether it
    needs cgo, and replace directives (<module> => <module> <version>) for dependency versions the
    module proxy refuses."""

    name: str
    module: str
    version: str
    package: str
    cgo: bool = False
    replaces: tuple[str, ...] = ()

    @property
    def folder(self) -> str:
        """The name as a module path and work folder may have it: another release's program
        (coredns@<version>) with a dash for the at sign."""
        return self.name.replace("@", "-")


COREDNS_MODULE = "github.com/coredns/coredns"
# A version flannel requires that the module proxy refuses, replaced by one it serves
# (versions.TENCENTCLOUD_SDK_COMMON says which and why).
_SERVED = versions.TENCENTCLOUD_SDK_COMMON
FLANNEL_REPLACES = ("%s => %s %s" % (_SERVED.source, _SERVED.source, _SERVED.version),)


def go_programs(
    pins: BundlePins,
    kubeadm: Mapping[str, ImageRef],
    cni_images: Iterable[ImageRef],
    charts: contents.ChartPins | None = None,
) -> list[GoProgram]:
    charts = charts or contents.ChartPins()
    coredns = contents.upstream_version(kubeadm["coredns"])
    programs = [GoProgram("coredns", COREDNS_MODULE, coredns, COREDNS_MODULE)]
    for ref in cni_images:
        if ref.name == "flannel":
            module = versions.FLANNEL.source
            # cgo, as flannel's Makefile builds it on amd64 (its UDP backend is C): it runs on the Debian base.
            programs.append(GoProgram("flanneld", module, ref.tag, module, cgo=True, replaces=FLANNEL_REPLACES))
        elif ref.name == "flannel-cni-plugin":
            module, version, package = contents.FLANNEL_CNI_SOURCE
            programs.append(GoProgram("flannel-cni", module, version, package))
    for command in contents.KAI_COMMANDS:
        package = "%s/cmd/%s" % (contents.KAI_MODULE, command)
        cgo = command in contents.KAI_CGO_COMMANDS
        programs.append(GoProgram("kai-" + command, contents.KAI_MODULE, charts.kai_scheduler, package, cgo=cgo))
    for command, module in contents.ETCD_CLIENT_MODULES.items():
        programs.append(GoProgram(command, module, pins.etcd_client, module))
    for commands in contents.TOOLKIT_PACKAGES.values():
        for command in commands:
            package = contents.TOOLKIT_MODULE + "/cmd/" + command
            programs.append(
                GoProgram(command, contents.TOOLKIT_MODULE, pins.nvidia_container_toolkit, package, cgo=True)
            )
    return programs


def wrapper_gomod(program: GoProgram, go_directive: str) -> str:
    """A module that requires ``program``'s module at its pinned version (and repeats the replaces):
    `go install pkg@version` would refuse replace directives, and the proxy does not serve every
    module's version list."""
    lines = ["module clusterproof.local/bundle/%s" % program.folder, "", "go %s" % go_directive, ""]
    lines.append("require %s %s" % (program.module, program.version))
    lines += ["", *("replace %s" % replace for replace in program.replaces)] if program.replaces else []
    return "\n".join(lines) + "\n"


def _build_go_program(layout: Layout, program: GoProgram, progress: Progress) -> Path:
    target = layout.programs / program.name
    stamp = layout.programs / (".%s.version" % program.name)
    key = json.dumps([dataclasses.asdict(program), contents.RECIPE_REVISION], sort_keys=True)
    if target.exists() and _stamp_matches(stamp, key):
        return target
    cold = COLD_BUILD_MINUTES.get(program.name.split("@", 1)[0])
    figure = "; about %d minutes cold on 2 cores" % cold if cold else ""
    progress("building %s %s (go build%s)" % (program.name.split("@", 1)[0], program.version, figure))
    work = layout.work / program.folder
    work.mkdir(parents=True, exist_ok=True)
    module = go_modules.download(program.module, program.version, work)
    upstream = module.go_mod.read_text()
    (work / "go.mod").write_text(wrapper_gomod(program, sandbox_build.go_directive_of(upstream)))
    # The module's own go.sum vouches for its dependencies, some of which the checksum database does
    # not know (KAI's operator requires a gpu-operator commit by pseudo-version).
    upstream_sum = module.dir / "go.sum"
    if upstream_sum.is_file():
        shutil.copyfile(upstream_sum, work / "go.sum")
        (work / "go.sum").chmod(0o644)
    else:
        (work / "go.sum").unlink(missing_ok=True)
    env = go_modules.go_env()
    env["CGO_ENABLED"] = "1" if program.cgo else "0"
    layout.programs.mkdir(parents=True, exist_ok=True)
    _run(
        ["go", "build", "-ldflags", "-s -w", "-o", str(target) + ".tmp", program.package], layout.log, cwd=work, env=env
    )
    os.replace(str(target) + ".tmp", target)
    stamp.write_text(key + "\n")
    return target


def _build_pause(layout: Layout, kubernetes: str, ref: ImageRef, progress: Progress, name: str = "pause") -> Path:
    """Kubernetes' pause, a small C program in its tree (build/pause/linux/pause.c) at release
    ``kubernetes``, built static as its Makefile does, as the program ``name``."""
    target = layout.programs / name
    stamp = layout.programs / (".%s.version" % name)
    module = versions.KUBERNETES.source
    key = "pause %s from %s %s recipe=%s" % (ref.tag, module, kubernetes, contents.RECIPE_REVISION)
    if target.exists() and _stamp_matches(stamp, key):
        return target
    progress("building pause %s (gcc -static, from %s %s)" % (ref.tag, module, kubernetes))
    source = go_modules.download(module, kubernetes).dir / "build/pause/linux/pause.c"
    layout.programs.mkdir(parents=True, exist_ok=True)
    _run(
        [
            "gcc",
            "-Os",
            "-Wall",
            "-Werror",
            "-static",
            "-DVERSION=v%s-clusterproof" % ref.tag,
            "-o",
            str(target) + ".tmp",
            str(source),
        ],
        layout.log,
    )
    os.replace(str(target) + ".tmp", target)
    stamp.write_text(key + "\n")
    return target


def kubernetes_programs(pins: BundlePins, progress: Progress) -> tuple[sandbox_build.BuildPlan, dict[str, Path]]:
    """kubeadm, kubelet, kubectl, the control plane's programs, kube-proxy and etcd, from the sandbox
    cache (built there when missing)."""
    plan = sandbox_build.plan(sandbox_build.SandboxVersions(kubernetes=pins.kubernetes))
    sandbox_build.ensure_built(plan, progress)
    names = (
        sandbox_build.KUBERNETES_COMMANDS + sandbox_build.KUBEADM_COMMANDS + sandbox_build.IMAGE_COMMANDS + ("etcd",)
    )
    return plan, {name: plan.binary(name) for name in names}


def previous_programs(
    pins: BundlePins, progress: Progress
) -> tuple[sandbox_build.ReleasePlan, Mapping[str, ImageRef], dict[str, Path]]:
    """The previous minor's kubeadm, kubelet, kubectl, control plane, kube-proxy and etcd, from
    their own folder of the sandbox cache (built there when missing), under their tagged names
    (contents.release_program); and the images its kubeadm asks for, checked against the pins."""
    release = sandbox_build.release_plan(pins.kubernetes_previous, versions.ETCD_PREVIOUS.version)
    sandbox_build.ensure_built(release, progress)
    kubeadm = contents.kubeadm_images(kubeadm_listing(release.binary("kubeadm"), pins.kubernetes_previous))
    contents.check_previous_images(kubeadm, pins.kubernetes_previous)
    names = sandbox_build.KUBERNETES_COMMANDS + sandbox_build.KUBEADM_COMMANDS + sandbox_build.IMAGE_COMMANDS
    programs = {contents.release_program(name, pins.kubernetes_previous): release.binary(name) for name in names}
    programs[contents.release_program("etcd", kubeadm["etcd"].tag)] = release.binary("etcd")
    return release, kubeadm, programs


def check_etcd(plan: sandbox_build.BuildPlan, kubeadm: Mapping[str, ImageRef]) -> None:
    """The etcd the sandbox builds must be the one kubeadm asks for: its image carries that tag."""
    wanted = contents.upstream_version(kubeadm["etcd"])
    if plan.versions.etcd != wanted:
        raise contents.BundleInputError(
            "etcd: kubeadm %s asks for %s, and the sandbox is pinned to etcd %s; set ETCD in "
            "module_utils/versions.py to %s"
            % (plan.versions.kubernetes, kubeadm["etcd"].ref, plan.versions.etcd, wanted)
        )


# --- Debian: the images' base, and the packages from Debian's mirror ---------------------------


def _debian_key(pins: BundlePins) -> str:
    text = json.dumps(
        {"suite": pins.debian_suite, "base": contents.DEBIAN_BASE_PACKAGES, "recipe": contents.RECIPE_REVISION}
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def debian_base(layout: Layout, pins: BundlePins, progress: Progress) -> tuple[Path, Path]:
    """A minimal Debian root (debootstrap minbase) with iptables, conntrack and CA certificates, for
    the images that need a shell or iptables; and the dpkg status of bare minbase, which says what a
    minimal host already has (the packages step downloads the rest). Returns (root, status)."""
    folder = layout.debian / ("base-%s-%s" % (pins.debian_suite, _debian_key(pins)))
    root, status = folder / "root", folder / "minbase-status"
    if (folder / ".done").exists():
        return root, status
    progress("building the images' Debian base (debootstrap %s minbase, about 2 minutes)" % pins.debian_suite)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    _run(["debootstrap", "--variant=minbase", pins.debian_suite, str(root), DEBIAN_MIRROR], layout.log)
    shutil.copyfile(root / "var/lib/dpkg/status", status)
    _run(
        [
            "chroot",
            str(root),
            "apt-get",
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
            *contents.DEBIAN_BASE_PACKAGES,
        ],
        layout.log,
    )
    _run(["chroot", str(root), "apt-get", "clean"], layout.log)
    shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
    (root / "var/lib/apt/lists/partial").mkdir(parents=True)
    (folder / ".done").write_text("")
    for stale in layout.debian.glob("base-*"):
        if stale != folder:
            shutil.rmtree(stale, ignore_errors=True)
    return root, status


def debian_packages(
    layout: Layout, pins: BundlePins, minbase_status: Path, progress: Progress, packages: tuple[str, ...] = ()
) -> list[Path]:
    """Debian's packages the hosts need (contents.DEBIAN_PACKAGES, or ``packages``) and what they
    depend on that a minimal host lacks, downloaded by apt itself against the status of a bare
    minbase root."""
    packages = packages or contents.DEBIAN_PACKAGES
    key = hashlib.sha256(json.dumps([packages, _debian_key(pins)]).encode()).hexdigest()[:12]
    folder = layout.debian / ("packages-" + key)
    archives = folder / "archives"
    if (folder / ".done").exists():
        return sorted(archives.glob("*.deb"))
    progress("downloading Debian's %s and what they need (apt-get --download-only)" % ", ".join(packages))
    shutil.rmtree(folder, ignore_errors=True)
    (archives / "partial").mkdir(parents=True)
    (folder / "lists/partial").mkdir(parents=True)
    state = folder / "state"
    state.mkdir()
    shutil.copyfile(minbase_status, state / "status")
    options = [
        "-o", "Dir::State=%s" % state,
        "-o", "Dir::State::status=%s" % (state / "status"),
        "-o", "Dir::State::Lists=%s" % (folder / "lists"),
        "-o", "Dir::Cache=%s" % folder,
        "-o", "Dir::Cache::archives=%s" % archives,
        "-o", "Debug::NoLocking=1",
    ]  # fmt: skip
    _run(["apt-get", *options, "update"], layout.log)
    _run(
        ["apt-get", *options, "install", "--download-only", "-y", "-q", "--no-install-recommends", *packages],
        layout.log,
    )
    (folder / ".done").write_text("")
    return sorted(archives.glob("*.deb"))


def debian_program(
    layout: Layout, pins: BundlePins, minbase_status: Path, progress: Progress, package: str, path: str
) -> Path:
    """A program of a Debian package (``package``, or ``name=version``), unpacked from the .deb into
    the cache (the images that hold Debian's build of a program), in a folder named after both: a
    new version unpacks beside the old."""
    name = package.split("=", 1)[0]
    folder = layout.debian / package.replace("=", "_")
    program = folder / "root" / path
    if not program.exists():
        (deb,) = [
            d
            for d in debian_packages(layout, pins, minbase_status, progress, (package,))
            if d.name.startswith(name + "_")
        ]
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "root").mkdir(parents=True)
        _run(["dpkg-deb", "-x", str(deb), str(folder / "root")], layout.log)
    return program


def busybox(layout: Layout, pins: BundlePins, minbase_status: Path, progress: Progress) -> tuple[Path, list[str]]:
    """Debian's static busybox (the helper image of local-path and the storage probes): the program
    and its applets."""
    program = debian_program(layout, pins, minbase_status, progress, "busybox-static", "bin/busybox")
    applets = _run([str(program), "--list"], layout.log).split()
    return program, applets


def prometheus(layout: Layout, pins: BundlePins, minbase_status: Path, progress: Progress) -> Path:
    """Debian's Prometheus at the pin (the monitoring stage's image on a kubeadm site), the very
    package the sandbox runs (monitoring.prometheus_package)."""
    pin = versions.PROMETHEUS
    return debian_program(
        layout, pins, minbase_status, progress, "%s=%s" % (pin.path, pin.package_version), "usr/bin/prometheus"
    )


def kai_sources(layout: Layout, charts: contents.ChartPins, plan: sandbox_build.BuildPlan) -> dict[str, Path]:
    """What KAI's crd-upgrader image holds besides kubectl: the chart's CRDs and its apply script."""
    module = go_modules.download(contents.KAI_MODULE, charts.kai_scheduler).dir
    return {"kai-crds": plan.kai_chart / "crds", "kai-apply-crds": module / "deployments/crd-upgrader/apply-crds.sh"}


# --- the apt repository ---------------------------------------------------------------------------


def _gpg(layout: Layout, *args: str) -> str:
    layout.gnupg.mkdir(mode=0o700, parents=True, exist_ok=True)
    base = [
        "gpg",
        "--homedir",
        str(layout.gnupg),
        "--batch",
        "--quiet",
        "--pinentry-mode",
        "loopback",
        "--passphrase",
        "",
    ]
    return _run([*base, *args], layout.log)


def signing_key(layout: Layout) -> str:
    """The bundle's signing key (made once, kept in the cache: the private half never goes into the
    bundle); returns its fingerprint. The gpg-agent that listing the secret keys starts is stopped."""
    try:
        listing = _gpg(layout, "--with-colons", "--list-secret-keys")
        if "fpr:" not in listing:
            _gpg(layout, "--quick-generate-key", KEY_UID, "ed25519", "sign", "never")
            listing = _gpg(layout, "--with-colons", "--list-secret-keys")
    finally:
        stop_gpg_agent(layout)
    return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))


def stop_gpg_agent(layout: Layout) -> None:
    """Stop the gpg-agent that gpg starts for the bundle key's home (it would outlive the build, a
    daemon nobody asked for); nothing when none runs. gpgconf asks the agent to go; on a loaded
    machine it is still exiting when gpgconf returns, so wait (a few seconds at most) until no
    agent of that home is left."""
    try:
        subprocess.run(
            ["gpgconf", "--homedir", str(layout.gnupg), "--kill", "gpg-agent"], capture_output=True, check=False
        )
    except OSError:
        return  # no gpgconf: no gpg either, so no agent
    wait_until(lambda: gpg_agents(layout.gnupg), lambda found: not found, timeout=5, interval=0.1)


def gpg_agents(home: Path) -> list[int]:
    """The gpg-agent processes serving the GnuPG home ``home`` (their pids), read from /proc."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # ended meanwhile
        if argv[0].endswith(b"gpg-agent") and str(home).encode() in argv:
            found.append(int(cmdline.parent.name))
    return found


def _staged(staging: Path, destination: str) -> Path:
    """Where ``destination`` (a path on the host the package or image lands on) goes under
    ``staging``, its folder made."""
    path = staging / destination.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _stage_programs(staging: Path, files: Iterable[tuple[str, str]], programs: Mapping[str, Path]) -> None:
    """Each program of ``files`` (its name in ``programs``, its destination) copied under ``staging``,
    executable."""
    for name, destination in files:
        path = _staged(staging, destination)
        shutil.copyfile(programs[name], path)
        path.chmod(0o755)


def build_package(layout: Layout, spec: contents.PackageSpec, programs: Mapping[str, Path], progress: Progress) -> Path:
    inputs = {name: sha256_file(programs[name]) for name, _ in spec.files}
    key = spec.recipe(inputs)
    folder = layout.work / "debs"
    deb, stamp = folder / spec.filename, folder / (".%s.recipe" % spec.filename)
    if deb.exists() and _stamp_matches(stamp, key):
        return deb
    progress("packaging %s %s" % (spec.name, spec.version))
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as staging_name:
        staging = Path(staging_name)
        (staging / "DEBIAN").mkdir()
        (staging / "DEBIAN/control").write_text(
            contents.deb_control(spec.name, spec.version, spec.description, spec.depends)
        )
        _stage_programs(staging, spec.files, programs)
        for destination, text in spec.texts:
            path = _staged(staging, destination)
            path.write_text(text)
            path.chmod(0o644)
        staging.chmod(0o755)
        _run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(staging), str(deb)], layout.log)
    stamp.write_text(key + "\n")
    return deb


def apt_repository(layout: Layout, debs: Iterable[Path], progress: Progress) -> list[dict[str, str]]:
    """The flat, signed repository (``Suites: /``, as upstream's Kubernetes repository is laid out):
    the .debs, Packages, Release signed inline (InRelease) and detached (Release.gpg), key.asc.
    No gpg-agent is left running: the one gpg starts to sign is stopped when signing ends, however
    it ends."""
    try:
        return _signed_apt_repository(layout, debs, progress)
    finally:
        stop_gpg_agent(layout)


def _signed_apt_repository(layout: Layout, debs: Iterable[Path], progress: Progress) -> list[dict[str, str]]:
    debs = sorted(debs, key=lambda path: path.name)
    entries = [{"file": deb.name, "sha256": sha256_file(deb)} for deb in debs]
    key = hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()
    stamp = layout.apt / ".index.recipe"
    fingerprint = signing_key(layout)
    if not _stamp_matches(stamp, key + fingerprint):
        progress("writing the apt repository (%d packages) and signing it" % len(debs))
        layout.apt.mkdir(parents=True, exist_ok=True)
        wanted = {deb.name for deb in debs}
        for stale in layout.apt.glob("*.deb"):
            if stale.name not in wanted:
                stale.unlink()
        for deb in debs:
            target = layout.apt / deb.name
            if not target.exists() or sha256_file(target) != sha256_file(deb):
                shutil.copyfile(deb, target)
        packages = _run(["apt-ftparchive", "packages", "."], layout.log, cwd=layout.apt)
        (layout.apt / "Packages").write_text(packages)
        _run(["gzip", "-kf9n", "Packages"], layout.log, cwd=layout.apt)
        release = _run(
            [
                "apt-ftparchive",
                "-o",
                "APT::FTPArchive::Release::Origin=clusterproof",
                "-o",
                "APT::FTPArchive::Release::Label=clusterproof bundle",
                "release",
                ".",
            ],
            layout.log,
            cwd=layout.apt,
        )
        for name in ("Release", "InRelease", "Release.gpg"):
            (layout.apt / name).unlink(missing_ok=True)
        (layout.apt / "Release").write_text(release)
        _gpg(
            layout,
            "--local-user",
            fingerprint,
            "--clearsign",
            "--output",
            str(layout.apt / "InRelease"),
            str(layout.apt / "Release"),
        )
        _gpg(
            layout,
            "--local-user",
            fingerprint,
            "--armor",
            "--detach-sign",
            "--output",
            str(layout.apt / "Release.gpg"),
            str(layout.apt / "Release"),
        )
        (layout.apt / "key.asc").write_text(_gpg(layout, "--armor", "--export", fingerprint))
        stamp.write_text(key + fingerprint + "\n")
    packages = []
    for deb, entry in zip(debs, entries, strict=True):
        fields = _run(["dpkg-deb", "--show", "--showformat", "${Package}\t${Version}", str(deb)], layout.log).split(
            "\t"
        )
        packages.append({"name": fields[0], "version": fields[1], **entry})
    return packages


# --- images and the registry ----------------------------------------------------------------------


def _tag(ref: ImageRef) -> str:
    return "%s_%s" % (ref.mirror_repository.replace("/", "_"), ref.tag)


def build_image(
    layout: Layout, spec: ImageSpec, programs: Mapping[str, Path], base_root: Path, progress: Progress
) -> str:
    """The image in the OCI layout of the cache, tagged <repository>_<tag>; returns that tag."""
    inputs = {name: sha256_file(programs[name]) for name, _ in spec.files}
    inputs.update({name: sha256_tree(programs[name]) for name, _ in spec.trees})
    if spec.base == "debian":
        inputs["debian-base"] = base_root.parent.name
    key = spec.recipe(inputs)
    tag = _tag(spec.ref)
    stamp = layout.oci / (".%s.recipe" % tag)
    if _stamp_matches(stamp, key):
        return tag
    progress("making image %s (umoci)" % spec.ref.ref)
    if not (layout.oci / "index.json").exists():
        _run(["umoci", "init", "--layout", str(layout.oci)], layout.log)
    image = "%s:%s" % (layout.oci, tag)
    _run(["umoci", "new", "--image", image], layout.log)
    if spec.base == "debian":
        _run(["umoci", "insert", "--image", image, str(base_root), "/"], layout.log)
    with tempfile.TemporaryDirectory(dir=layout.cache) as staging_name:
        staging = Path(staging_name)
        _stage_programs(staging, spec.files, programs)
        for name, destination in spec.trees:
            shutil.copytree(programs[name], staging / destination.lstrip("/"))
        for link, target in spec.links:
            _staged(staging, link).symlink_to(target)
        if spec.files or spec.trees or spec.links:
            # One layer with everything the image adds, inserted at the root.
            _run(["umoci", "insert", "--image", image, str(staging), "/"], layout.log)
    config = [
        "umoci",
        "config",
        "--image",
        image,
        "--os",
        "linux",
        "--architecture",
        "amd64",
        "--config.env",
        "PATH=" + spec.env_path,
    ]
    config += ["--config.entrypoint=" + part for part in spec.entrypoint]
    config += ["--config.cmd=" + part for part in spec.cmd]
    if spec.user:
        config += ["--config.user", spec.user]
    if spec.workdir:
        config += ["--config.workingdir", spec.workdir]
    _run(config, layout.log)
    _run(["umoci", "gc", "--layout", str(layout.oci)], layout.log)
    stamp.write_text(key + "\n")
    return tag


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LoopbackRegistry:
    """docker-registry on a free loopback port over the bundle's storage, for the time of the copy."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LoopbackRegistry:
        self.layout.registry.mkdir(parents=True, exist_ok=True)
        config = self.layout.cache / "registry-build.yml"
        config.write_text(registry_config(self.layout.registry, "127.0.0.1:%d" % self.port, read_only=False))
        log = (self.layout.cache / "registry-build.log").open("ab")
        process = self.process = subprocess.Popen(
            ["docker-registry", "serve", str(config)], stdout=log, stderr=log, start_new_session=True
        )

        def up() -> str:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return "listening"
            except OSError:
                return "starting" if process.poll() is None else "exited"

        if wait_until(up, lambda seen: seen != "starting", timeout=20, interval=0.2).value == "listening":
            return self
        self.__exit__(None, None, None)
        raise BundleBuildError(
            "docker-registry did not start on 127.0.0.1:%d (log: %s)"
            % (self.port, self.layout.cache / "registry-build.log")
        )

    def __exit__(self, *_: object) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def digest(self, ref: ImageRef) -> str | None:
        """The manifest digest the registry holds for ``ref``, or None."""
        url = "docker://127.0.0.1:%d/%s:%s" % (self.port, ref.mirror_repository, ref.tag)
        result = subprocess.run(["skopeo", "inspect", "--tls-verify=false", "--raw", url], capture_output=True)
        if result.returncode != 0:
            return None
        return "sha256:" + hashlib.sha256(result.stdout).hexdigest()

    def push(self, tag: str, ref: ImageRef) -> str:
        digest_file = self.layout.cache / "digest"
        url = "docker://127.0.0.1:%d/%s:%s" % (self.port, ref.mirror_repository, ref.tag)
        _run(
            [
                "skopeo",
                "copy",
                "--quiet",
                "--dest-tls-verify=false",
                "--digestfile",
                str(digest_file),
                "oci:%s:%s" % (self.layout.oci, tag),
                url,
            ],
            self.layout.log,
        )
        return digest_file.read_text().strip()


def oci_digest(layout: Layout, tag: str) -> str:
    """The manifest digest of ``tag`` in the cache's OCI layout."""
    index = json.loads((layout.oci / "index.json").read_text())
    for manifest in index["manifests"]:
        if manifest.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
            return str(manifest["digest"])
    raise BundleBuildError("the OCI layout %s has no image tagged %s" % (layout.oci, tag))


# --- the whole build ------------------------------------------------------------------------------


def chart_sources(plan: sandbox_build.BuildPlan, charts: contents.ChartPins) -> dict[str, Path]:
    """The charts a site installs its engines and storage from, as the roles take them: KAI's and
    Kueue's from the sandbox cache (copied out of their modules), local-path's from its module."""
    local_path = go_modules.download(sandbox_build.LOCAL_PATH_MODULE, charts.local_path_provisioner).dir
    return {
        "kai-scheduler": plan.kai_chart,
        "kueue": plan.share_dir / "kueue" / "chart",
        "local-path-provisioner": local_path / "deploy/chart/local-path-provisioner",
    }


def package_charts(
    layout: Layout,
    plan: sandbox_build.BuildPlan,
    sources: Mapping[str, Path],
    charts: contents.ChartPins,
    progress: Progress,
) -> list[dict[str, str]]:
    """Each chart packaged (helm package) into the bundle's charts/; KAI's module carries its chart
    at version 0.0.0, so it is stamped with the pinned version as KAI's release does."""
    folder = layout.out / "charts"
    folder.mkdir(parents=True, exist_ok=True)
    stamped = {"kai-scheduler": charts.kai_scheduler}
    entries = []
    for name, source in sources.items():
        key = sha256_tree(source) + stamped.get(name, "")
        stamp = folder / (".%s.recipe" % name)
        record = folder / (".%s.file" % name)
        if not (_stamp_matches(stamp, key) and record.is_file() and (folder / record.read_text().strip()).is_file()):
            progress("packaging the %s chart (helm package)" % name)
            command = [str(plan.binary("helm")), "package", str(source), "--destination", str(folder)]
            if name in stamped:
                command += ["--version", stamped[name].lstrip("v"), "--app-version", stamped[name]]
            said = _run(command, layout.log)
            packaged = Path(said.strip().rsplit(": ", 1)[-1])
            record.write_text(packaged.name + "\n")
            stamp.write_text(key + "\n")
        file = folder / record.read_text().strip()
        version = stamped.get(name) or str(yaml.safe_load((source / "Chart.yaml").read_text())["version"])
        entries.append({"name": name, "version": version, "file": "charts/" + file.name, "sha256": sha256_file(file)})
    return entries


def cni_images(pins: BundlePins) -> list[ImageRef]:
    documents = [
        doc for doc in yaml.safe_load_all(kubernetes_cni.manifest_file(pins.cni, pins.cni_version).read_text()) if doc
    ]
    return contents.manifest_images(documents)


def kubeadm_listing(kubeadm: Path, kubernetes: str) -> str:
    result = subprocess.run(
        [str(kubeadm), "config", "images", "list", "--kubernetes-version", kubernetes],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise BundleBuildError("kubeadm config images list failed: %s" % result.stderr.strip())
    return result.stdout


@dataclasses.dataclass(frozen=True)
class Contents:
    """What a build makes, worked out from the pins and kubeadm's listings (no I/O): the Go programs,
    the pause programs (<program name>, <Kubernetes release>, <image>), the packages and the images."""

    programs: tuple[GoProgram, ...]
    pauses: tuple[tuple[str, str, ImageRef], ...]
    packages: tuple[contents.PackageSpec, ...]
    images: tuple[ImageSpec, ...]


def planned(
    pins: BundlePins,
    kubeadm: Mapping[str, ImageRef],
    previous: Mapping[str, ImageRef] | None,
    cni: Iterable[ImageRef],
    charts: contents.ChartPins,
    busybox_applets: Iterable[str] = (),
) -> Contents:
    """The bundle's contents for the pinned release's kubeadm images (``kubeadm``), the previous
    minor's (``previous``; None: the bundle carries no previous minor), and the CNI's images. The
    previous minor adds its CoreDNS and pause where they are not the pinned one's, its packages,
    and its images."""
    cni = list(cni)
    programs = go_programs(pins, kubeadm, cni, charts)
    pauses = [("pause", pins.kubernetes, kubeadm["pause"])]
    images = contents.image_specs(kubeadm, cni, pins.debian_suite)
    if previous is not None:
        if previous["coredns"].ref != kubeadm["coredns"].ref:
            version = contents.upstream_version(previous["coredns"])
            name = contents.release_program("coredns", previous["coredns"].tag)
            programs.insert(1, GoProgram(name, COREDNS_MODULE, version, COREDNS_MODULE))
        if previous["pause"].ref != kubeadm["pause"].ref:
            name = contents.release_program("pause", previous["pause"].tag)
            pauses.append((name, pins.kubernetes_previous, previous["pause"]))
        images += contents.previous_image_specs(previous, kubeadm)
    images += contents.chart_image_specs(charts, busybox_applets)
    images += contents.monitoring_image_specs()
    return Contents(tuple(programs), tuple(pauses), tuple(contents.package_specs(pins, charts)), tuple(images))


def manifest_of(
    pins: BundlePins,
    fingerprint: str,
    packages: list[dict[str, str]],
    images: list[dict[str, str]],
    charts: list[dict[str, str]],
) -> dict[str, Any]:
    """manifest.json: the pins, every Kubernetes release the bundle carries, the repository's key,
    and every package, image and chart."""
    return {
        "schema": MANIFEST_SCHEMA,
        "kubernetes": pins.kubernetes,
        # Every release the bundle carries, packages and images: the pinned one, then the previous minor.
        "kubernetes_versions": list(pins.kubernetes_versions),
        "pins": dataclasses.asdict(pins),
        "apt": {"path": "apt", "suite": "/", "key": "apt/key.asc", "fingerprint": fingerprint},
        "registry": {"path": "registry", "mirrors": list(contents.MIRRORED_REGISTRIES)},
        "packages": packages,
        "images": images,
        "charts": charts,
    }


def build(layout: Layout, pins: BundlePins | None = None, progress: Progress = print) -> dict[str, Any]:
    """Make (or bring up to date) the bundle in ``layout.out``; returns its manifest. One build at a
    time per cache: a second (two labs' tests starting side by side) waits for the first, then finds
    everything made."""
    pins = pins or BundlePins()
    missing = missing_tools()
    if missing:
        raise BundleBuildError("the bundle build needs: %s (apt-get install the packages named)" % ", ".join(missing))
    layout.cache.mkdir(parents=True, exist_ok=True)
    with (layout.cache / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(layout, pins, progress)


def _build(layout: Layout, pins: BundlePins, progress: Progress) -> dict[str, Any]:
    started = time.monotonic()
    layout.out.mkdir(parents=True, exist_ok=True)
    progress("bundle %s (cache %s, log %s)" % (layout.out, layout.cache, layout.log))

    charts = contents.ChartPins()
    plan, programs = kubernetes_programs(pins, progress)
    kubeadm = contents.kubeadm_images(kubeadm_listing(plan.binary("kubeadm"), pins.kubernetes))
    check_etcd(plan, kubeadm)
    contents.check_etcd_client(pins, kubeadm)
    previous = None
    if pins.kubernetes_previous:
        _, previous, release_programs = previous_programs(pins, progress)
        programs.update(release_programs)
    cni = cni_images(pins)
    base_root, minbase_status = debian_base(layout, pins, progress)
    programs["busybox"], applets = busybox(layout, pins, minbase_status, progress)
    programs["prometheus"] = prometheus(layout, pins, minbase_status, progress)
    made = planned(pins, kubeadm, previous, cni, charts, applets)
    for program in made.programs:
        programs[program.name] = _build_go_program(layout, program, progress)
    for name, kubernetes, ref in made.pauses:
        programs[name] = _build_pause(layout, kubernetes, ref, progress, name)
    for name in ("kueue", "local-path-provisioner", "helm", "kube-state-metrics"):
        programs[name] = plan.binary(name)
    programs.update(kai_sources(layout, charts, plan))

    debs = [build_package(layout, spec, programs, progress) for spec in made.packages]
    debs += debian_packages(layout, pins, minbase_status, progress)
    packages = apt_repository(layout, debs, progress)
    chart_files = package_charts(layout, plan, chart_sources(plan, charts), charts, progress)

    specs = list(made.images)
    tags = {spec.ref.ref: build_image(layout, spec, programs, base_root, progress) for spec in specs}
    images = []
    pushed = False
    with LoopbackRegistry(layout) as registry:
        for spec in specs:
            tag = tags[spec.ref.ref]
            wanted = oci_digest(layout, tag)
            held = registry.digest(spec.ref)
            if held != wanted:
                progress("copying %s into the registry (skopeo)" % spec.ref.ref)
                held = registry.push(tag, spec.ref)
                pushed = True
            images.append(
                {
                    "ref": spec.ref.ref,
                    "repository": spec.ref.mirror_repository,
                    "tag": spec.ref.tag,
                    "digest": held,
                    "base": spec.base,
                }
            )

    if pushed:
        # A rebuilt image leaves its old manifest and layers behind: the bundle keeps only what its
        # tags name (the registry is stopped; garbage-collect works on the storage alone).
        progress("removing what no tag names from the registry (docker-registry garbage-collect)")
        _run(
            ["docker-registry", "garbage-collect", "--delete-untagged", str(layout.cache / "registry-build.yml")],
            layout.log,
        )
    manifest = manifest_of(pins, signing_key(layout), packages, images, chart_files)
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    if not layout.manifest.exists() or layout.manifest.read_text() != text:
        layout.manifest.write_text(text)
    progress(
        "bundle ready in %.0f s: %d packages, %d images, %d charts (%s)"
        % (time.monotonic() - started, len(packages), len(images), len(chart_files), layout.manifest)
    )
    return manifest


def main(argv: list[str]) -> int:
    def progress(message: str) -> None:
        print("[bundle %s] %s" % (time.strftime("%H:%M:%S"), message), flush=True)

    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else default_cache() / "out"
    try:
        build(Layout(default_cache(), out.resolve()), progress=progress)
    except (BundleBuildError, contents.BundleInputError, go_modules.GoModuleError) as error:
        print("bundle build failed: %s" % error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
