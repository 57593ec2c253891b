"""A lab site upgraded a Kubernetes minor, offline, as an admin would (docs/maintenance.md): installed
at the previous minor the bundle carries (``clusterproof_kubernetes_version``), the site's stages
and a validation that passes, real pods of a project on the workers; then ``playbooks/upgrade.yml``
with the inventory at the pinned version, interrupted (SIGINT, as Ctrl-C) while a worker is drained,
and run again: it completes. Every node runs the pinned version, none is left cordoned, the nvidia
runtime is still containerd's default on every worker, the project's pods run again, and the
validation after the upgrade passes.

Its own lab of three hosts on a bridge and subnet of its own, installed once, in an xdist group of
its own that runs after every sandbox's group (``LAST`` in conftest.py): beside the lab's group, on
a worker the sandboxes have left.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import build
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import runtime_config
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import machines
from tests.e2e import lab_site
from tests.e2e.conftest import REPO, run_playbook

pytestmark = pytest.mark.xdist_group("lab-upgrade")

BRIDGE = "cpupg0"
GATEWAY = "10.221.0.1"
CONTROL_PLANE = {"upg-cp-1": "10.221.0.10"}
WORKERS = {"upg-worker-1": "10.221.0.11", "upg-worker-2": "10.221.0.12"}
ADDRESSES = {**CONTROL_PLANE, **WORKERS}
PREVIOUS, PINNED = versions.KUBERNETES_PREVIOUS.version, versions.KUBERNETES.version
KUBECTL = "kubectl --kubeconfig /etc/kubernetes/admin.conf "
PLAYBOOKS = REPO / "playbooks"
# Real pods of a project on the workers, which the drains evict and which must run again.
WORKLOAD = "upgrade-probe"


class UpgradeLab:
    def __init__(self, base: Path, bundle: Path) -> None:
        self.base = base
        self.reports = base / "reports"
        self.layout = machines.Layout(base / "state", Path.home() / ".cache" / "clusterproof" / "lab")
        declaration = lab_site.declaration(
            "lab-upgrade-test",
            GATEWAY,
            BRIDGE,
            CONTROL_PLANE,
            WORKERS,
            base,
            bundle,
            {"simulated_gpu_nodes_port": 16499},
        )
        self.pinned = base / "pinned.yml"
        self.pinned.write_text(yaml.safe_dump(declaration))
        declaration["all"]["vars"]["clusterproof_kubernetes_version"] = PREVIOUS
        self.previous = base / "previous.yml"
        self.previous.write_text(yaml.safe_dump(declaration))

    def kubectl(self, arguments: str, timeout: int = 120) -> subprocess.CompletedProcess:
        return machines.ssh(self.layout, CONTROL_PLANE["upg-cp-1"], KUBECTL + arguments, timeout=timeout)

    def nodes(self) -> list[dict]:
        listed = self.kubectl("get nodes -o json")
        assert listed.returncode == 0, listed.stderr
        return json.loads(listed.stdout)["items"]

    def report(self) -> dict:
        return json.loads((self.reports / "lab-upgrade-test" / "latest" / "report.json").read_text())


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpgradeLab]:
    layout = build.Layout(build.default_cache(), build.default_cache() / "out")
    build.build(layout, progress=lambda message: print("[bundle]", message, flush=True))
    site = UpgradeLab(tmp_path_factory.mktemp("upgrade-lab"), layout.out)
    try:
        up = run_playbook(str(PLAYBOOKS / "lab.yml"), inventory=site.previous, timeout=600)
        assert up.returncode == 0, up.tail(3000)
        started = time.monotonic()
        for playbook in ("gpu_nodes.yml", "cluster.yml"):
            run = run_playbook(str(PLAYBOOKS / playbook), inventory=site.previous, timeout=1200)
            assert run.returncode == 0, run.tail(5000)
        print("[upgrade lab] installed at %s, 3 hosts: %.0f s" % (PREVIOUS, time.monotonic() - started), flush=True)
        started = time.monotonic()
        staged = run_playbook(
            str(PLAYBOOKS / "site.yml"), *lab_site.quick_validation(), inventory=site.previous, timeout=1800
        )
        assert staged.returncode == 0, staged.tail(5000) + lab_site.cluster_state(site.kubectl)
        print("[upgrade lab] site.yml at %s: %.0f s" % (PREVIOUS, time.monotonic() - started), flush=True)
        yield site
    finally:
        lab_site.keep_machine_logs(site.layout.state_dir / "logs", site.base / "machine-logs")
        down = run_playbook(str(PLAYBOOKS / "lab.yml"), "-e", "lab_state=down", inventory=site.previous, timeout=600)
        assert down.returncode == 0, down.tail(3000)


def _project() -> str:
    """The lab's first project, whose namespace runs the workload."""
    return yaml.safe_load((lab_site.LAB_VARS / "all" / "projects.yml").read_text())["clusterproof_projects"][0]["name"]


def _workload(lab: UpgradeLab) -> None:
    """Two real pods in the first project's namespace, spread over the workers."""
    project = _project()
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": WORKLOAD, "namespace": project},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": WORKLOAD}},
            "template": {
                "metadata": {"labels": {"app": WORKLOAD}},
                "spec": {
                    "topologySpreadConstraints": [
                        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
                         "labelSelector": {"matchLabels": {"app": WORKLOAD}}}
                    ],
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65534},
                    "containers": [{"name": "sleep", "image": versions.BUSYBOX.image, "command": ["sleep", "86400"],
                                    "securityContext": {"allowPrivilegeEscalation": False}}],
                },
            },
        },
    }  # fmt: skip
    encoded = base64.b64encode(json.dumps(manifest).encode()).decode()
    applied = machines.ssh(
        lab.layout, CONTROL_PLANE["upg-cp-1"], "echo %s | base64 -d | %sapply -f -" % (encoded, KUBECTL), timeout=120
    )
    assert applied.returncode == 0, applied.stderr
    lab.project = project
    _wait(lambda: _ready_replicas(lab) == 2, "the workload's two pods running", 300)


def _ready_replicas(lab: UpgradeLab) -> int:
    got = lab.kubectl("get deployment %s -n %s -o json" % (WORKLOAD, lab.project))
    return json.loads(got.stdout).get("status", {}).get("readyReplicas", 0) if got.returncode == 0 else 0


def _wait(check, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(3)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))


def _upgrade_process(lab: UpgradeLab, log: Path) -> subprocess.Popen:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env["PATH"] = "%s:%s" % (Path(sys.executable).parent, env["PATH"])
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(lab.pinned), str(PLAYBOOKS / "upgrade.yml"),
         *lab_site.quick_validation()],
        cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip


def _drained_worker(lab: UpgradeLab) -> str:
    listed = lab.kubectl("get nodes -o json")
    if listed.returncode != 0:
        return ""  # the API server restarts during the upgrade (kubeadm upgrade apply)
    for node in json.loads(listed.stdout)["items"]:
        annotations = node["metadata"].get("annotations") or {}
        if node["metadata"]["name"] in WORKERS and annotations.get("clusterproof.io/cordoned-by") == "upgrade":
            return node["metadata"]["name"]
    return ""


def test_the_lab_installed_at_the_previous_minor_runs_it(lab: UpgradeLab) -> None:
    kubelets = {node["metadata"]["name"]: node["status"]["nodeInfo"]["kubeletVersion"] for node in lab.nodes()}
    assert {kubelets[host] for host in ADDRESSES} == {PREVIOUS}, kubelets
    assert lab.report()["verdict"] == "pass"


def test_an_upgrade_interrupted_while_a_worker_is_drained_completes_when_run_again(
    lab: UpgradeLab, tmp_path: Path
) -> None:
    _workload(lab)
    started = time.monotonic()
    interrupted = _upgrade_process(lab, tmp_path / "interrupted.log")
    try:
        _wait(lambda: bool(_drained_worker(lab)) or interrupted.poll() is not None, "a worker drained", 1200)
        drained = _drained_worker(lab)
        assert drained, (tmp_path / "interrupted.log").read_text()[-4000:]
        interrupted.send_signal(signal.SIGINT)
        interrupted.wait(timeout=120)
    finally:
        if interrupted.poll() is None:
            interrupted.kill()
    print("[upgrade lab] interrupted while %s was drained, after %.0f s" % (drained, time.monotonic() - started))
    # The cluster still serves: the API answers and every other node is schedulable.
    assert all(not n["spec"].get("unschedulable") for n in lab.nodes() if n["metadata"]["name"] != drained)

    started = time.monotonic()
    resumed = run_playbook(
        str(PLAYBOOKS / "upgrade.yml"), *lab_site.quick_validation(), inventory=lab.pinned, timeout=2400
    )
    elapsed = time.monotonic() - started
    print("[upgrade lab] upgrade.yml run again to its end (with the validation): %.0f s" % elapsed, flush=True)
    assert resumed.returncode == 0, resumed.tail(6000)
    # The hosts done before the interruption were not upgraded again.
    assert "upg-cp-1" not in resumed.changed_tasks() or not any(
        "kubeadm upgrade apply" in task for task in resumed.changed_tasks().get("upg-cp-1", [])
    )

    nodes = lab.nodes()
    assert {
        n["metadata"]["name"]: n["status"]["nodeInfo"]["kubeletVersion"]
        for n in nodes
        if n["metadata"]["name"] in ADDRESSES
    } == {host: PINNED for host in ADDRESSES}
    assert not any(n["spec"].get("unschedulable") for n in nodes), [n["metadata"]["name"] for n in nodes]
    assert not any("clusterproof.io/cordoned-by" in (n["metadata"].get("annotations") or {}) for n in nodes)
    version = lab.kubectl("version -o json")
    assert json.loads(version.stdout)["serverVersion"]["gitVersion"] == PINNED
    for host, address in WORKERS.items():
        config = machines.ssh(lab.layout, address, "cat /etc/containerd/config.toml").stdout
        assert runtime_config.containerd_runtimes(config)["default_runtime"] == "nvidia", host
    # Every host's containerd runs the pause image the pinned kubeadm asks for, not the previous minor's.
    for host, address in ADDRESSES.items():
        config = tomllib.loads(machines.ssh(lab.layout, address, "cat /etc/containerd/config.toml").stdout)
        cri = config["plugins"]["io.containerd.grpc.v1.cri"]
        assert cri["sandbox_image"] == versions.PAUSE.image != versions.PAUSE_PREVIOUS.image, (host, cri)
    _wait(lambda: _ready_replicas(lab) == 2, "the workload's pods running again", 300)
    report = lab.report()
    assert report["verdict"] == "pass", [c for s in report["sections"] for c in s["checks"] if c["status"] != "pass"]
    # The re-run's drains evicted the project's pods (wherever the first run's drain had moved them),
    # counted per project and node, and the run saw them running again.
    (disruption,) = [section for section in report["sections"] if section["id"] == "upgrade-disruption"]
    project = _project()
    checks = {check["id"]: check for check in disruption["checks"]}
    assert checks["upgrade-disruption/%s" % project]["status"] == "pass", disruption
    (table,) = disruption["tables"]
    evicted = sum(row[2] for row in table["rows"] if row[1] == project)
    assert evicted >= 2 and {row[0] for row in table["rows"]} <= set(WORKERS), table
    print("[upgrade lab] the drains evicted: %s" % table["rows"], flush=True)


def test_a_second_upgrade_run_has_nothing_to_do(lab: UpgradeLab) -> None:
    again = run_playbook(
        str(PLAYBOOKS / "upgrade.yml"), "-e", "clusterproof_upgrade_validate=false", inventory=lab.pinned, timeout=600
    )
    assert again.returncode == 0, again.tail(3000)
    assert "nothing to upgrade: every host runs %s" % PINNED in again.output
    assert again.changed_tasks() == {}


def test_a_minor_backwards_is_refused_before_any_change(lab: UpgradeLab) -> None:
    refused = run_playbook(str(PLAYBOOKS / "upgrade.yml"), inventory=lab.previous, timeout=600)
    assert refused.returncode != 0
    assert "Kubernetes is never downgraded" in refused.output
    assert refused.changed_tasks() == {}
