"""The lab as a site of mode kubeadm (inventories/lab's settings), installed the way an admin would:
``playbooks/gpu_nodes.yml`` then ``playbooks/cluster.yml``, from the offline bundle served on the lab's
bridge, with no sandbox shortcut on the path. kubeadm init and join really run; every node is Ready,
the nvidia runtime is containerd's default on the GPU hosts (which have no GPU: the driver role says
so), CoreDNS answers and a Service reaches a pod on another host; a second run changes nothing.

Three hosts on a bridge and subnet of their own, in the lab's xdist group (a kubelet changes kernel
settings of the whole machine, which test_lab.py asserts are put back).
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import build
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import runtime_config
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import machines
from tests.e2e.conftest import REPO, run_playbook

pytestmark = pytest.mark.xdist_group("lab")

BRIDGE = "cpsite0"
GATEWAY = "10.218.0.1"
CONTROL_PLANE = {"lab-cp-1": "10.218.0.10"}
WORKERS = {"lab-worker-1": "10.218.0.11", "lab-worker-2": "10.218.0.12"}
ADDRESSES = [*CONTROL_PLANE.values(), *WORKERS.values()]
LAB = str(REPO / "playbooks" / "lab.yml")
GPU_NODES = str(REPO / "playbooks" / "gpu_nodes.yml")
CLUSTER = str(REPO / "playbooks" / "cluster.yml")
ADDED_WORKER = "lab-worker-2"
UNREACHABLE = ("lab-worker-9", "10.218.0.19")
KUBECTL = "kubectl --kubeconfig /etc/kubernetes/admin.conf "


class SiteLab:
    """A lab of three hosts whose inventory is inventories/lab's site, on this module's bridge."""

    def __init__(self, base: Path, bundle: Path) -> None:
        self.state_dir = base / "state"
        self.inventory = base / "hosts.yml"
        self.layout = machines.Layout(self.state_dir, Path.home() / ".cache" / "clusterproof" / "lab")
        site = yaml.safe_load((REPO / "inventories" / "lab" / "group_vars" / "all" / "site.yml").read_text())
        site["clusterproof_site_name"] = "lab-site-test"
        site["clusterproof_mirror"] = {
            "packages": "http://%s:8081/" % GATEWAY,
            "registry": "%s:5000" % GATEWAY,
            "insecure": True,
        }
        declaration = {
            "all": {
                "vars": {
                    **site,
                    "clusterproof_reports_dir": str(base / "reports"),
                    "lab_dir": str(self.state_dir),
                    "lab_bridge": BRIDGE,
                    "lab_host_address": GATEWAY + "/24",
                    "lab_bundle": str(bundle),
                    "site_mirror_containerd_cri_settings": {"restrict_oom_score_adj": True},
                    "ansible_user": "root",
                    "ansible_ssh_private_key_file": str(self.state_dir / "id_ed25519"),
                    "ansible_ssh_common_args": "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes"
                    % (self.state_dir / "known_hosts"),
                },
                "children": {
                    "lab": {
                        "children": {
                            "kube_control_plane": {
                                "hosts": {name: {"ansible_host": address} for name, address in CONTROL_PLANE.items()}
                            },
                            "gpu_nodes": {
                                "hosts": {
                                    name: {"ansible_host": address, "gpu_count": 0} for name, address in WORKERS.items()
                                }
                            },
                        }
                    }
                },
            }
        }
        self.inventory.write_text(yaml.safe_dump(declaration))
        lab_hosts = declaration["all"]["children"]["lab"]
        gpu_nodes = lab_hosts["children"]["gpu_nodes"]["hosts"]
        # The site before the last worker was added: a lab host, in no group of the site.
        added = gpu_nodes.pop(ADDED_WORKER)
        lab_hosts["hosts"] = {ADDED_WORKER: {"ansible_host": added["ansible_host"]}}
        self.first_inventory = base / "first.yml"
        self.first_inventory.write_text(yaml.safe_dump(declaration))
        # That site with one more worker, at an address of the bridge where no host answers.
        gpu_nodes[UNREACHABLE[0]] = {"ansible_host": UNREACHABLE[1], "gpu_count": 0}
        self.unreachable_inventory = base / "unreachable.yml"
        self.unreachable_inventory.write_text(yaml.safe_dump(declaration))

    def ssh(self, address: str, command: str, timeout: int = 120) -> subprocess.CompletedProcess:
        return machines.ssh(self.layout, address, command, timeout=timeout)

    def kubectl(self, arguments: str, timeout: int = 120) -> subprocess.CompletedProcess:
        return self.ssh(CONTROL_PLANE["lab-cp-1"], KUBECTL + arguments, timeout=timeout)


@pytest.fixture(scope="module")
def bundle() -> Path:
    layout = build.Layout(build.default_cache(), build.default_cache() / "out")
    build.build(layout, progress=lambda message: print("[bundle]", message, flush=True))
    return layout.out


@pytest.fixture(scope="module")
def site(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SiteLab]:
    """The lab up, with the bundle served; a refused install (a worker out of reach); the install of
    the control plane and one worker (gpu_nodes.yml, cluster.yml), then the same with the second
    worker added to the inventory. Each run is kept for the tests."""
    lab = SiteLab(tmp_path_factory.mktemp("site-lab"), bundle)
    settings_before = machines.read_kernel_settings()
    try:
        up = run_playbook(LAB, inventory=lab.inventory, timeout=600)
        assert up.returncode == 0, up.output[-3000:]
        # Bad input first, on the fresh hosts: a worker out of reach stops the install before any change.
        lab.refused = run_playbook(CLUSTER, "-e", "ansible_ssh_timeout=5", inventory=lab.unreachable_inventory)
        lab.kubeadm_before = {address: lab.ssh(address, "dpkg -s kubeadm").returncode for address in ADDRESSES}
        started = time.monotonic()
        lab.gpu_nodes = run_playbook(GPU_NODES, inventory=lab.first_inventory, timeout=900)
        assert lab.gpu_nodes.returncode == 0, lab.gpu_nodes.output[-5000:]
        lab.cluster = run_playbook(CLUSTER, inventory=lab.first_inventory, timeout=1200)
        assert lab.cluster.returncode == 0, lab.cluster.output[-5000:]
        print("[lab site] gpu_nodes.yml + cluster.yml, 2 hosts: %.0f s" % (time.monotonic() - started), flush=True)
        started = time.monotonic()
        lab.added = [run_playbook(playbook, inventory=lab.inventory, timeout=900) for playbook in (GPU_NODES, CLUSTER)]
        for run in lab.added:
            assert run.returncode == 0, run.output[-5000:]
        print("[lab site] the same with a worker added: %.0f s" % (time.monotonic() - started), flush=True)
        yield lab
    finally:
        down = run_playbook(LAB, "-e", "lab_state=down", inventory=lab.inventory, timeout=600)
        machines.write_kernel_settings(settings_before)
        assert down.returncode == 0, down.output[-3000:]


def _wait_for(what: str, check, timeout: float = 240.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(3)
    raise AssertionError("timed out after %.0f s waiting for %s (last: %r)" % (timeout, what, last))


def test_a_worker_out_of_reach_stops_the_install_before_any_change(site: SiteLab) -> None:
    assert site.refused.returncode != 0
    assert "fatal: [%s]: UNREACHABLE!" % UNREACHABLE[0] in site.refused.output
    # No host was touched: nothing changed, and kubeadm is not installed on any of them.
    assert site.refused.changed_tasks() == {}
    assert set(site.kubeadm_before.values()) == {1}, site.kubeadm_before


def test_the_driver_role_says_the_lab_hosts_need_hardware(site: SiteLab) -> None:
    outputs = {"lab-worker-1": site.gpu_nodes.output, ADDED_WORKER: site.added[0].output}
    for host, output in outputs.items():
        assert "needs hardware: %s has no NVIDIA device on its PCI bus" % host in output


def test_a_worker_added_to_the_inventory_joins_and_nothing_else_changes(site: SiteLab) -> None:
    for run in site.added:
        changed = run.changed_tasks()
        assert set(changed) <= {ADDED_WORKER, "lab-cp-1"}, changed
        # On the control plane only the new node's labels and taints (its token is no change).
        assert all("Label and taint the GPU nodes" in task for task in changed.get("lab-cp-1", [])), changed
    joined = site.added[1].changed_tasks()[ADDED_WORKER]
    assert any("Join the cluster with kubeadm join" in task for task in joined), joined


def test_kubeadm_init_and_join_make_every_node_ready(site: SiteLab) -> None:
    def ready_nodes():
        listed = site.kubectl("get nodes -o yaml")
        if listed.returncode != 0:
            return None
        nodes = yaml.safe_load(listed.stdout)["items"]
        ready = {
            node["metadata"]["name"]
            for node in nodes
            if any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
        }
        return ready if ready == set(CONTROL_PLANE) | set(WORKERS) else None

    _wait_for("every node Ready", ready_nodes)
    nodes = yaml.safe_load(site.kubectl("get nodes -o yaml").stdout)["items"]
    by_name = {node["metadata"]["name"]: node for node in nodes}
    assert {node["status"]["nodeInfo"]["kubeletVersion"] for node in nodes} == {"v1.36.3"}
    # Workers declared with no GPUs get no GPU label (the validator expects none of them).
    for worker in WORKERS:
        assert "nvidia.com/gpu.present" not in by_name[worker]["metadata"].get("labels", {})


def test_the_nvidia_runtime_is_containerds_default_on_the_gpu_hosts(site: SiteLab) -> None:
    for address in WORKERS.values():
        config = site.ssh(address, "cat /etc/containerd/config.toml")
        assert config.returncode == 0, config.stderr
        runtimes = runtime_config.containerd_runtimes(config.stdout)
        assert runtimes["default_runtime"] == "nvidia" and "nvidia" in runtimes["runtimes"]
        # Debian's containerd looks for CNI plugins in /usr/lib/cni: the CNI role put flannel's there.
        assert runtime_config.containerd_cni_bin_dir(config.stdout) == "/usr/lib/cni"
        assert site.ssh(address, "test -x /usr/lib/cni/flannel").returncode == 0
        # The pods the kubelet runs there (kube-proxy, flannel) were created through the nvidia runtime.
        info = site.ssh(address, "ctr -n k8s.io containers info $(ctr -n k8s.io containers ls -q | head -n 1)")
        assert info.returncode == 0, info.stderr
        # ctr shows runc's options as the protobuf containerd stores: the runtime binary is a field of it.
        options = json.loads(info.stdout)["Runtime"]["Options"]
        assert options["type_url"] == "containerd.runc.v1.Options"
        assert b"/usr/bin/nvidia-container-runtime" in base64.b64decode(options["value"])


SERVICE_MANIFEST = r"""
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  nodeName: lab-worker-1
  containers:
    - name: web
      image: busybox:1.35
      command: [/bin/sh, -c, "mkdir -p /www && echo served-by-lab-worker-1 > /www/index.html && exec httpd -f -p 8080 -h /www"]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default}
spec:
  nodeName: lab-worker-2
  restartPolicy: Never
  containers:
    - name: client
      image: busybox:1.35
      # Debian's busybox-static: its nslookup asks CoreDNS itself; its wget crashes (a segmentation
      # fault, even given an address and port), so nc fetches the page from the address found.
      command:
        - /bin/sh
        - -c
        - >-
          until address=$(nslookup web.default.svc.cluster.local | awk '/^Address: /{print $2}' | tail -n 1) &&
          [ -n "$address" ] && printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 "$address" 80 | tail -n 1 | grep .;
          do sleep 2; done
"""


def test_coredns_answers_and_a_service_reaches_a_pod_on_another_host(site: SiteLab) -> None:
    applied = site.kubectl("apply -f - <<'MANIFEST'\n%sMANIFEST" % SERVICE_MANIFEST.lstrip("\n"), timeout=60)
    assert applied.returncode == 0, applied.stderr

    def client_done():
        phase = site.kubectl("get pod client -o jsonpath={.status.phase}").stdout
        return phase if phase in ("Succeeded", "Failed") else None

    assert _wait_for("the client pod to fetch the page through the Service", client_done, timeout=300) == "Succeeded"
    # The name resolved through CoreDNS to the Service, which kube-proxy sent across hosts (flannel).
    assert site.kubectl("logs client").stdout.strip() == "served-by-lab-worker-1"


def test_a_second_run_changes_nothing_and_keeps_the_nvidia_runtime(site: SiteLab) -> None:
    for playbook in (GPU_NODES, CLUSTER):
        again = run_playbook(playbook, inventory=site.inventory, timeout=900)
        assert again.returncode == 0, again.output[-5000:]
        assert again.changed_tasks() == {}, playbook
    for address in WORKERS.values():
        config = site.ssh(address, "cat /etc/containerd/config.toml").stdout
        assert runtime_config.containerd_runtimes(config)["default_runtime"] == "nvidia"


def test_check_mode_on_the_converged_lab_reports_no_change(site: SiteLab) -> None:
    for playbook in (GPU_NODES, CLUSTER):
        checked = run_playbook(playbook, "--check", "--diff", inventory=site.inventory, timeout=900)
        assert checked.returncode == 0, checked.output[-5000:]
        assert checked.changed_tasks() == {}, playbook
