"""The sandbox control plane: its processes, their flags, and the simulated GPU nodes.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK run as local processes of
this machine, all listening on 127.0.0.1; etcd serves TLS only and answers only clients with a
certificate of the sandbox CA (the API server's, the readiness check's). Each process is started in
its own session with its output in ``logs/``; its pid, start time, command line, environment and
readiness endpoint are recorded in ``run/``, and only a process that still matches that record is
ever signalled, so ``down`` never touches anything it did not start. The record is also what
``up`` restarts an engine's process from (``restart_recorded``) when that process has died.

State directory layout (default ``~/.local/state/clusterproof/sandbox``)::

    kubeconfig            admin kubeconfig (mode 0600): export KUBECONFIG=<dir>/kubeconfig
    pki/                  CA, serving and client certificates, service-account keys
    etcd/                 etcd's data
    logs/<component>.log  each process's output
    run/<component>.json  pid, start time, command line of each process started
    kwok.yaml             the KWOK stages in force

The pure parts (ports, flags, node manifests, the diff between declared and existing nodes) are
plain functions; the rest starts, checks and stops processes and calls the API.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.fields import Below, PortAt
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import scheduler_profile
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import pki as sandbox_pki

MARKER = ".clusterproof-sandbox"
SANDBOX_NODE_LABEL = "clusterproof.io/sandbox-node"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
PODS_PER_NODE = 110
LOOPBACK = "127.0.0.1"


# The sandbox's one port table: every block of loopback ports, as (first offset from the port
# base, size). The control plane's ``Ports`` and each engine's ports (``KaiPorts``, ``KueuePorts``,
# ``KoordinatorPorts``) read their offsets from here; the tests reserve ``PORTS_PER_SANDBOX``.
PORT_TABLE: dict[str, range] = {
    "control-plane": range(0, 10),  # etcd, kube-apiserver, controller-manager, scheduler, KWOK (0..6)
    "kai": range(10, 19),  # KAI's components: scheduler, binder, pod grouper, queue controller
    "kueue": range(19, 22),  # webhook, health, metrics
    "koordinator": range(22, 24),  # koord-scheduler's secure and health ports
    "monitoring": range(24, 27),  # Prometheus, kube-state-metrics and its own telemetry
}
PORTS_PER_SANDBOX = max(block.stop for block in PORT_TABLE.values())


def port_block(name: str) -> range:
    """The offsets (from the port base) of a block of ``PORT_TABLE``."""
    return PORT_TABLE[name]


@dataclasses.dataclass(frozen=True)
class Ports:
    """The loopback ports of the sandbox, all derived from one base port."""

    base: int = 16440

    etcd_client = PortAt(PORT_TABLE["control-plane"], 0)
    etcd_peer = PortAt(PORT_TABLE["control-plane"], 1)
    apiserver = PortAt(PORT_TABLE["control-plane"], 3)
    controller_manager = PortAt(PORT_TABLE["control-plane"], 4)
    scheduler = PortAt(PORT_TABLE["control-plane"], 5)
    kwok = PortAt(PORT_TABLE["control-plane"], 6)

    def all(self) -> list[int]:
        return [port for owned in self.by_component().values() for port in owned]

    def by_component(self) -> dict[str, list[int]]:
        return {
            "etcd": [self.etcd_client, self.etcd_peer],
            "kube-apiserver": [self.apiserver],
            "kube-controller-manager": [self.controller_manager],
            "kube-scheduler": [self.scheduler],
            "kwok": [self.kwok],
        }


@dataclasses.dataclass(frozen=True)
class Layout:
    """The sandbox's state directory: kubeconfig, PKI, etcd's data, the components' configuration,
    and a log and a run record per process."""

    root: Path

    kubeconfig = Below("root", "kubeconfig")
    etcd_data = Below("root", "etcd")
    kwok_config = Below("root", "kwok.yaml")
    scheduler_config = Below("root", "kube-scheduler.yaml")

    @property
    def pki(self) -> sandbox_pki.PkiPaths:
        return sandbox_pki.PkiPaths(self.root / "pki")

    def component_kubeconfig(self, stem: str) -> Path:
        return self.root / "pki" / (f"{stem}.kubeconfig")

    def log(self, name: str) -> Path:
        return self.root / "logs" / (f"{name}.log")

    def record(self, name: str) -> Path:
        return self.root / "run" / (f"{name}.json")


@dataclasses.dataclass(frozen=True)
class Component:
    """One process of the sandbox and how to tell it is ready."""

    name: str
    argv: tuple[str, ...]
    # Empty: the process has no endpoint, and running is ready.
    ready_url: str
    # The client certificate (a stem of ``pki.CLIENTS``) the readiness check presents, checking
    # the server against the sandbox CA: the API server's /readyz and etcd's /health. Empty: the
    # controller-manager and scheduler serve /healthz with a self-signed certificate they make
    # themselves, which is not checked.
    ready_client: str = ""
    # Variables set for the process on top of this one's environment.
    env: tuple[tuple[str, str], ...] = ()

    def record(self, pid: int, start_time: float | None) -> dict[str, Any]:
        """What ``run/<name>.json`` holds: the process, and all it takes to start it again."""
        return {
            "pid": pid,
            "start_time": start_time,
            "argv": list(self.argv),
            "env": [list(pair) for pair in self.env],
            "ready_url": self.ready_url,
            "ready_client": self.ready_client,
        }

    @classmethod
    def from_record(cls, name: str, record: Mapping[str, Any]) -> Component | None:
        """The component a run record describes; None for a record of an earlier version, which
        held the command line alone."""
        if "ready_url" not in record:
            return None
        env = tuple((str(key), str(value)) for key, value in record.get("env") or ())
        return cls(name, tuple(record["argv"]), record["ready_url"], record.get("ready_client") or "", env)


def _etcd_tls(prefix: str, pki: sandbox_pki.PkiPaths) -> tuple[str, ...]:
    """etcd's flags for TLS with client certificates of the sandbox CA, on its client port
    (``prefix`` empty) or its peer port (``peer-``); it presents one certificate on both."""
    return (
        f"--{prefix}cert-file={pki.etcd_cert}",
        f"--{prefix}key-file={pki.etcd_key}",
        f"--{prefix}client-cert-auth=true",
        f"--{prefix}trusted-ca-file={pki.ca_cert}",
    )


def _self_certified(layout: Layout, name: str, argv: tuple[str, ...], port: int) -> Component:
    """A Kubernetes component (the controller-manager, the scheduler) serving ``/healthz`` over TLS on
    ``port`` with a certificate it makes itself (under ``pki/<name without kube->-generated``), and
    profiling off: ``argv`` and those flags."""
    cert_dir = layout.root / "pki" / ("%s-generated" % name.removeprefix("kube-"))
    return Component(
        name,
        (*argv, "--cert-dir=%s" % cert_dir, "--profiling=false"),
        "https://%s:%d/healthz" % (LOOPBACK, port),
    )


def components(layout: Layout, bin_dir: Path, ports: Ports) -> list[Component]:
    """Every sandbox process in start order, with its full command line. Pure."""
    pki = layout.pki
    etcd_url = "https://%s:%d" % (LOOPBACK, ports.etcd_client)
    peer_url = "https://%s:%d" % (LOOPBACK, ports.etcd_peer)
    server = "https://%s:%d" % (LOOPBACK, ports.apiserver)
    return [
        Component(
            "etcd",
            (
                str(bin_dir / "etcd"),
                "--name=sandbox",
                f"--data-dir={layout.etcd_data}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=sandbox={peer_url}",
                # TLS with client certificates of the sandbox CA on both ports: without them any
                # local user could read every object (secrets included) whatever the kubeconfig's
                # mode. Metrics are served on the client port, behind the same check.
                *_etcd_tls("", pki),
                *_etcd_tls("peer-", pki),
                # A throw-away cluster on one machine: durability is not worth an fsync per write,
                # and 1,000 simulated nodes write a lot.
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ),
            etcd_url + "/health",
            ready_client=sandbox_pki.ETCD_HEALTHCHECK_CLIENT,
        ),
        Component(
            "kube-apiserver",
            (
                str(bin_dir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                f"--etcd-cafile={pki.ca_cert}",
                f"--etcd-certfile={pki.client_cert(sandbox_pki.APISERVER_ETCD_CLIENT)}",
                f"--etcd-keyfile={pki.client_key(sandbox_pki.APISERVER_ETCD_CLIENT)}",
                f"--bind-address={LOOPBACK}",
                f"--advertise-address={LOOPBACK}",
                "--secure-port=%d" % ports.apiserver,
                f"--tls-cert-file={pki.apiserver_cert}",
                f"--tls-private-key-file={pki.apiserver_key}",
                f"--client-ca-file={pki.ca_cert}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.service_account_pub}",
                f"--service-account-signing-key-file={pki.service_account_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                # Endpoints may not point at a loopback address, and no pod would reach it anyway.
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                "--cert-dir=%s" % (layout.root / "pki" / "apiserver-generated"),
            ),
            server + "/readyz",
            ready_client="admin",
        ),
        _self_certified(
            layout,
            "kube-controller-manager",
            (
                str(bin_dir / "kube-controller-manager"),
                "--kubeconfig={}".format(layout.component_kubeconfig("kube-controller-manager")),
                f"--bind-address={LOOPBACK}",
                "--secure-port=%d" % ports.controller_manager,
                "--leader-elect=false",
                f"--service-account-private-key-file={pki.service_account_key}",
                f"--root-ca-file={pki.ca_cert}",
                f"--cluster-signing-cert-file={pki.ca_cert}",
                f"--cluster-signing-key-file={pki.ca_key}",
                "--use-service-account-credentials=true",
            ),
            ports.controller_manager,
        ),
        _self_certified(
            layout,
            "kube-scheduler",
            (
                str(bin_dir / "kube-scheduler"),
                "--config=%s" % layout.scheduler_config,
                f"--bind-address={LOOPBACK}",
                "--secure-port=%d" % ports.scheduler,
                # Requests to its port are authenticated and authorized by the API server, as kubeadm
                # sets it up: the monitoring stage reads /metrics/resources with a token of its own.
                "--authentication-kubeconfig={}".format(layout.component_kubeconfig("kube-scheduler")),
                "--authorization-kubeconfig={}".format(layout.component_kubeconfig("kube-scheduler")),
            ),
            ports.scheduler,
        ),
        Component(
            "kwok",
            (
                str(bin_dir / "kwok"),
                "--kubeconfig={}".format(layout.component_kubeconfig("kwok")),
                f"--config={layout.kwok_config}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                f"--cidr={POD_CIDR}",
                "--node-ip={}".format("10.0.0.1"),
                "--node-lease-duration-seconds=40",
                "--server-address=%s:%d" % (LOOPBACK, ports.kwok),
            ),
            "http://%s:%d/healthz" % (LOOPBACK, ports.kwok),
        ),
    ]


def node_manifest(node: Mapping[str, Any]) -> dict[str, Any]:
    """The Node object KWOK will simulate for a declared GPU node. Pure.

    Labels are those NVIDIA's GPU feature discovery sets on a real node (product, memory, count),
    so that what the validator checks on the sandbox is what it checks on hardware.
    """
    gpus = int(node["gpu_count"])
    labels = {
        "kubernetes.io/hostname": node["name"],
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        SANDBOX_NODE_LABEL: "true",
    }
    if gpus > 0:
        labels["nvidia.com/gpu.present"] = "true"
        labels["nvidia.com/gpu.count"] = str(gpus)
        if node.get("gpu_product"):
            labels["nvidia.com/gpu.product"] = node["gpu_product"]
        if node.get("gpu_memory_mib"):
            labels["nvidia.com/gpu.memory"] = str(node["gpu_memory_mib"])
    labels.update(node.get("labels") or {})
    resources = {
        "cpu": str(node["cpu_cores"]),
        "memory": "%dGi" % node["memory_gib"],
        "pods": str(PODS_PER_NODE),
        "nvidia.com/gpu": str(gpus),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node["name"],
            "labels": labels,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": [dict(taint) for taint in node.get("taints") or []]},
        # A kubelet version as a real node reports it (the pinned Kubernetes, which the sandbox runs):
        # KWOK keeps what the Node says, and would otherwise say kwok-<its version>, which kubeadm's
        # upgrade cannot parse on a cluster that simulated nodes are attached to (the lab's).
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            # Every field of NodeSystemInfo: the Kubernetes client requires each one; KWOK fills the
            # empty ones with its own.
            "nodeInfo": {
                "kubeletVersion": versions.KUBERNETES.version,
                "kubeProxyVersion": versions.KUBERNETES.version,
                "architecture": "amd64",
                "operatingSystem": "linux",
                "bootID": "",
                "containerRuntimeVersion": "",
                "kernelVersion": "",
                "machineID": "",
                "osImage": "",
                "systemUUID": "",
            },
        },
    }


@dataclasses.dataclass
class NodePlan:
    create: list[dict[str, Any]]
    replace: list[dict[str, Any]]
    delete: list[str]

    @property
    def changed(self) -> bool:
        return bool(self.create or self.replace or self.delete)


def _node_differs(wanted: Mapping[str, Any], existing: Mapping[str, Any]) -> bool:
    metadata = existing.get("metadata") or {}
    existing_labels = metadata.get("labels") or {}
    if any(existing_labels.get(key) != value for key, value in wanted["metadata"]["labels"].items()):
        return True
    status = existing.get("status") or {}
    if (status.get("allocatable") or {}) != wanted["status"]["allocatable"]:
        return True
    return _declared_taints((existing.get("spec") or {}).get("taints") or []) != wanted["spec"]["taints"]


def _declared_taints(taints: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Taints as the inventory declares them: without those Kubernetes itself manages
    (node.kubernetes.io/not-ready and the like) and without the time it adds."""
    return [
        {key: value for key, value in taint.items() if key != "timeAdded"}
        for taint in taints
        if not str(taint.get("key", "")).startswith("node.kubernetes.io/")
    ]


def plan_nodes(
    declared: Iterable[Mapping[str, Any]],
    existing: Iterable[Mapping[str, Any]],
    manifest: Callable[[Mapping[str, Any]], dict[str, Any]] = node_manifest,
) -> NodePlan:
    """What to create, replace and delete so the simulated nodes are exactly the declared ones, each
    made by ``manifest``. Pure."""
    wanted = {node["name"]: manifest(node) for node in declared}
    current = {node["metadata"]["name"]: node for node in existing}
    create = [manifest for name, manifest in wanted.items() if name not in current]
    replace = [
        manifest for name, manifest in wanted.items() if name in current and _node_differs(manifest, current[name])
    ]
    delete = sorted(name for name in current if name not in wanted)
    return NodePlan(create, replace, delete)


# ---------------------------------------------------------------------------------------------
# Processes


def _process_start_time(pid: int) -> float | None:
    """Start time of a process in clock ticks since boot, from /proc; None if it is gone."""
    try:
        stat = Path("/proc/%d/stat" % pid).read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; the fields after it are plain numbers.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return float(fields[19])


def _read_record(layout: Layout, name: str) -> dict[str, Any] | None:
    try:
        return json.loads(layout.record(name).read_text())
    except (OSError, ValueError):
        return None


def running_pid(layout: Layout, name: str, argv: tuple[str, ...] | None = None) -> int | None:
    """The pid of a component we started, if that very process is still alive (and, if argv is
    given, was started with that command line)."""
    record = _read_record(layout, name)
    if record is None:
        return None
    pid = int(record["pid"])
    if _process_start_time(pid) != record["start_time"]:
        return None
    if argv is not None and tuple(record["argv"]) != tuple(argv):
        return None
    return pid


# The niceness of every process the sandbox starts (the control plane, KWOK, the engines): a site's
# control plane and scheduler have CPUs of their own, while on the sandbox they share the machine
# with whatever drives them (Ansible, a test suite's other sandboxes and labs). At the default 0,
# under a load of 15 on two cores, KAI's informers lagged its own binder by seconds and placed a
# fraction of a GPU as if the fraction just bound beside it were not there. At -5 each weighs about
# three times a process at 0 (the kernel's weight table), so the engine keeps up with the API server
# and the API server with its clients. Only root may lower a niceness: elsewhere they run at 0.
COMPONENT_NICENESS = -5


def _raise_priority() -> None:
    """In the child, before exec: lower the niceness to ``COMPONENT_NICENESS`` where permitted
    (threads a Go program starts inherit it)."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, COMPONENT_NICENESS)
    except OSError:
        pass


def start(layout: Layout, component: Component) -> int:
    layout.log(component.name).parent.mkdir(parents=True, exist_ok=True)
    layout.record(component.name).parent.mkdir(parents=True, exist_ok=True)
    with layout.log(component.name).open("ab") as log:
        process = subprocess.Popen(
            component.argv,
            env={**os.environ, **dict(component.env)},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            cwd=layout.root,
            preexec_fn=_raise_priority,  # noqa: PLW1509 - setpriority only, async-signal-safe
        )
    start_time = _process_start_time(process.pid)
    layout.record(component.name).write_text(json.dumps(component.record(process.pid, start_time)) + "\n")
    return process.pid


def _complete_record(layout: Layout, component: Component) -> None:
    """Give the record of a process started by an earlier version (its command line alone) what
    it takes to start the process again, so that ``up`` can restart it should it die."""
    record = _read_record(layout, component.name)
    if record is not None and Component.from_record(component.name, record) is None:
        full = component.record(int(record["pid"]), record["start_time"])
        layout.record(component.name).write_text(json.dumps(full) + "\n")


# Seconds a process has to exit after SIGTERM before it gets a second one. Kubernetes' components
# (and KAI's, Kueue's) drain in-flight requests first: a kube-apiserver whose etcd went away waits
# out its 60 s request timeout; at a second signal they exit at once. etcd finishes its own
# graceful stop whatever follows.
SECOND_SIGNAL_AFTER = 5.0


def stop(layout: Layout, name: str, timeout: float = 15.0) -> bool:
    """Stop a component we started (only if its recorded pid is still that process), and wait until
    it has gone: SIGTERM, a second one after ``SECOND_SIGNAL_AFTER`` s, SIGKILL after ``timeout``.
    True if it ran."""
    pid = running_pid(layout, name)
    layout_record = layout.record(name)
    if pid is None:
        layout_record.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    start = time.monotonic()
    signalled_again = False
    while running_pid(layout, name) is not None:
        waited = time.monotonic() - start
        if waited > timeout:
            _signal(pid, signal.SIGKILL)
        elif waited > SECOND_SIGNAL_AFTER and not signalled_again:
            _signal(pid, signal.SIGTERM)
            signalled_again = True
        _reap(pid)
        time.sleep(0.1)
    layout_record.unlink(missing_ok=True)
    return True


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass  # it exited since it was last seen


def _reap(pid: int) -> None:
    """Collect the exit status if the process is our child (it is, in the process that started it)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def rss_bytes(pid: int) -> int:
    try:
        for line in Path("/proc/%d/status" % pid).read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _ssl_context(layout: Layout, client: str) -> ssl.SSLContext:
    if client:
        context = ssl.create_default_context(cafile=str(layout.pki.ca_cert))
        context.load_cert_chain(str(layout.pki.client_cert(client)), str(layout.pki.client_key(client)))
        return context
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def is_ready(layout: Layout, component: Component) -> bool:
    if not component.ready_url:
        return running_pid(layout, component.name) is not None
    context = _ssl_context(layout, component.ready_client) if component.ready_url.startswith("https") else None
    try:
        with urllib.request.urlopen(component.ready_url, timeout=2, context=context) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_ready(layout: Layout, component: Component, timeout: float) -> None:
    def ready() -> bool:
        if is_ready(layout, component):
            return True
        if running_pid(layout, component.name) is None:
            log = layout.log(component.name)
            raise SandboxError(f"{component.name} exited while starting; last lines of {log}:\n{tail(log)}")
        return False

    if wait_until(ready, timeout=timeout, interval=0.2).held:
        return
    log = layout.log(component.name)
    raise SandboxError(
        f"{component.name} did not become ready at {component.ready_url} within {timeout:.0f} s; "
        f"last lines of {log}:\n{tail(log)}"
    )


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((LOOPBACK, port)) == 0


def ports_taken_by_others(layout: Layout, ports: Ports) -> list[int]:
    """Ports of components we are not running that something else already listens on."""
    return [
        port
        for name, owned in ports.by_component().items()
        if running_pid(layout, name) is None
        for port in owned
        if port_in_use(port)
    ]


class SandboxError(RuntimeError):
    """The sandbox could not be brought to the state asked for; the message says why."""


# ---------------------------------------------------------------------------------------------
# Whole-sandbox operations


def prepare_state(layout: Layout, kwok_stages: str, ports: Ports) -> bool:
    """Create the state directory, PKI, kubeconfigs and KWOK config. True if anything was written."""
    if layout.root.exists() and any(layout.root.iterdir()) and not (layout.root / MARKER).exists():
        raise SandboxError(
            f"{layout.root} exists and is not a clusterproof sandbox (no {MARKER} file); choose an empty directory "
            "for clusterproof_sandbox_dir"
        )
    layout.root.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.root, 0o700)
    changed = False
    if not (layout.root / MARKER).exists():
        (layout.root / MARKER).write_text("state of a clusterproof sandbox; removed by its 'down'\n")
        changed = True
    changed |= sandbox_pki.ensure_pki(layout.pki)
    server = "https://%s:%d" % (LOOPBACK, ports.apiserver)
    pki = layout.pki
    changed |= sandbox_pki.write_kubeconfig(
        layout.kubeconfig,
        sandbox_pki.kubeconfig_text(server, pki.ca_cert, pki.client_cert("admin"), pki.client_key("admin")),
    )
    for stem in ("kube-controller-manager", "kube-scheduler", "kwok"):
        changed |= sandbox_pki.write_kubeconfig(
            layout.component_kubeconfig(stem),
            sandbox_pki.kubeconfig_text(server, pki.ca_cert, pki.client_cert(stem), pki.client_key(stem)),
        )
    if not layout.kwok_config.exists() or layout.kwok_config.read_text() != kwok_stages:
        layout.kwok_config.write_text(kwok_stages)
        changed = True
    scheduler_config = scheduler_configuration(layout.component_kubeconfig("kube-scheduler"))
    if not layout.scheduler_config.exists() or layout.scheduler_config.read_text() != scheduler_config:
        layout.scheduler_config.write_text(scheduler_config)
        changed = True
    return changed


def scheduler_configuration(kubeconfig: Path) -> str:
    """kube-scheduler's configuration on the sandbox: GPUs bin-packed (install.scheduler_profile), and
    no leader election (one scheduler). Pods of KAI scheduler are not its to place."""
    return json.dumps(scheduler_profile.configuration(str(kubeconfig), leader_elect=False), indent=2) + "\n"


def bring_up(layout: Layout, bin_dir: Path, ports: Ports, timeout: float = 120.0) -> list[str]:
    """Start every control-plane component not already running as configured. Returns those started."""
    return run_components(layout, components(layout, bin_dir, ports), timeout)


# How long a process that runs but does not answer its readiness check is given to answer
# before it is restarted: one just started (or whose API server just came back) answers within
# seconds; one that is shutting down never does.
READY_GRACE = 10.0


def answers(layout: Layout, component: Component, grace: float = READY_GRACE) -> bool:
    """Whether a running component answers its readiness check within ``grace`` seconds."""

    def state() -> str:
        if is_ready(layout, component):
            return "ready"
        return "gone" if running_pid(layout, component.name) is None else "starting"

    return wait_until(state, lambda seen: seen != "starting", timeout=grace, interval=0.5).value == "ready"


def program_replaced(pid: int) -> bool:
    """Whether the program a process runs has been replaced on disk since it started: the build
    writes a new binary beside the old and renames it over it (a moved pin), and the kernel then
    names the old, unlinked file "<path> (deleted)". False where that cannot be read."""
    try:
        return os.readlink("/proc/%d/exe" % pid).endswith(" (deleted)")
    except OSError:
        return False


def runs_as_declared(layout: Layout, component: Component) -> bool:
    """Whether ``component`` runs with its command line and the program now at its path (what
    ``run_components`` would leave running as it is, if it answers)."""
    pid = running_pid(layout, component.name, component.argv)
    return pid is not None and not program_replaced(pid)


def run_components(layout: Layout, wanted: Iterable[Component], timeout: float = 120.0) -> list[str]:
    """Start, in order, each component not already running with its command line and its current
    program (restarting one that runs with another command line, one whose binary a build has
    replaced since it started, or one that runs but does not answer), waiting for each to be ready.
    Returns the names started."""
    started = []
    for component in wanted:
        if runs_as_declared(layout, component) and answers(layout, component):
            _complete_record(layout, component)
            continue
        if running_pid(layout, component.name) is not None:
            # Running with another command line (the inventory changed its ports, say), running an
            # older build of its program (the same path: when Kueue's pin moved, the old Kueue went on
            # running after the build put the new one there), or running but not answering: a
            # kube-apiserver sent SIGTERM closes its port at once yet takes about a minute to exit.
            # ``stop`` signals it again (the API server exits at a second signal) and waits until it
            # has gone, so the new one finds its port free.
            stop(layout, component.name)
        missing = [arg for arg in component.argv[:1] if not os.access(arg, os.X_OK)]
        if missing:
            raise SandboxError(f"{component.name} is not built: {missing[0]} is missing; run the sandbox build first")
        start(layout, component)
        started.append(component.name)
        wait_ready(layout, component, timeout)
    return started


def recorded_addons(layout: Layout, core: Iterable[str]) -> dict[str, Component | None]:
    """The processes started into this sandbox beside ``core`` (an engine's, the GPU agent,
    local-path-provisioner), by name, as their run records describe them (None: a record of an
    earlier version, which does not say how to start the process again)."""
    skip = set(core)
    addons: dict[str, Component | None] = {}
    for name in recorded_components(layout):
        record = _read_record(layout, name)
        if name not in skip and record is not None:
            addons[name] = Component.from_record(name, record)
    return addons


def restart_recorded(layout: Layout, core: Iterable[str], timeout: float) -> list[str]:
    """Start again every add-on process that was started into the sandbox and has died (or runs
    but does not answer), from its run record. A process stopped on purpose (an engine's, when
    another is installed) has no record left, so it stays stopped. Returns the names started."""
    addons = recorded_addons(layout, core)
    return run_components(layout, [component for component in addons.values() if component is not None], timeout)


def not_restartable(layout: Layout, core: Iterable[str]) -> list[str]:
    """Add-ons that have died and that ``restart_recorded`` cannot start again: an earlier version
    started them and recorded their command line alone, not their environment. The playbook that
    installed them starts them again (and records them in full)."""
    addons = recorded_addons(layout, core)
    return sorted(name for name, component in addons.items() if component is None and running_pid(layout, name) is None)


def status(layout: Layout, bin_dir: Path, ports: Ports) -> list[dict[str, Any]]:
    """Every process of the sandbox, the control plane's and those started into it, with its
    pid, memory, readiness and log."""
    core = components(layout, bin_dir, ports)
    addons = recorded_addons(layout, [component.name for component in core])
    report = []
    for name, component in [(c.name, c) for c in core] + list(addons.items()):
        pid = running_pid(layout, name)
        report.append(
            {
                "name": name,
                "running": pid is not None,
                "pid": pid,
                "rss_bytes": rss_bytes(pid) if pid else 0,
                "ready": bool(pid) and (component is None or is_ready(layout, component)),
                "log": str(layout.log(name)),
            }
        )
    return report


def recorded_components(layout: Layout) -> list[str]:
    """Names of every process started into this sandbox (control plane and add-ons alike)."""
    return sorted(path.stem for path in (layout.root / "run").glob("*.json"))


def tear_down(layout: Layout, names: Iterable[str]) -> list[str]:
    """Stop every process we started: add-ons first, then the control plane in reverse start
    order; then remove the state. Returns those stopped."""
    core = list(names)
    addons = [name for name in recorded_components(layout) if name not in core]
    stopped = [name for name in addons + list(reversed(core)) if stop(layout, name)]
    if layout.root.exists():
        if not (layout.root / MARKER).exists():
            raise SandboxError(f"{layout.root} is not a clusterproof sandbox (no {MARKER}); not removing it")
        shutil.rmtree(layout.root)
    return stopped
