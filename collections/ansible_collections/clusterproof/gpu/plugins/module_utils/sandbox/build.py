"""Build the sandbox's control-plane binaries from their Go modules into a per-machine cache.

The sandbox runs a real etcd, kube-apiserver, kube-controller-manager and kube-scheduler, plus
KWOK for the simulated nodes. None of them ship as packages these machines can install, but all
of them are Go modules, so they are built here once, keyed by the pinned versions, and reused.

What it touches: the cache directory (default ``~/.cache/clusterproof/sandbox``) and the Go
module and build caches. It never touches the repository.

The cache is incremental per binary: each binary sits next to a stamp naming the version it was
built from, so a new pin (or a new binary) rebuilds just what it concerns. The directory is keyed
by the Go toolchain and the build recipe, which change every binary.

``k8s.io/kubernetes`` cannot be ``go install``ed: its go.mod replaces every staging module with a
path inside its own tree. So the build uses a small wrapper module that requires it and replaces
each staging module with its published ``v0.<minor>.<patch>`` version; the replace list is
generated from the downloaded go.mod, never typed by hand.

The offline bundle also carries the previous Kubernetes minor (``versions.KUBERNETES_PREVIOUS``):
``release_plan`` builds that release's commands and the etcd its kubeadm asks for into
``kubernetes/<version>/bin`` under the same cache key, stamped the same way, beside the sandbox's
binaries and never in their place. The sandbox itself runs the pinned version only.

Run as a program for a build with progress on standard output (``--previous``: the previous
minor's commands)::

    python -m ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.build [--previous]
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.fields import Below
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import go_modules

# Bump when the way binaries are built changes, so old caches are not reused.
RECIPE_REVISION = "2"


@dataclasses.dataclass(frozen=True)
class SandboxVersions:
    """The versions the sandbox is built from: by default the pins (module_utils/versions.py, which
    says why each is the one it is). The fields' order is versions.json's."""

    kubernetes: str = versions.KUBERNETES.version
    etcd: str = versions.ETCD.version
    kwok: str = versions.KWOK.version
    kai_scheduler: str = versions.KAI_SCHEDULER.version
    helm: str = versions.HELM.version
    kueue: str = versions.KUEUE.version
    local_path_provisioner: str = versions.LOCAL_PATH_PROVISIONER.version
    koordinator: str = versions.KOORDINATOR.version
    kube_state_metrics: str = versions.KUBE_STATE_METRICS.version

    def version_of(self, binary: str) -> str:
        """The pinned version ``binary`` is built from (its component's version)."""
        return getattr(self, COMPONENT_OF[binary])


def cache_key(go_version: str) -> str:
    """The cache directory's name: what every binary depends on (the toolchain, the recipe)."""
    text = json.dumps({"go": go_version, "recipe": RECIPE_REVISION}, sort_keys=True)
    return f"{go_version}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
# Not run by the sandbox: kubeadm checks the configuration mode kubeadm renders (kubeadm config
# validate), and the three are packaged into the .debs of the kubernetes_packages role's molecule mirror.
KUBEADM_COMMANDS = ("kubeadm", "kubelet", "kubectl")
# Not run by the sandbox either: kube-proxy goes into the offline bundle's image (bundle.build).
IMAGE_COMMANDS = ("kube-proxy",)
KUBERNETES_MODULE = versions.KUBERNETES.source
KWOK_MODULE = versions.KWOK.source
HELM_MODULE = versions.HELM.source
KAI_MODULE = versions.KAI_SCHEDULER.source
# KAI scheduler's components the sandbox runs, as <binary name>: <command package>. Its admission
# webhooks, pod-group controller and operator are not run (module_utils/scheduler/kai.py says why): the
# sandbox starts the components itself, as the operator would on a cluster.
KAI_COMMANDS = {
    "kai-scheduler": "cmd/scheduler",
    "kai-binder": "cmd/binder",
    "kai-podgrouper": "cmd/podgrouper",
    "kai-queuecontroller": "cmd/queuecontroller",
}
# Helm renders and installs charts (KAI scheduler's travels inside its Go module) on real clusters.
ALL_BINARIES = (
    ("etcd",)
    + KUBERNETES_COMMANDS
    + KUBEADM_COMMANDS
    + IMAGE_COMMANDS
    + ("kwok",)
    + tuple(KAI_COMMANDS)
    + ("helm", "local-path-provisioner")
    + ("kueue",)
    + ("koord-scheduler",)
    + ("kube-state-metrics",)
)
# Each binary's component, a field of SandboxVersions: its pin is the binary's stamp.
COMPONENT_OF = {
    "etcd": "etcd",
    **{command: "kubernetes" for command in KUBERNETES_COMMANDS + KUBEADM_COMMANDS + IMAGE_COMMANDS},
    "kwok": "kwok",
    **{binary: "kai_scheduler" for binary in KAI_COMMANDS},
    "helm": "helm",
    "kueue": "kueue",
    "local-path-provisioner": "local_path_provisioner",
    "koord-scheduler": "koordinator",
    "kube-state-metrics": "kube_state_metrics",
}
# KAI's Helm chart, copied next to the binaries: its CRDs and priority classes are what the sandbox
# applies, and the whole chart is what a real cluster is installed from.
KAI_CHART = "deployments/kai-scheduler"
# How the chart shows in the list of missing items.
KAI_CHART_ITEM = "kai-scheduler chart"
KUEUE_MODULE = versions.KUEUE.source
# Kueue's chart (real clusters), and the CRDs and webhook registrations the sandbox applies, as
# <folder under share/kueue>: <folder in Kueue's module>.
KUEUE_MANIFESTS = {
    "chart": "charts/kueue",
    "crds": "config/components/crd/bases",
    "webhook": "config/components/webhook",
}
KUEUE_MANIFESTS_ITEM = "kueue manifests"

LOCAL_PATH_MODULE = versions.LOCAL_PATH_PROVISIONER.source

KOORDINATOR_MODULE = versions.KOORDINATOR.source
# kube-state-metrics: the monitoring stage's view of nodes and pods (node allocatable and conditions),
# run by the sandbox's monitoring beside Prometheus (main package at the module root).
KUBE_STATE_METRICS_MODULE = versions.KUBE_STATE_METRICS.source
# Koordinator's CRDs (ElasticQuota among them), which koord-scheduler's informers need, copied to
# share/koordinator/crds.
KOORDINATOR_CRDS = "config/crd/bases"
KOORDINATOR_CRDS_ITEM = "koordinator CRDs"

# What the build copies out of modules into share/, as <missing item>: (<folder>, <component>).
SHARE_ITEMS = {
    KAI_CHART_ITEM: ("kai-scheduler", "kai_scheduler"),
    KUEUE_MANIFESTS_ITEM: ("kueue", "kueue"),
    KOORDINATOR_CRDS_ITEM: ("koordinator", "koordinator"),
}

_STAGING_REPLACE = re.compile(r"^\s*(?:replace\s+)?(k8s\.io/[\w.-]+)\s+=>\s+\./staging/src/\1\s*$")


def default_cache_root() -> Path:
    env = os.environ.get("CLUSTERPROOF_CACHE")
    if env:
        return Path(env).expanduser() / "sandbox"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "clusterproof" / "sandbox"


def staging_modules(kubernetes_gomod: str) -> list[str]:
    """Return the staging module paths that k8s.io/kubernetes's go.mod replaces locally."""
    modules = []
    for line in kubernetes_gomod.splitlines():
        match = _STAGING_REPLACE.match(line)
        if match:
            modules.append(match.group(1))
    if not modules:
        raise ValueError("no './staging/src/k8s.io/...' replace directives found in k8s.io/kubernetes go.mod")
    return sorted(set(modules))


def staging_version(kubernetes_version: str) -> str:
    """k8s.io/kubernetes v1.M.P publishes its staging modules as v0.M.P."""
    match = re.fullmatch(r"v1\.(\d+)\.(\d+)", kubernetes_version)
    if not match:
        raise ValueError(f"kubernetes version: expected v1.<minor>.<patch>, found {kubernetes_version!r}")
    return "v0.{}.{}".format(*match.groups())


def kubernetes_wrapper_gomod(kubernetes_version: str, kubernetes_gomod: str, go_directive: str) -> str:
    """The go.mod of the wrapper module that builds k8s.io/kubernetes commands."""
    published = staging_version(kubernetes_version)
    lines = [
        "module clusterproof.local/sandbox/kubernetes",
        "",
        f"go {go_directive}",
        "",
        f"require {KUBERNETES_MODULE} {kubernetes_version}",
        "",
        "replace (",
    ]
    lines += [f"\t{module} => {module} {published}" for module in staging_modules(kubernetes_gomod)]
    lines.append(")")
    return "\n".join(lines) + "\n"


def module_replaces(gomod: str) -> list[str]:
    """A go.mod's replace directives that name a module version (``old [v] => new v``), one per line,
    from its ``replace (...)`` blocks and single ``replace`` lines; local-path replacements (``=> ./x``)
    cannot travel into another module and are refused."""
    replaces, in_block = [], False
    for raw in gomod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if in_block and line == ")":
            in_block = False
            continue
        if line == "replace (":
            in_block = True
            continue
        if line.startswith("replace "):
            line = line[len("replace ") :].strip()
        elif not in_block:
            continue
        if "=>" not in line:
            continue
        target = line.split("=>", 1)[1].split()
        if len(target) != 2:
            raise ValueError("go.mod replaces with a local path, which a wrapper module cannot use: %r" % raw.strip())
        replaces.append(" ".join(line.split()))
    return replaces


def replacing_wrapper_gomod(name: str, module: str, version: str, upstream_gomod: str) -> str:
    """The go.mod of a wrapper module that builds ``module``'s commands at ``version`` with the
    replace directives of its own go.mod (which Go ignores in a dependency), generated from it."""
    lines = [
        "module clusterproof.local/sandbox/%s" % name,
        "",
        "go %s" % go_directive_of(upstream_gomod),
        "",
        "require %s %s" % (module, version),
    ]
    replaces = module_replaces(upstream_gomod)
    if replaces:
        lines += ["", "replace ("] + ["\t" + replace for replace in replaces] + [")"]
    return "\n".join(lines) + "\n"


def go_directive_of(gomod: str) -> str:
    match = re.search(r"^go\s+(\S+)\s*$", gomod, re.MULTILINE)
    if not match:
        raise ValueError("go.mod has no 'go' directive")
    return match.group(1)


def kubernetes_version_ldflags(kubernetes_version: str, build_date: str) -> str:
    """-X flags that stamp the real version, as the Kubernetes release build does."""
    major, minor = re.fullmatch(r"v(\d+)\.(\d+)\.\d+", kubernetes_version).groups()
    package = "k8s.io/component-base/version"
    values = {
        "gitVersion": kubernetes_version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": build_date,
    }
    flags = " ".join(f"-X {package}.{name}={value}" for name, value in values.items())
    return "-s -w " + flags


ETCD_MAIN = """package main

// The etcd server's own entry point, so that the server module's published version is built.
import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
\tetcdmain.Main(os.Args)
}
"""


@dataclasses.dataclass
class BuildPlan:
    versions: SandboxVersions
    cache_root: Path
    go_version: str

    @property
    def key_dir(self) -> Path:
        return self.cache_root / cache_key(self.go_version)

    bin_dir = Below("key_dir", "bin")
    src_dir = Below("key_dir", "src")
    share_dir = Below("key_dir", "share")
    kai_chart = Below("share_dir", "kai-scheduler", "chart")

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    def stamp(self, name: str) -> Path:
        return self.bin_dir / f".{name}.version"

    def is_current(self, name: str) -> bool:
        """``name`` is built, from the version pinned now."""
        stamp = self.stamp(name)
        return (
            os.access(self.binary(name), os.X_OK)
            and stamp.is_file()
            and stamp.read_text().strip() == self.versions.version_of(name)
        )

    def build_target(self, name: str) -> Path:
        """Where ``go build`` writes ``name`` before ``install`` moves it into place: a name of this
        process's own, so that two builds at once (``./clusterproof build`` beside ``./clusterproof
        bundle``, which builds the sandbox's binaries too) never move each other's file away."""
        return self.bin_dir / f".{name}.{os.getpid()}.tmp"

    def install(self, built: Path, name: str) -> None:
        """Move a freshly built binary into place and stamp it with its version."""
        built.rename(self.binary(name))
        self.stamp(name).write_text(self.versions.version_of(name) + "\n")

    def share_current(self, folder: str, component: str) -> bool:
        """``share/<folder>`` was copied from the pinned version of ``component`` (its stamp is
        written last, after the copy)."""
        stamp = self.share_dir / folder / ".version"
        return stamp.is_file() and stamp.read_text().strip() == getattr(self.versions, component)

    def record(self) -> dict[str, str]:
        """What versions.json says the folder was built from."""
        return {**dataclasses.asdict(self.versions), "go": self.go_version}

    def missing(self) -> list[str]:
        missing = [name for name in ALL_BINARIES if not self.is_current(name)]
        missing += [
            item for item, (folder, component) in SHARE_ITEMS.items() if not self.share_current(folder, component)
        ]
        return missing


# What another Kubernetes release's folder holds (release_plan): the commands the offline bundle
# packages or makes images of, and the etcd its kubeadm asks for.
RELEASE_BINARIES = KUBERNETES_COMMANDS + KUBEADM_COMMANDS + IMAGE_COMMANDS + ("etcd",)


@dataclasses.dataclass
class ReleasePlan(BuildPlan):
    """The commands of a Kubernetes release other than the sandbox's (the bundle's previous minor,
    versions.KUBERNETES_PREVIOUS), in a folder of their own under the same cache key
    (``kubernetes/<version>/bin``), each stamped with its version like the sandbox's: building
    them never touches the pinned version's binaries. The sandbox does not run them."""

    @property
    def key_dir(self) -> Path:
        return self.cache_root / cache_key(self.go_version) / "kubernetes" / self.versions.kubernetes

    def missing(self) -> list[str]:
        return [name for name in RELEASE_BINARIES if not self.is_current(name)]

    def record(self) -> dict[str, str]:
        return {"kubernetes": self.versions.kubernetes, "etcd": self.versions.etcd, "go": self.go_version}


def go_version() -> str:
    out = subprocess.run(["go", "env", "GOVERSION"], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def plan(versions: SandboxVersions | None = None, cache_root: Path | None = None) -> BuildPlan:
    return BuildPlan(versions or SandboxVersions(), cache_root or default_cache_root(), go_version())


def release_plan(kubernetes: str, etcd: str, cache_root: Path | None = None) -> ReleasePlan:
    """The plan of Kubernetes ``kubernetes``'s commands and etcd ``etcd`` in a folder of their own
    (ReleasePlan); ``ensure_built`` builds what it misses."""
    staging_version(kubernetes)  # a v1.<minor>.<patch> version, or a ValueError naming what was found
    return ReleasePlan(
        SandboxVersions(kubernetes=kubernetes, etcd=etcd), cache_root or default_cache_root(), go_version()
    )


Progress = Callable[[str], None]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
    with log.open("a") as handle:
        handle.write("$ {}\n".format(" ".join(cmd)))
        handle.flush()
        result = subprocess.run(cmd, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-30:])
        raise RuntimeError(
            "'%s' failed with exit %d; last lines of %s:\n%s" % (" ".join(cmd), result.returncode, log, tail)
        )


def _download_gomod(module: str, version: str, cwd: Path) -> str:
    return go_modules.download(module, version, cwd).go_mod.read_text()


def _build_kubernetes(plan_: BuildPlan, log: Path, progress: Progress, wanted: Iterable[str]) -> None:
    version = plan_.versions.kubernetes
    work = plan_.src_dir / "kubernetes"
    work.mkdir(parents=True, exist_ok=True)
    env = go_modules.go_env()
    progress(f"downloading {KUBERNETES_MODULE} {version} go.mod")
    upstream = _download_gomod(KUBERNETES_MODULE, version, work)
    gomod = kubernetes_wrapper_gomod(version, upstream, go_directive_of(upstream))
    (work / "go.mod").write_text(gomod)
    build_date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ldflags = kubernetes_version_ldflags(version, build_date)
    for command in wanted:
        progress(f"building {command} {version} (go build; the first build on 2 cores takes many minutes)")
        out = plan_.build_target(command)
        package = KUBERNETES_MODULE + "/cmd/" + command
        _run(["go", "build", "-ldflags", ldflags, "-o", str(out), package], work, env, log)
        plan_.install(out, command)


def _build_etcd(plan_: BuildPlan, log: Path, progress: Progress) -> None:
    version = plan_.versions.etcd
    work = plan_.src_dir / "etcd"
    work.mkdir(parents=True, exist_ok=True)
    env = go_modules.go_env()
    (work / "go.mod").write_text(
        f"module clusterproof.local/sandbox/etcd\n\ngo 1.24\n\nrequire {versions.ETCD.source} {version}\n"
    )
    (work / "main.go").write_text(ETCD_MAIN)
    progress(f"building etcd {version}")
    out = plan_.build_target("etcd")
    _run(["go", "build", "-ldflags", "-s -w", "-o", str(out), "."], work, env, log)
    plan_.install(out, "etcd")


def _go_install(plan_: BuildPlan, log: Path, progress: Progress, name: str, package: str, version_var: str) -> None:
    """`go install package@version` into the cache, for modules that install as they are (no
    replace directives, version list served), stamping the version into ``version_var``."""
    version = plan_.versions.version_of(name)
    work = plan_.src_dir
    work.mkdir(parents=True, exist_ok=True)
    gobin = plan_.src_dir / "gobin"
    env = go_modules.go_env(gobin=gobin)
    env["GOFLAGS"] = "-trimpath"
    progress(f"building {name} {version}")
    ldflags = f"-s -w -X {version_var}={version}"
    _run(["go", "install", "-ldflags", ldflags, f"{package}@{version}"], work, env, log)
    plan_.install(gobin / name, name)


def _wrapper_module(plan_: BuildPlan, name: str, module: str, version: str, replaces: bool = False) -> Path:
    """A wrapper module in the source folder that requires ``module`` at the pinned ``version``.

    `go install pkg@version` asks the proxy for the module's version list, which it does not serve
    for KAI, Kueue, local-path-provisioner, Koordinator or kube-state-metrics; requiring the exact version builds the
    same packages without that. With ``replaces``, upstream's replace directives come along (Go
    ignores them in a dependency), generated from its go.mod."""
    work = plan_.src_dir / name
    work.mkdir(parents=True, exist_ok=True)
    upstream = _download_gomod(module, version, work)
    if replaces:
        gomod = replacing_wrapper_gomod(name, module, version, upstream)
    else:
        gomod = "module clusterproof.local/sandbox/%s\n\ngo %s\n\nrequire %s %s\n" % (
            name,
            go_directive_of(upstream),
            module,
            version,
        )
    (work / "go.mod").write_text(gomod)
    return work


def _build_in(
    plan_: BuildPlan, work: Path, log: Path, progress: Progress, binary: str, package: str, ldflags: str = "-s -w"
) -> None:
    progress("building %s %s" % (binary, plan_.versions.version_of(binary)))
    out = plan_.build_target(binary)
    _run(["go", "build", "-ldflags", ldflags, "-o", str(out), package], work, go_modules.go_env(), log)
    plan_.install(out, binary)


def _copy_share(plan_: BuildPlan, name: str, module: str, version: str, folders: dict[str, str]) -> None:
    """Copy ``folders`` (<under share/name>: <in the module>) out of the module at ``version`` into
    the share folder, stamped with the version (Kustomize files left out)."""
    work = plan_.src_dir / name
    work.mkdir(parents=True, exist_ok=True)
    module_dir = go_modules.download(module, version, work).dir
    target = plan_.share_dir / name
    shutil.rmtree(target, ignore_errors=True)
    for into, source in folders.items():
        go_modules.copy_out(module_dir / source, target / into, ignore=shutil.ignore_patterns("kustomiz*"))
    (target / ".version").write_text(version + "\n")


def _build_kai(plan_: BuildPlan, log: Path, progress: Progress, wanted: Iterable[str]) -> None:
    version = plan_.versions.kai_scheduler
    work = _wrapper_module(plan_, "kai-scheduler", KAI_MODULE, version)
    ldflags = "-s -w -X %s/pkg/scheduler/version.gitVersion=%s" % (KAI_MODULE, version)
    for binary in wanted:
        _build_in(plan_, work, log, progress, binary, "%s/%s" % (KAI_MODULE, KAI_COMMANDS[binary]), ldflags)


def _copy_kai_chart(plan_: BuildPlan, progress: Progress) -> None:
    progress("copying KAI scheduler %s's chart" % plan_.versions.kai_scheduler)
    _copy_share(plan_, "kai-scheduler", KAI_MODULE, plan_.versions.kai_scheduler, {"chart": KAI_CHART})


def _build_local_path(plan_: BuildPlan, log: Path, progress: Progress) -> None:
    """rancher's local-path-provisioner, the sandbox's storage provisioner (main package at the module root)."""
    work = _wrapper_module(plan_, "local-path", LOCAL_PATH_MODULE, plan_.versions.local_path_provisioner)
    _build_in(plan_, work, log, progress, "local-path-provisioner", LOCAL_PATH_MODULE)


def _build_kueue(plan_: BuildPlan, log: Path, progress: Progress) -> None:
    """Kueue's manager (cmd/kueue)."""
    version = plan_.versions.kueue
    work = _wrapper_module(plan_, "kueue", KUEUE_MODULE, version)
    ldflags = "-s -w -X %s/pkg/version.GitVersion=%s" % (KUEUE_MODULE, version)
    _build_in(plan_, work, log, progress, "kueue", KUEUE_MODULE + "/cmd/kueue", ldflags)


def _copy_kueue_manifests(plan_: BuildPlan, progress: Progress) -> None:
    progress("copying Kueue %s's chart, CRDs and webhooks" % plan_.versions.kueue)
    _copy_share(plan_, "kueue", KUEUE_MODULE, plan_.versions.kueue, KUEUE_MANIFESTS)


def _build_koordinator(plan_: BuildPlan, log: Path, progress: Progress) -> None:
    """koord-scheduler; its go.mod's replace directives pin the k8s.io modules to their published
    versions, so the wrapper repeats them."""
    work = _wrapper_module(plan_, "koordinator", KOORDINATOR_MODULE, plan_.versions.koordinator, replaces=True)
    # No version stamp: Koordinator's own build sets none either (the binary reports v0.0.0-master).
    _build_in(plan_, work, log, progress, "koord-scheduler", KOORDINATOR_MODULE + "/cmd/koord-scheduler")


def _copy_koordinator_crds(plan_: BuildPlan, progress: Progress) -> None:
    progress("copying Koordinator %s's CRDs" % plan_.versions.koordinator)
    _copy_share(plan_, "koordinator", KOORDINATOR_MODULE, plan_.versions.koordinator, {"crds": KOORDINATOR_CRDS})


def _build_kube_state_metrics(plan_: BuildPlan, log: Path, progress: Progress) -> None:
    """kube-state-metrics (its main package is the module's root); measured cold on 2 cores, empty Go
    caches: 2.5 min, 381 MB of modules, 903 MB of build cache, a 69 MB binary."""
    version = plan_.versions.kube_state_metrics
    work = _wrapper_module(plan_, "kube-state-metrics", KUBE_STATE_METRICS_MODULE, version)
    ldflags = "-s -w -X github.com/prometheus/common/version.Version=%s" % version
    _build_in(plan_, work, log, progress, "kube-state-metrics", KUBE_STATE_METRICS_MODULE, ldflags)


@contextlib.contextmanager
def build_lock(key_dir: Path, progress: Progress = print) -> Iterator[None]:
    """Held while one build writes into a cache key's folder. A second build into the same folder
    (``./clusterproof site`` and ``./clusterproof bundle`` started together) waits for it, saying so,
    instead of compiling the same programs beside it: on 4 Dec both built kube-apiserver at once,
    twice the CPU for the same binary. The lock is the kernel's (flock): it goes with its process."""
    key_dir.mkdir(parents=True, exist_ok=True)
    with (key_dir / ".build.lock").open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            progress("waiting for the build under way into %s (%s)" % (key_dir, holder))
            fcntl.flock(lock, fcntl.LOCK_EX)
        lock.seek(0)
        lock.truncate()
        lock.write("pid %d\n" % os.getpid())
        lock.flush()
        try:
            yield
        finally:
            lock.truncate(0)
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_built(plan_: BuildPlan, progress: Progress = print) -> bool:
    """Build whatever is missing from the cache (one build at a time into a cache key: ``build_lock``).
    Returns True if anything was built."""
    if not plan_.missing():
        return False
    with build_lock(plan_.key_dir, progress):
        # Again: a build this one waited for may have made it all.
        missing = plan_.missing()
        if not missing:
            return False
        return _build_missing(plan_, missing, progress)


def _build_missing(plan_: BuildPlan, missing: list[str], progress: Progress) -> bool:
    if shutil.which("go") is None:
        raise RuntimeError("the sandbox needs Go to build its binaries; 'go' is not on PATH")
    plan_.bin_dir.mkdir(parents=True, exist_ok=True)
    log = plan_.key_dir / "build.log"
    progress("sandbox cache {}: building {} (log: {})".format(plan_.key_dir, ", ".join(missing), log))
    started = time.monotonic()
    steps = []
    if "etcd" in missing:
        steps.append(lambda: _build_etcd(plan_, log, progress))
    kube = [name for name in KUBERNETES_COMMANDS + KUBEADM_COMMANDS + IMAGE_COMMANDS if name in missing]
    if kube:
        steps.append(lambda: _build_kubernetes(plan_, log, progress, kube))
    if "kwok" in missing:
        steps.append(
            lambda: _go_install(
                plan_, log, progress, "kwok", KWOK_MODULE + "/cmd/kwok", KWOK_MODULE + "/pkg/consts.Version"
            )
        )
    kai = [name for name in KAI_COMMANDS if name in missing]
    if kai:
        steps.append(lambda: _build_kai(plan_, log, progress, kai))
    if KAI_CHART_ITEM in missing:
        steps.append(lambda: _copy_kai_chart(plan_, progress))
    if "helm" in missing:
        steps.append(
            lambda: _go_install(
                plan_, log, progress, "helm", HELM_MODULE + "/cmd/helm", HELM_MODULE + "/internal/version.version"
            )
        )
    if "local-path-provisioner" in missing:
        steps.append(lambda: _build_local_path(plan_, log, progress))
    if "kueue" in missing:
        steps.append(lambda: _build_kueue(plan_, log, progress))
    if KUEUE_MANIFESTS_ITEM in missing:
        steps.append(lambda: _copy_kueue_manifests(plan_, progress))
    if "koord-scheduler" in missing:
        steps.append(lambda: _build_koordinator(plan_, log, progress))
    if KOORDINATOR_CRDS_ITEM in missing:
        steps.append(lambda: _copy_koordinator_crds(plan_, progress))
    if "kube-state-metrics" in missing:
        steps.append(lambda: _build_kube_state_metrics(plan_, log, progress))
    for step in steps:
        step_started = time.monotonic()
        step()
        progress("  done in %.0f s" % (time.monotonic() - step_started))
    progress("sandbox binaries ready in %.0f s" % (time.monotonic() - started))
    (plan_.key_dir / "versions.json").write_text(json.dumps(plan_.record(), indent=2) + "\n")
    return True


def main(argv: list[str]) -> int:
    def progress(message: str) -> None:
        print("[sandbox-build {}] {}".format(time.strftime("%H:%M:%S"), message), flush=True)

    build = plan()
    if "--previous" in argv:
        # The previous minor's commands, as the offline bundle builds them (bundle.build).
        build = release_plan(versions.KUBERNETES_PREVIOUS.version, versions.ETCD_PREVIOUS.version)
    if "--print-bin-dir" in argv:
        print(build.bin_dir)
        return 0
    try:
        if not ensure_built(build, progress):
            progress(f"cache hit: {build.bin_dir}")
    except (RuntimeError, subprocess.CalledProcessError) as error:
        print(f"sandbox build failed: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
