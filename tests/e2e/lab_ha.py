"""The HA lab (issue 34, docs/ha.md): five hosts on a bridge and subnet of their own (bridge cpha0,
10.223.0.0/24), three control planes behind the virtual IP clusterproof installs and two workers, and
what its tests and its bench do to it and read of it: power a host off or cut its power, find the VIP's
holder, wait for the API through the VIP, for nodes and static pods, for the cluster's workloads.

Not collected by pytest (no test_ prefix): tests/e2e/test_lab_ha.py and bench/ha_bench.py use it.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import lifecycle, machines
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab.plan import LabHost, LabPlan
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import etcd
from tests.e2e import lab_site
from tests.e2e.conftest import REPO, run_playbook

BRIDGE = "cpha0"
GATEWAY = "10.223.0.1"
VIP = "10.223.0.100"
ENDPOINT = "https://%s:8443" % VIP
CONTROL_PLANE = {"ha-cp-1": "10.223.0.10", "ha-cp-2": "10.223.0.11", "ha-cp-3": "10.223.0.12"}
WORKERS = {"ha-worker-1": "10.223.0.20", "ha-worker-2": "10.223.0.21"}
ADDRESSES = {**CONTROL_PLANE, **WORKERS}
KUBECTL = "kubectl --kubeconfig /etc/kubernetes/admin.conf "
PLAYBOOKS = REPO / "playbooks"


class HaLab:
    """The lab's inventory (the site's, written under ``base``), its hosts' layout and plan, and reads of it."""

    def __init__(self, base: Path, bundle: Path) -> None:
        self.base, self.bundle, self.reports = base, bundle, base / "reports"
        self.layout = machines.Layout(base / "state", Path.home() / ".cache" / "clusterproof" / "lab")
        self.plan = LabPlan(
            BRIDGE, GATEWAY + "/24", tuple(LabHost(name, address) for name, address in ADDRESSES.items())
        )
        self.inventory = self.declare("hosts.yml", CONTROL_PLANE)

    def declare(self, file: str, control_plane: dict[str, str]) -> Path:
        """The site's inventory with ``control_plane`` (and both workers), written to ``file``."""
        declaration = lab_site.declaration(
            "lab-ha-test",
            GATEWAY,
            BRIDGE,
            control_plane,
            WORKERS,
            self.base,
            self.bundle,
            {"simulated_gpu_nodes_port": 16509, "clusterproof_control_plane_vip": VIP},
        )
        inventory = self.base / file
        inventory.write_text(yaml.safe_dump(declaration))
        return inventory

    def ssh(self, host: str, command: str, timeout: int = 120):
        return machines.ssh(self.layout, ADDRESSES[host], command, timeout=timeout)

    def kubectl(self, arguments: str, host: str = "ha-cp-1", timeout: int = 120):
        return self.ssh(host, KUBECTL + arguments, timeout=timeout)

    def report(self) -> dict:
        return json.loads((self.reports / "lab-ha-test" / "latest" / "report.json").read_text())

    def crash(self, host: str) -> None:
        """The host's power cut: its systemd (nspawn's child, PID 1 of the host) killed, and with it the kernel
        kills every process of the host at once; nothing stops in order or says goodbye. (Killing nspawn
        itself would leave the host running without its supervisor.)"""
        nspawn = machines.nspawn_processes(self.layout)[host]
        (init,) = Path("/proc/%d/task/%d/children" % (nspawn, nspawn)).read_text().split()
        os.kill(int(init), signal.SIGKILL)
        # The kill is sent at once, the host's processes die in the moments after: a read through the VIP
        # in between still reached the dead holder's haproxy. nspawn exits once its host has.
        wait_for("%s's machine to end" % host, lambda: host not in machines.nspawn_processes(self.layout), 30, 0.1)

    def vip_holders(self) -> list[str]:
        return [host for host in CONTROL_PLANE if VIP in self.ssh(host, "ip -o -4 addr show", timeout=30).stdout]


def memory_available_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 0


def wait_for(what: str, check, timeout: float = 300.0, interval: float = 3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(interval)
    raise AssertionError("%s: not within %.0f s" % (what, timeout))


def api_answers(timeout: float = 2.0) -> bool:
    """The API server's /readyz through the VIP (anonymous: kubeadm's RBAC lets anyone read it)."""
    return readyz(ENDPOINT + "/readyz", timeout) == "200"


def readyz(url: str, timeout: float = 2.0) -> str:
    """``url``'s answer in a line: "200", or the status and the checks that failed, or why none came."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url + "?verbose", timeout=timeout, context=context) as answer:  # noqa: S310
            return str(answer.status)
    except urllib.error.HTTPError as error:
        failed = [line for line in error.read().decode(errors="replace").splitlines() if "failed" in line]
        return "%d %s" % (error.code, "; ".join(failed)[:400])
    except OSError as error:
        return "no answer (%s)" % error


# What a control plane shows of the endpoint and of etcd: whether it holds the VIP, its keepalived's
# and haproxy's state and keepalived's last words, and etcd's view of every member.
_ENDPOINT_STATE = (
    "ip -o -4 addr show | grep -c ' %s/' ; systemctl is-active keepalived haproxy; "
    "journalctl -u keepalived -n 6 --no-pager -o cat; "
    "etcdctl --endpoints %s --cacert %s --cert %s --key %s --command-timeout 5s endpoint status --cluster -w table"
    % (VIP, etcd.ENDPOINT, etcd.CACERT, etcd.CERT, etcd.KEY)
)


def endpoint_state(lab: HaLab, gone: str) -> str:
    """What an admin would look at when the API does not answer through the VIP, ``gone`` being the
    control plane that went: the VIP's neighbour entry here, and for each other control plane its API
    server's and haproxy's /readyz and ``_ENDPOINT_STATE``."""
    neighbour = subprocess.run(["ip", "neigh", "show", VIP], capture_output=True, text=True, check=False)
    lines = [
        "the VIP here: %s; through it: %s" % (neighbour.stdout.strip() or "no entry", readyz(ENDPOINT + "/readyz"))
    ]
    for host, address in CONTROL_PLANE.items():
        if host == gone:
            continue
        lines.append(
            "%s: API server /readyz %s; haproxy /readyz %s"
            % (host, readyz("https://%s:6443/readyz" % address), readyz("https://%s:8443/readyz" % address))
        )
        try:
            shown = lab.ssh(host, _ENDPOINT_STATE, timeout=30)
            lines.append((shown.stdout + shown.stderr).rstrip())
        except subprocess.TimeoutExpired:
            lines.append("  no answer over SSH in 30 s")
    return "\n".join(lines)


def vip_holder_other_than_the_first(lab: HaLab) -> str:
    """The VIP's holder, moved off ha-cp-1 first if it holds it: the first control plane runs the
    validation (its report host) and must stay."""
    (holder,) = lab.vip_holders()
    if holder == "ha-cp-1":
        assert lab.ssh("ha-cp-1", "systemctl restart keepalived").returncode == 0
        wait_for("the VIP to leave ha-cp-1", lambda: lab.vip_holders() not in ([], ["ha-cp-1"]), timeout=60)
        (holder,) = lab.vip_holders()
    return holder


def nodes_ready(lab: HaLab) -> set[str]:
    listed = lab.kubectl("get nodes -o json")
    if listed.returncode != 0:
        return set()
    return {
        node["metadata"]["name"]
        for node in json.loads(listed.stdout)["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
    }


def static_pods_ready(lab: HaLab, host: str) -> bool:
    listed = lab.kubectl("get pods -n kube-system -o json --field-selector spec.nodeName=%s" % host)
    if listed.returncode != 0:
        return False
    ready = {
        pod["metadata"]["name"]
        for pod in json.loads(listed.stdout)["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))
    }
    return {"etcd-" + host, "kube-apiserver-" + host} <= ready


def workloads_available(lab: HaLab, host: str) -> bool:
    """Every Deployment's replicas available, in every namespace, and every pod on ``host`` ready."""
    deployments = lab.kubectl("get deployments -A -o json")
    pods = lab.kubectl("get pods -A -o json --field-selector spec.nodeName=%s" % host)
    if deployments.returncode != 0 or pods.returncode != 0:
        return False
    for deployment in json.loads(deployments.stdout)["items"]:
        if deployment.get("status", {}).get("availableReplicas", 0) < deployment["spec"].get("replicas", 1):
            return False
    return all(
        pod["status"].get("phase") == "Succeeded"
        or any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))
        for pod in json.loads(pods.stdout)["items"]
    )


def failover(lab: HaLab, how: str) -> tuple[str, float]:
    """The VIP's holder (moved off ha-cp-1 first: the playbooks run from it) goes ``how`` ("powered off":
    ``systemctl poweroff`` inside it; "power cut": ``HaLab.crash``); returns the holder and the seconds
    until the API answers through the VIP again (polled every 0.5 s)."""
    holder = vip_holder_other_than_the_first(lab)
    gone_at = time.monotonic()
    if how == "powered off":
        lab.ssh(holder, "systemctl poweroff", timeout=30)  # the connection drops as the host goes
    else:
        lab.crash(holder)
    try:
        wait_for("the API through the VIP", api_answers, timeout=120, interval=0.5)
    except AssertionError as error:
        raise FailoverTimeout(
            holder, gone_at, "%s; %s gone:\n%s" % (error, holder, endpoint_state(lab, holder))
        ) from None
    return holder, time.monotonic() - gone_at


class FailoverTimeout(AssertionError):
    """The API did not answer through the VIP in time after ``holder`` went (at ``gone_at``, the
    monotonic clock's); the message says what each other control plane showed then."""

    def __init__(self, holder: str, gone_at: float, message: str) -> None:
        super().__init__(message)
        self.holder, self.gone_at = holder, gone_at


def power_on_and_settle(lab: HaLab, host: str) -> tuple[float, float, float]:
    """Boot ``host`` with its disk and wait, as an admin would before validating again, until its node is
    Ready, its etcd and API server pods are Ready, and every Deployment is available with its own pods
    ready (validated as soon as the node was Ready, KAI's admission webhook timed out). Returns the
    seconds from the boot to each.

    First waits until the host's machine has ended and its node is seen NotReady: ``systemctl
    poweroff`` takes seconds to stop the host's containers, and the API answers through the VIP
    before then; ``power_on`` leaves a machine still running alone, and the node stays Ready in the API
    for the node monitor's grace period. Booted before both, the host was never off, and a next
    failover took a second control plane with etcd's quorum (ha_bench, 28-29 Nov)."""
    wait_for("%s's machine to end" % host, lambda: host not in machines.nspawn_processes(lab.layout), 120, 0.5)
    wait_for("%s NotReady" % host, lambda: host not in nodes_ready(lab), timeout=180)
    started = time.monotonic()
    booted = lifecycle.power_on(lab.layout, lab.plan, [host], timeout=300)
    assert booted == [host], "power_on booted %s, not %s" % (booted, host)
    wait_for("%s Ready again" % host, lambda: host in nodes_ready(lab), timeout=300)
    ready = time.monotonic() - started
    wait_for("etcd and the API server Ready on %s" % host, lambda: static_pods_ready(lab, host), timeout=300)
    static = time.monotonic() - started
    wait_for("every Deployment available, %s's pods ready" % host, lambda: workloads_available(lab, host), 300)
    return ready, static, time.monotonic() - started


def install(site: HaLab, say=print) -> dict[str, float]:
    """The lab's hosts up, the site installed (gpu_nodes.yml, cluster.yml) and its stages run (site.yml
    with a short validation). Returns each step's seconds, said through ``say`` as it ends;
    AssertionError naming the playbook that failed."""
    steps = (
        ("five hosts up", ("lab.yml",), ()),
        ("three control planes and two workers installed", ("gpu_nodes.yml", "cluster.yml"), ()),
        ("site.yml", ("site.yml",), lab_site.quick_validation()),
    )
    seconds = {}
    for label, playbooks, args in steps:
        started = time.monotonic()
        for playbook in playbooks:
            run = run_playbook(str(PLAYBOOKS / playbook), *args, inventory=site.inventory, timeout=1800)
            assert run.returncode == 0, "%s: %s" % (playbook, run.tail(5000))
        seconds[label] = time.monotonic() - started
        say("[ha lab] %s: %.0f s" % (label, seconds[label]))
    return seconds


def bring_down(site: HaLab) -> None:
    """The lab's hosts removed (lab.yml with lab_state=down). AssertionError when that fails."""
    down = run_playbook(str(PLAYBOOKS / "lab.yml"), "-e", "lab_state=down", inventory=site.inventory, timeout=600)
    assert down.returncode == 0, down.tail(3000)
