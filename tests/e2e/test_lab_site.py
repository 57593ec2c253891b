"""The lab as a site of mode kubeadm (inventories/lab's settings), installed the way an admin would:
``playbooks/gpu_nodes.yml`` then ``playbooks/cluster.yml``, from the offline bundle served on the lab's
bridge, with no sandbox shortcut on the path. kubeadm init and join really run; every node is Ready,
the nvidia runtime is containerd's default on the GPU hosts (which have no GPU: the driver role says
so), CoreDNS answers and a Service reaches a pod on another host; a second run changes nothing.
Then ``playbooks/site.yml``: local-path and KAI from the bundle's charts as pods of the lab hosts,
two simulated DGX-1s attached to the lab's API server, the validation with pods that really run
(a claim read back, a user's plain pod admitted by KAI's webhook) and the documents' fairness
scenarios on the Helm-installed KAI; a second site.yml changes nothing but the report.

Three hosts on a bridge and subnet of their own, in the lab's xdist group (a kubelet changes kernel
settings of the whole machine, which test_lab.py asserts are put back).
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import build
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import runtime_config
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import machines
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads
from tests.e2e import lab_site
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
SITE = str(REPO / "playbooks" / "site.yml")
SIMULATED = lab_site.SIMULATED
VALIDATE = str(REPO / "playbooks" / "validate.yml")


class SiteLab:
    """A lab of three hosts whose inventory is inventories/lab's site, on this module's bridge."""

    def __init__(self, base: Path, bundle: Path) -> None:
        self.state_dir = base / "state"
        self.reports = base / "reports"
        self.inventory = base / "hosts.yml"
        self.layout = machines.Layout(self.state_dir, Path.home() / ".cache" / "clusterproof" / "lab")
        declaration = lab_site.declaration(
            "lab-site-test",
            GATEWAY,
            BRIDGE,
            CONTROL_PLANE,
            WORKERS,
            base,
            bundle,
            # KWOK beside the cluster, apart from a lab an admin may run (16479). The monitoring stage on:
            # Prometheus and kube-state-metrics as pods from the bundle (docs/monitoring.md).
            {"simulated_gpu_nodes_port": 16489, "clusterproof_monitoring": True},
        )
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
    try:
        up = run_playbook(LAB, inventory=lab.inventory, timeout=600)
        assert up.returncode == 0, up.tail(3000)
        # Bad input first, on the fresh hosts: a worker out of reach stops the install before any change.
        lab.refused = run_playbook(CLUSTER, "-e", "ansible_ssh_timeout=5", inventory=lab.unreachable_inventory)
        lab.kubeadm_before = {address: lab.ssh(address, "dpkg -s kubeadm").returncode for address in ADDRESSES}
        started = time.monotonic()
        lab.gpu_nodes = run_playbook(GPU_NODES, inventory=lab.first_inventory, timeout=900)
        assert lab.gpu_nodes.returncode == 0, lab.gpu_nodes.tail(5000)
        lab.cluster = run_playbook(CLUSTER, inventory=lab.first_inventory, timeout=1200)
        assert lab.cluster.returncode == 0, lab.cluster.tail(5000)
        print("[lab site] gpu_nodes.yml + cluster.yml, 2 hosts: %.0f s" % (time.monotonic() - started), flush=True)
        started = time.monotonic()
        lab.added = [run_playbook(playbook, inventory=lab.inventory, timeout=900) for playbook in (GPU_NODES, CLUSTER)]
        for run in lab.added:
            assert run.returncode == 0, run.tail(5000)
        print("[lab site] the same with a worker added: %.0f s" % (time.monotonic() - started), flush=True)
        yield lab
    finally:
        lab_site.keep_machine_logs(lab.layout.state_dir / "logs", lab.state_dir.parent / "machine-logs")
        started = time.monotonic()
        down = run_playbook(LAB, "-e", "lab_state=down", inventory=lab.inventory, timeout=600)
        print("[lab site] lab down after the site: %.0f s" % (time.monotonic() - started), flush=True)
        assert down.returncode == 0, down.tail(3000)


def _wait_for(what: str, check, timeout: float = 240.0, detail=lambda: ""):
    """``check()``'s first true answer within ``timeout``; else fail with the last one and ``detail()``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(3)
    raise AssertionError("timed out after %.0f s waiting for %s (last: %r)%s" % (timeout, what, last, detail()))


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
        # The lab's hosts, and its simulated GPU nodes (KWOK's, beside the cluster).
        return ready if ready == set(CONTROL_PLANE) | set(WORKERS) | set(SIMULATED) else None

    _wait_for("every node Ready", ready_nodes)
    nodes = yaml.safe_load(site.kubectl("get nodes -o yaml").stdout)["items"]
    by_name = {node["metadata"]["name"]: node for node in nodes}
    nodes = [node for node in nodes if node["metadata"]["name"] not in SIMULATED]
    assert {node["status"]["nodeInfo"]["kubeletVersion"] for node in nodes} == {"v1.36.3"}
    # Workers declared with no GPUs get no GPU label (the validator expects none of them).
    for worker in WORKERS:
        assert "nvidia.com/gpu.present" not in by_name[worker]["metadata"].get("labels", {})
    # kube-scheduler runs with clusterproof's configuration (GPUs bin-packed, as the model places jobs).
    scheduler = yaml.safe_load(site.kubectl("get pod -n kube-system kube-scheduler-lab-cp-1 -o yaml").stdout)
    assert "--config=/etc/kubernetes/clusterproof-scheduler.yaml" in scheduler["spec"]["containers"][0]["command"]
    assert scheduler["status"]["phase"] == "Running"


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

    phase = _wait_for("the client pod to fetch the page through the Service", client_done, timeout=300)
    assert phase == "Succeeded", site.kubectl("logs client").stdout + lab_site.cluster_state(site.kubectl)
    # The name resolved through CoreDNS to the Service, which kube-proxy sent across hosts (flannel).
    # The client retries until the Service has its endpoint; a refused try before that is in its log too.
    assert site.kubectl("logs client").stdout.strip().splitlines()[-1] == "served-by-lab-worker-1"


def test_a_second_run_changes_nothing_and_keeps_the_nvidia_runtime(site: SiteLab) -> None:
    for playbook in (GPU_NODES, CLUSTER):
        again = run_playbook(playbook, inventory=site.inventory, timeout=900)
        assert again.returncode == 0, again.tail(5000)
        assert again.changed_tasks() == {}, playbook
    for address in WORKERS.values():
        config = site.ssh(address, "cat /etc/containerd/config.toml").stdout
        assert runtime_config.containerd_runtimes(config)["default_runtime"] == "nvidia"


def test_check_mode_on_the_converged_lab_reports_no_change(site: SiteLab) -> None:
    for playbook in (GPU_NODES, CLUSTER):
        checked = run_playbook(playbook, "--check", "--diff", inventory=site.inventory, timeout=900)
        assert checked.returncode == 0, checked.tail(5000)
        assert checked.changed_tasks() == {}, playbook


@pytest.fixture(scope="module")
def site_stages(site: SiteLab) -> SiteLab:
    """The rest of the site on the converged lab: site.yml (the GPU stack, storage, KAI and the
    projects through Helm from the bundle, the simulated GPU nodes, then the validation and its
    report), run twice; each run is kept for the tests."""
    started = time.monotonic()
    site.site_run = run_playbook(SITE, inventory=site.inventory, timeout=1800)
    print("[lab site] site.yml on the converged lab: %.0f s" % (time.monotonic() - started), flush=True)
    report = site.reports / "lab-site-test" / "latest" / "report.json"
    # A run that stopped before its report says why (every test of the stages would fail on the file).
    assert report.exists(), site.site_run.tail(6000) + lab_site.cluster_state(site.kubectl)
    site.report = json.loads(report.read_text())
    started = time.monotonic()
    site.site_again = run_playbook(
        SITE, "-e", '{"validate_scenarios_files": []}', inventory=site.inventory, timeout=1800
    )
    print("[lab site] site.yml again, without the scenarios: %.0f s" % (time.monotonic() - started), flush=True)
    return site


def test_kai_and_local_path_run_as_pods_of_their_charts_installed_from_the_bundle(site_stages: SiteLab) -> None:
    assert site_stages.site_run.returncode == 0, site_stages.site_run.tail(5000) + lab_site.cluster_state(
        site_stages.kubectl
    )
    # helm on the control-plane host is the bundle's package; the releases are the bundle's charts.
    assert site_stages.ssh(CONTROL_PLANE["lab-cp-1"], "dpkg -s helm").returncode == 0
    releases = json.loads(
        site_stages.ssh(
            CONTROL_PLANE["lab-cp-1"], "helm list -A -o json --kubeconfig /etc/kubernetes/admin.conf"
        ).stdout
    )
    assert {(r["name"], r["chart"], r["status"]) for r in releases} >= {
        ("kai-scheduler", "kai-scheduler-0.12.0", "deployed"),
        ("local-path-provisioner", "local-path-provisioner-0.0.30", "deployed"),
    }
    pods = yaml.safe_load(site_stages.kubectl("get pods -n kai-scheduler -o yaml").stdout)["items"]
    pods += yaml.safe_load(site_stages.kubectl("get pods -n local-path-storage -o yaml").stdout)["items"]
    components = {pod["metadata"]["name"].rsplit("-", 2)[0]: pod for pod in pods}
    # KAI's chart deploys its admission webhook, binder, pod grouper, queue controller and scheduler.
    assert {"admission", "binder", "pod-grouper", "queue-controller", "local-path-provisioner"} <= set(components)
    for name, pod in components.items():
        assert pod["status"]["phase"] == "Running", name
        # On a lab host, not on a simulated node (tainted: nothing of the cluster's own lands there).
        assert pod["spec"]["nodeName"] in set(CONTROL_PLANE) | set(WORKERS), (name, pod["spec"]["nodeName"])


def test_the_report_names_the_simulated_nodes_and_reads_back_what_a_pod_wrote(site_stages: SiteLab) -> None:
    checks = lab_site.report_checks(site_stages.report)
    for node in SIMULATED:
        assert checks["gpu-nodes/%s/gpu-count" % node]["status"] == "pass"
        assert checks["gpu-nodes/%s/present" % node]["observed"] == "found, simulated by KWOK"
        assert "(simulated)" in checks["gpu-nodes/%s/ready" % node]["title"]
    assert checks["cluster/gpu-total"]["observed"] == 16
    for worker in WORKERS:
        assert checks["gpu-nodes/%s/gpu-count" % worker]["observed"] == 0
    # Pods really run on the lab: a second pod read back, through the claim, what the first wrote.
    assert checks["storage/default-binds"]["status"] == "pass"
    readback = checks["storage/default-readback"]
    assert (readback["status"], readback["observed"]) == ("pass", "default-consumer"), readback
    # Two pods on two hosts share a ReadWriteMany claim (the lab's shared directory) and each sees
    # the other's line in the file.
    shared = checks["storage/rwx-shared"]
    assert shared["status"] == "pass", shared
    pods = shared["observed"]["pods"]
    assert len({pod["node"] for pod in pods.values()}) == 2, pods
    assert set(shared["observed"]["read back"].split()) == {"shared-a", "shared-b"}, shared
    # The GPU tests need hardware the lab hosts lack; what they can check there passes.
    assert checks["host-tests/lab-worker-1/gpu-count-is-the-inventorys"]["status"] == "needs-hardware"
    assert checks["host-tests/lab-worker-1/containerd-runs-the-nvidia-runtime"]["status"] == "pass"


def test_the_fairness_scenarios_pass_on_the_helm_installed_kai(site_stages: SiteLab) -> None:
    checks = lab_site.report_checks(site_stages.report)
    scenario = {check_id: check for check_id, check in checks.items() if check_id.startswith("scenario/")}
    assert scenario, sorted(checks)
    failed = {check_id: check.get("message") for check_id, check in scenario.items() if check["status"] == "fail"}
    assert failed == {}
    # Scenario namespaces are always removed afterwards.
    namespaces = site_stages.kubectl("get namespaces -o name").stdout.split()
    assert not [name for name in namespaces if name.startswith("namespace/scn-")], namespaces
    assert site_stages.report["verdict"] == "pass", [c for c in checks.values() if c["status"] == "fail"]


def _prometheus(lab: SiteLab, query: str) -> list[dict]:
    """An instant query of the stage's Prometheus, through the API server's proxy."""
    path = "/api/v1/namespaces/clusterproof-monitoring/services/prometheus:9090/proxy/api/v1/query?query=" + (
        urllib.parse.quote(query, safe="")
    )
    answered = lab.kubectl("get --raw '%s'" % path)
    assert answered.returncode == 0, answered.stderr
    return json.loads(answered.stdout)["data"]["result"]


def test_prometheus_runs_as_pods_from_the_bundle_and_its_checks_pass(site_stages: SiteLab) -> None:
    checks = lab_site.report_checks(site_stages.report)
    monitoring = {check_id: check for check_id, check in checks.items() if check_id.startswith("monitoring/")}
    failed = {check_id: check.get("message") for check_id, check in monitoring.items() if check["status"] == "fail"}
    assert failed == {}, failed
    # Every job found its targets by DNS: each kube-scheduler, KAI's scheduler and queue controller.
    assert {
        "monitoring/target/kubernetes-apiserver",
        "monitoring/target/kube-scheduler-resources",
        "monitoring/target/kube-state-metrics",
        "monitoring/target/prometheus",
        "monitoring/target/kai-scheduler",
        "monitoring/target/kai-queuecontroller",
        "monitoring/rules",
    } <= set(monitoring), sorted(monitoring)
    # Each project's GPUs as Prometheus records them, against its pods.
    assert [check_id for check_id in monitoring if check_id.startswith("monitoring/allocation/")], sorted(monitoring)
    section = next(s for s in site_stages.report["sections"] if s["id"] == "monitoring")
    assert "/api/v1/namespaces/clusterproof-monitoring/services/prometheus:9090/proxy" in json.dumps(section)
    pods = yaml.safe_load(site_stages.kubectl("get pods -n clusterproof-monitoring -o yaml").stdout)["items"]
    images = {pod["spec"]["containers"][0]["image"] for pod in pods if pod["status"]["phase"] == "Running"}
    assert images == {versions.PROMETHEUS_IMAGE, versions.KUBE_STATE_METRICS_IMAGE}, images
    # On a lab host, not a simulated node; the samples on a claim of local-path, the default class.
    assert {pod["spec"]["nodeName"] for pod in pods} <= set(CONTROL_PLANE) | set(WORKERS)
    claim = yaml.safe_load(site_stages.kubectl("get pvc -n clusterproof-monitoring prometheus-data -o yaml").stdout)
    assert (claim["status"]["phase"], claim["spec"]["storageClassName"]) == ("Bound", "local-path"), claim
    # Figures, not a test: what Prometheus costs on the lab (its own process metrics).
    memory = _prometheus(site_stages, 'process_resident_memory_bytes{job="prometheus"}')
    cpu = _prometheus(site_stages, 'rate(process_cpu_seconds_total{job="prometheus"}[5m])')
    series = _prometheus(site_stages, "prometheus_tsdb_head_series")
    print(
        "[lab site] Prometheus on the lab: %.0f MiB resident, %.3f CPU (5 min rate), %s series"
        % (
            float(memory[0]["value"][1]) / 2**20,
            float(cpu[0]["value"][1]) if cpu else float("nan"),
            series[0]["value"][1] if series else "?",
        ),
        flush=True,
    )


def _monitoring_validation(lab: SiteLab):
    """validate.yml with the monitoring checks alone beside the cluster's (no scenarios, storage
    probe, benchmarks or host tests), and its seconds."""
    settings = {
        "validate_scenarios_files": [],
        "clusterproof_benchmarks": False,
        "clusterproof_host_tests": False,
        "clusterproof_storage_classes": [],
    }
    started = time.monotonic()
    run = run_playbook(VALIDATE, "-e", json.dumps(settings), inventory=lab.inventory, timeout=900)
    return run, time.monotonic() - started


def _scale(lab: SiteLab, deployment: str, replicas: int) -> None:
    scaled = lab.kubectl("scale -n kai-scheduler %s --replicas=%d" % (deployment, replicas))
    assert scaled.returncode == 0, scaled.stderr


def test_kai_s_queue_controller_stopped_fails_its_metrics_check_with_the_cause_and_the_next_run_passes(
    site_stages: SiteLab,
) -> None:
    # KAI's operator puts back whatever is changed of its components: it is stopped first, so that the
    # queue controller (whose metrics are the queues' quota and allocation) stays stopped.
    deployments = site_stages.kubectl("get deployments -n kai-scheduler -o name").stdout.split()
    operators = [name for name in deployments if "operator" in name]
    assert operators and "deployment.apps/queue-controller" in deployments, deployments

    def queue_controller_pods() -> list[dict]:
        pods = yaml.safe_load(site_stages.kubectl("get pods -n kai-scheduler -o yaml").stdout)["items"]
        return [pod for pod in pods if pod["metadata"]["name"].startswith("queue-controller-")]

    try:
        for operator in operators:
            _scale(site_stages, operator, 0)
        _scale(site_stages, "deployment.apps/queue-controller", 0)
        _wait_for("the queue controller gone", lambda: not queue_controller_pods(), timeout=180)
        broken, broken_s = _monitoring_validation(site_stages)
        assert broken.returncode != 0
        checks = lab_site.report_checks(_latest_report(site_stages))
        check = checks["monitoring/target/kai-queuecontroller"]
        assert check["status"] == "fail", check
        # The cause, in Prometheus's words: nothing answers at the queue controller's Service.
        assert "Prometheus cannot scrape the GPU scheduler's metrics (kai-queuecontroller)" in check["message"], check
        others = {k: c["status"] for k, c in checks.items() if k.startswith("monitoring/target/")}
        assert {k: v for k, v in others.items() if v != "pass"} == {"monitoring/target/kai-queuecontroller": "fail"}
    finally:
        for operator in operators:
            _scale(site_stages, operator, 1)
    _wait_for(
        "KAI's operator to bring the queue controller back, Running",
        lambda: [p for p in queue_controller_pods() if p["status"].get("phase") == "Running"],
        timeout=300,
    )
    healed, healed_s = _monitoring_validation(site_stages)
    assert healed.returncode == 0, healed.tail(4000)
    checks = lab_site.report_checks(_latest_report(site_stages))
    assert checks["monitoring/target/kai-queuecontroller"]["status"] == "pass"
    # Figures, not a test: a validation of the cluster with the monitoring checks, stopped and healthy, and
    # what the monitoring checks took of it (the task's line of the run's task timings).
    print(
        "[lab site] validate with the monitoring, queue controller stopped: %.0f s; healthy: %.0f s"
        % (broken_s, healed_s)
    )
    for line in healed.output.splitlines():
        if "Check Prometheus against the cluster" in line and line.rstrip().endswith("s"):
            print("[lab site] %s" % line.strip(), flush=True)


def test_a_second_site_run_changes_nothing_but_the_report(site_stages: SiteLab) -> None:
    again = site_stages.site_again
    assert again.returncode == 0, again.tail(5000)
    changed = again.changed_tasks()
    assert changed == {"lab-cp-1": ["Write the site validation report"]}, changed
    for address in WORKERS.values():
        config = site_stages.ssh(address, "cat /etc/containerd/config.toml").stdout
        assert runtime_config.containerd_runtimes(config)["default_runtime"] == "nvidia"


def test_site_check_mode_on_the_converged_lab_reports_no_change(site_stages: SiteLab) -> None:
    checked = run_playbook(
        SITE, "--check", "--diff", "-e", '{"validate_scenarios_files": []}', inventory=site_stages.inventory
    )
    assert checked.returncode == 0, checked.tail(5000)
    # As in the second run: nothing but the report, which a run always writes anew (here it says it would).
    assert checked.changed_tasks() == {"lab-cp-1": ["Write the site validation report"]}, checked.changed_tasks()


PLAIN_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: notebook
  namespace: team-a
  labels: {kai.scheduler/queue: team-a}
  annotations: {gpu-fraction: "0.5"}
spec:
  schedulerName: kai-scheduler
  tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
  containers: [{name: main, image: busybox:1.35, command: [sleep, "3600"]}]
"""


def test_a_user_s_plain_pod_with_a_gpu_fraction_is_admitted_by_kai_s_webhook_and_bound(site_stages: SiteLab) -> None:
    # As KAI's documentation writes it: KAI's scheduler name, the queue label and the gpu-fraction
    # annotation, nothing else (the toleration is the lab's: its GPU nodes are simulated and tainted).
    applied = site_stages.kubectl("apply -f - <<'MANIFEST'\n%sMANIFEST" % PLAIN_POD.lstrip("\n"), timeout=60)
    assert applied.returncode == 0, applied.stderr
    try:

        def bound():
            pod = yaml.safe_load(site_stages.kubectl("get pod notebook -n team-a -o yaml").stdout)
            return pod if pod["spec"].get("nodeName") else None

        pod = _wait_for("KAI to bind the notebook pod", bound, timeout=180)
        assert pod["spec"]["nodeName"] in SIMULATED
        # KAI's admission webhook, not the user, gave it what GPU sharing needs: the shared GPU's
        # ConfigMap, the device it may see from there, and the nvidia runtime.
        assert pod["metadata"]["annotations"].get("runai/shared-gpu-configmap"), pod["metadata"]
        env = {item["name"]: item for item in pod["spec"]["containers"][0].get("env", [])}
        assert "configMapKeyRef" in env["NVIDIA_VISIBLE_DEVICES"]["valueFrom"]
        assert pod["spec"]["runtimeClassName"] == "nvidia"
    finally:
        site_stages.kubectl("delete pod notebook -n team-a --wait=false")


def test_real_pods_try_a_connection_between_projects_and_the_report_says_what_they_found(
    site_stages: SiteLab,
) -> None:
    checks = lab_site.report_checks(site_stages.report)
    reach = {key: check for key, check in checks.items() if key.endswith("/network-reach")}
    assert len(reach) == 4, sorted(checks)
    for key, check in reach.items():
        project = key.split("/")[1]
        # The control: the project's own pod reaches its Service by name (DNS answered).
        assert check["observed"]["from %s (its own)" % project] == "connected", check
        # Flannel enforces no NetworkPolicy, and this machine's kernel cannot run kube-network-policies
        # (no nft queue, docs/tenancy.md): another project's pod gets through, and the report says so.
        assert check["status"] == "warn" and "opened a connection to %s's Service" % project in check["message"], check
    left = site_stages.kubectl("get pods,services -A -l clusterproof.io/probe=network -o name")
    assert left.returncode == 0 and left.stdout.split() == [], left.stdout


def test_each_real_kubelet_checks_the_pull_credentials_of_cached_images(site_stages: SiteLab) -> None:
    # Read from each kubelet's own configuration (its /configz through the API server), the KWOK GPU
    # nodes left out: Kubernetes 1.36's default, which the lab's kubelets keep.
    check = lab_site.report_checks(site_stages.report)["isolation/image-credentials"]
    assert check["status"] == "pass", check
    assert check["observed"] == {host: "NeverVerifyPreloadedImages" for host in (*CONTROL_PLANE, *WORKERS)}, check


def _node_ready(lab: SiteLab, node: str) -> str:
    listed = lab.kubectl("get node %s -o yaml" % node)
    assert listed.returncode == 0, listed.stderr
    conditions = yaml.safe_load(listed.stdout)["status"]["conditions"]
    return next(c["status"] for c in conditions if c["type"] == "Ready")


def _probe_leftovers(lab: SiteLab) -> list[str]:
    """The storage probe's namespaces and volumes still in the cluster."""
    namespaces = lab.kubectl("get namespaces -l clusterproof.io/probe=storage -o name").stdout.split()
    volumes = yaml.safe_load(lab.kubectl("get pv -o yaml").stdout)["items"]
    return namespaces + [
        "pv/" + volume["metadata"]["name"]
        for volume in volumes
        if ((volume["spec"].get("claimRef") or {}).get("namespace") or "").startswith("clusterproof-storage-probe-")
    ]


def _timed_validation(lab: SiteLab):
    """validate.yml without the scenarios (the storage probe's pods really run), and its seconds."""
    started = time.monotonic()
    run = run_playbook(VALIDATE, *_validate_args([], True), inventory=lab.inventory, timeout=900)
    return run, time.monotonic() - started


def _kubelet_back(lab: SiteLab, worker: str) -> None:
    _wait_for("%s Ready again" % worker, lambda: _node_ready(lab, worker) == "True", timeout=180)


def test_a_worker_whose_kubelet_stopped_fails_its_check_with_the_reason_and_the_next_run_passes(
    site_stages: SiteLab,
) -> None:
    # The storage probe's pods tolerate every taint (to reach tainted GPU nodes), NotReady's too: they
    # go only to the nodes Ready at the start, so the stopped worker costs no wait.
    worker = "lab-worker-1"
    assert site_stages.ssh(WORKERS[worker], "systemctl stop kubelet").returncode == 0
    try:
        _wait_for("%s NotReady" % worker, lambda: _node_ready(site_stages, worker) != "True", timeout=180)
        broken, broken_s = _timed_validation(site_stages)
        # A failed check with its reason, not a crash or a hang: the report is written and says why.
        assert broken.returncode != 0
        checks = lab_site.report_checks(_latest_report(site_stages))
        check = checks["gpu-nodes/%s/ready" % worker]
        assert check["status"] == "fail" and "node %s is not Ready" % worker in check["message"], check
        for probe in ("storage/default-binds", "storage/default-readback", "storage/rwx-shared", "storage/cleanup"):
            found = checks[probe]
            assert found["status"] == "pass", (probe, found.get("message"), found.get("observed"))
        placed = {pod["node"] for pod in checks["storage/rwx-shared"]["observed"]["pods"].values()}
        assert worker not in placed, placed
    finally:
        assert site_stages.ssh(WORKERS[worker], "systemctl start kubelet").returncode == 0
    _kubelet_back(site_stages, worker)
    healed, healed_s = _timed_validation(site_stages)
    assert healed.returncode == 0, healed.tail(4000)
    assert lab_site.report_checks(_latest_report(site_stages))["gpu-nodes/%s/ready" % worker]["status"] == "pass"
    # A figure, not a test: CPU shared with the other tests moves it by a minute (docs/lab.md).
    print("[lab site] validate with %s's kubelet stopped: %.0f s; healthy: %.0f s" % (worker, broken_s, healed_s))


def test_a_worker_whose_kubelet_stops_during_the_storage_probe_is_named_and_nothing_of_the_run_stays(
    site_stages: SiteLab,
) -> None:
    # The other nodes cordoned: the probe's pods can only go to the worker whose kubelet then stops.
    worker, others = "lab-worker-1", ("lab-cp-1", "lab-worker-2")
    for node in others:
        assert site_stages.kubectl("cordon %s" % node).returncode == 0
    try:
        started = time.monotonic()
        with _validating(site_stages, *_validate_args([], True)) as runs:
            _wait_for(
                "a storage probe pod running on %s" % worker,
                lambda: site_stages.kubectl(
                    "get pods -A -l clusterproof.io/probe-group -o name "
                    "--field-selector spec.nodeName=%s,status.phase=Running" % worker
                ).stdout.split(),
                timeout=300,
            )
            assert site_stages.ssh(WORKERS[worker], "systemctl stop kubelet").returncode == 0
        broken_s = time.monotonic() - started
    finally:
        for node in others:
            site_stages.kubectl("uncordon %s" % node)
    try:
        assert runs[0].returncode != 0
        checks = lab_site.report_checks(_latest_report(site_stages))
        named = [
            check["id"]
            for check in checks.values()
            if check["id"].startswith("storage/") and "node %s went away" % worker in (check.get("message") or "")
        ]
        assert named, {key: value for key, value in checks.items() if key.startswith("storage/")}
        cleanup = checks["storage/cleanup"]
        # The pods of the stopped worker were removed at once, so the namespace went; the volume on that
        # worker waits for it (a warning naming it), never a request to delete by hand.
        assert cleanup["status"] in ("pass", "warn") and not cleanup["observed"]["namespace_left"], cleanup
        assert "by hand" not in (cleanup.get("message") or "")
        assert "%s on %s" % ("default-consumer", worker) in cleanup["message"], cleanup
        assert not site_stages.kubectl("get namespaces -l clusterproof.io/probe=storage -o name").stdout.split()
    finally:
        assert site_stages.ssh(WORKERS[worker], "systemctl start kubelet").returncode == 0
    _kubelet_back(site_stages, worker)
    healed, healed_s = _timed_validation(site_stages)
    assert healed.returncode == 0, healed.tail(4000)
    leftovers = lab_site.report_checks(_latest_report(site_stages))["storage/earlier-leftovers"]
    assert leftovers["status"] == "pass", leftovers
    assert _probe_leftovers(site_stages) == []
    # Figures, not a test (the node controller's grace period, about 40-50 s, is in the first; CI's
    # other tests moved it from 70 to 120 s).
    print(
        "[lab site] validate with %s's kubelet stopped during the probe: %.0f s; the next, healthy: %.0f s (%s)"
        % (worker, broken_s, healed_s, leftovers.get("message") or "nothing left to remove")
    )


def _validate_args(scenarios: list[str], storage: bool) -> tuple[str, ...]:
    """validate.yml's extra vars for a short run: the scenario files given; the storage probe only
    when ``storage`` (its pods tolerate every taint and wait out their timeout on a broken node)."""
    settings: dict = {
        "validate_scenarios_files": scenarios,
        "clusterproof_benchmarks": False,
        "clusterproof_host_tests": False,
        # The faults' runs check what each fault breaks; the monitoring has its own tests below.
        "clusterproof_monitoring": False,
    }
    if not storage:
        settings["clusterproof_storage_classes"] = []
    return ("-e", json.dumps(settings))


@contextlib.contextmanager
def _validating(lab: SiteLab, *args: str) -> Iterator[list]:
    """validate.yml with ``args`` running in the background while the block makes its fault; after
    the block it has ended (neither hung nor crashed the test): its run is the list's one item."""
    runs: list = []
    validation = threading.Thread(
        target=lambda: runs.append(run_playbook(VALIDATE, *args, inventory=lab.inventory, timeout=900))
    )
    validation.start()
    try:
        yield runs
    finally:
        validation.join(timeout=960)
    assert not validation.is_alive() and runs, "validate.yml did not end"


def _latest_report(lab: SiteLab) -> dict:
    return json.loads((lab.reports / "lab-site-test" / "latest" / "report.json").read_text())


def _scenario_namespaces(lab: SiteLab) -> list[str]:
    names = lab.kubectl("get namespaces -o name").stdout.split()
    return [name for name in names if name.startswith("namespace/scn-")]


def _kai_scheduler_pods(lab: SiteLab) -> list[dict]:
    pods = yaml.safe_load(lab.kubectl("get pods -n kai-scheduler -o yaml").stdout)["items"]
    # KAI's operator runs the scheduler shard as Deployment kai-scheduler-default.
    return [pod for pod in pods if pod["metadata"]["name"].startswith("kai-scheduler-default-")]


def test_the_kai_scheduler_pod_deleted_during_a_scenario_fails_no_worse_than_a_check_and_the_next_run_passes(
    site_stages: SiteLab,
) -> None:
    scenario = [str(REPO / "scenarios" / "netapp-runai-4.8-4.10.yml")]
    before = _kai_scheduler_pods(site_stages)
    assert before, "no KAI scheduler pod in namespace kai-scheduler"
    with _validating(site_stages, *_validate_args(scenario, False)) as runs:

        def scenario_pods_run() -> bool:
            listed = site_stages.kubectl("get pods -A -o yaml")
            pods = yaml.safe_load(listed.stdout)["items"] if listed.returncode == 0 else []
            return any(
                pod["metadata"]["namespace"].startswith("scn-") and pod["status"].get("phase") == "Running"
                for pod in pods
            )

        _wait_for("the scenario's first workloads to run", scenario_pods_run, timeout=300)
        names = " ".join(pod["metadata"]["name"] for pod in before)
        deleted = site_stages.kubectl("delete pod -n kai-scheduler --wait=false %s" % names)
        assert deleted.returncode == 0, deleted.stderr
    report = _latest_report(site_stages)
    scenario_checks = [c for c in lab_site.report_checks(report).values() if c["id"].startswith("scenario/")]
    assert scenario_checks, sorted(lab_site.report_checks(report))
    for check in scenario_checks:
        # A step that could not settle, or that settled otherwise than the model, says why.
        assert check["status"] in ("pass", "warn") or check.get("message"), check
    assert runs[0].returncode == 0 or report["verdict"] == "fail", runs[0].tail(3000)
    # Scenario namespaces are always removed afterwards.
    assert _scenario_namespaces(site_stages) == []
    # KAI's operator made the scheduler again; the next run is clean.
    _wait_for(
        "a new KAI scheduler pod, Running",
        lambda: [p for p in _kai_scheduler_pods(site_stages) if p["status"].get("phase") == "Running"],
        timeout=240,
    )
    again = run_playbook(VALIDATE, *_validate_args(scenario, False), inventory=site_stages.inventory, timeout=900)
    assert again.returncode == 0, again.tail(4000)
    assert _latest_report(site_stages)["verdict"] == "pass"
    assert _scenario_namespaces(site_stages) == []


def test_containerd_restarted_on_a_worker_during_validation_leaves_its_pods_and_the_next_run_passes(
    site_stages: SiteLab,
) -> None:
    worker = WORKERS["lab-worker-1"]
    pods_before = site_stages.kubectl(
        "get pods -A --field-selector spec.nodeName=lab-worker-1,status.phase=Running -o name"
    ).stdout.split()
    assert pods_before, "no pod runs on lab-worker-1"
    with _validating(site_stages, *_validate_args([], True)):
        time.sleep(20)  # into the validation: the node checks, then the storage probe's pods
        restarted = site_stages.ssh(worker, "systemctl restart containerd")
        assert restarted.returncode == 0, restarted.stderr
    report = _latest_report(site_stages)
    for check in lab_site.report_checks(report).values():
        assert check["status"] != "fail" or check.get("message"), check
    # containerd's restart leaves the containers it runs (their shims outlive it): the same pods run.
    assert site_stages.ssh(worker, "systemctl is-active containerd").stdout.strip() == "active"
    pods_after = site_stages.kubectl(
        "get pods -A --field-selector spec.nodeName=lab-worker-1,status.phase=Running -o name"
    ).stdout.split()
    assert set(pods_before) <= set(pods_after), (pods_before, pods_after)
    config = site_stages.ssh(worker, "cat /etc/containerd/config.toml").stdout
    assert runtime_config.containerd_runtimes(config)["default_runtime"] == "nvidia"
    again = run_playbook(VALIDATE, *_validate_args([], True), inventory=site_stages.inventory, timeout=900)
    assert again.returncode == 0, again.tail(4000)
    assert _latest_report(site_stages)["verdict"] == "pass"


def test_an_interactive_workload_on_a_lab_host_is_ended_at_its_time_limit(site_stages: SiteLab) -> None:
    # The Job the validator and the engines build for interactive work in a project with a time limit,
    # held to a real host (the lab's GPUs are simulated, so no engine is involved: the default
    # scheduler places it, and a fraction asks for no GPU resource), with a container that would run
    # for an hour.
    limit = 20
    settings = workloads.ProjectSettings(
        "team-a", interactive_nodes=("lab-worker-1",), interactive_time_limit_seconds=limit
    )
    job = workloads.base_job(
        workloads.Workload("notebook-limit", "team-a", workloads.INTERACTIVE, 0.5, image="busybox:1.35"), settings
    )
    job["spec"]["template"]["spec"]["containers"][0]["command"] = ["sleep", "3599"]  # its own, to find it
    assert job["spec"]["activeDeadlineSeconds"] == limit
    applied = site_stages.kubectl("apply -f - <<'MANIFEST'\n%s\nMANIFEST" % json.dumps(job), timeout=60)
    assert applied.returncode == 0, applied.stderr
    try:

        def job_conditions() -> dict:
            found = yaml.safe_load(site_stages.kubectl("get job notebook-limit -n team-a -o yaml").stdout)
            return {c["type"]: c for c in (found.get("status") or {}).get("conditions") or []}

        def container_runs() -> bool:
            # The container's process, as the host sees it.
            return site_stages.ssh(WORKERS["lab-worker-1"], "pgrep -fx 'sleep 3599'").returncode == 0

        _wait_for("the notebook's container to run on lab-worker-1", container_runs, timeout=120)
        started = time.monotonic()
        failed = _wait_for(
            "the Job to end at its time limit", lambda: job_conditions().get("Failed"), timeout=limit + 90
        )
        assert failed["reason"] == "DeadlineExceeded", failed
        # Ended at the limit (counted from the Job's start, before its container ran), not long after.
        assert time.monotonic() - started <= limit + 60
        # The container really stopped on the host.
        _wait_for("the container to be gone", lambda: not container_runs(), timeout=60)
    finally:
        site_stages.kubectl("delete job notebook-limit -n team-a --wait=false")


def test_a_lab_host_rebooted_during_validation_fails_no_worse_than_a_check_and_comes_back_to_a_passing_run(
    site_stages: SiteLab,
) -> None:
    # The host that runs KAI's admission webhook, which every new pod goes through.
    kai = yaml.safe_load(site_stages.kubectl("get pods -n kai-scheduler -o yaml").stdout)["items"]
    hosts = {pod["spec"].get("nodeName") for pod in kai if pod["metadata"]["name"].startswith("admission-")}
    worker = next((name for name in WORKERS if name in hosts), "lab-worker-2")

    def ready() -> bool:
        listed = site_stages.kubectl("get node %s -o yaml" % worker)
        if listed.returncode != 0:
            return False
        conditions = yaml.safe_load(listed.stdout)["status"]["conditions"]
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    with _validating(site_stages, *_validate_args([], False)):
        time.sleep(15)
        # The connection drops as the host goes down: its exit status says nothing.
        site_stages.ssh(WORKERS[worker], "systemctl reboot", timeout=30)
    report = _latest_report(site_stages)
    for check in lab_site.report_checks(report).values():
        assert check["status"] != "fail" or check.get("message"), check
    # The host boots again with its disk as it was: kubelet and containerd start, the node is Ready.
    _wait_for(
        "%s to answer over SSH again" % worker,
        lambda: site_stages.ssh(WORKERS[worker], "true").returncode == 0,
        detail=lambda: (
            "\nthe last lines of its console log:\n" + control_plane.tail(site_stages.layout.log_of(worker), 40)
        ),
    )
    _wait_for("%s Ready again" % worker, ready, timeout=300)
    _wait_for(
        "kubelet and containerd active on %s" % worker,
        lambda: (
            site_stages.ssh(WORKERS[worker], "systemctl is-active kubelet containerd").stdout.split()
            == ["active", "active"]
        ),
        timeout=120,
    )
    config = site_stages.ssh(WORKERS[worker], "cat /etc/containerd/config.toml").stdout
    assert runtime_config.containerd_runtimes(config)["default_runtime"] == "nvidia"
    # For minutes after the reboot the API still shows the host's pods Ready at their old addresses (the
    # kubelet reports the restarted ones late; on the dev lab 3 min), so KAI's webhook is called at an
    # address where nothing listens and every new pod is refused ("context deadline exceeded"). The
    # cluster is back when the API server admits a pod again, whatever the pods' status says.
    _wait_for(
        "the API server to admit a pod through KAI's webhook",
        lambda: (
            site_stages.kubectl(
                "run reboot-probe -n default --image=busybox:1.35 --restart=Never --dry-run=server"
            ).returncode
            == 0
        ),
        timeout=600,
    )
    again = run_playbook(VALIDATE, *_validate_args([], True), inventory=site_stages.inventory, timeout=900)
    assert again.returncode == 0, again.tail(4000)
    assert _latest_report(site_stages)["verdict"] == "pass"


# --- keeping the site: certificates, and a worker removed and added again (docs/maintenance.md) ---------

REMOVE_NODE = str(REPO / "playbooks" / "remove_node.yml")
RENEW_CERTIFICATES = str(REPO / "playbooks" / "renew_certificates.yml")


def test_the_report_reads_every_lab_host_s_certificates(site_stages: SiteLab) -> None:
    section = next(s for s in site_stages.report["sections"] if s["id"] == "certificates")
    checks = {check["id"]: check for check in section["checks"]}
    hosts = [*CONTROL_PLANE, *WORKERS]
    assert set(checks) == {"certificates/" + host for host in hosts}, checks
    assert all(check["status"] == "pass" for check in checks.values()), checks
    rows = section["tables"][0]["rows"]
    read = {(row[0], row[1]) for row in rows}
    # kubeadm's on the control plane (a year), the kubelet's client certificate on every host.
    assert {("lab-cp-1", "apiserver"), ("lab-cp-1", "etcd-server"), ("lab-cp-1", "ca")} <= read, read
    assert {(host, "kubelet-client-current.pem") for host in hosts} <= read, read


def _apiserver_expiry(lab: SiteLab) -> str:
    listed = lab.ssh(CONTROL_PLANE["lab-cp-1"], "kubeadm certs check-expiration -o json")
    assert listed.returncode == 0, listed.stderr
    return next(c["expirationDate"] for c in json.loads(listed.stdout)["certificates"] if c["name"] == "apiserver")


def test_renewing_the_certificates_changes_nothing_until_due_and_forced_restarts_the_control_plane(
    site_stages: SiteLab,
) -> None:
    before = _apiserver_expiry(site_stages)
    nothing_due = run_playbook(RENEW_CERTIFICATES, inventory=site_stages.inventory, timeout=600)
    assert nothing_due.returncode == 0, nothing_due.tail(3000)
    assert nothing_due.changed_tasks() == {}
    assert "lab-cp-1: nothing due" in nothing_due.output
    time.sleep(1)  # the renewed certificates' dates are at the second
    started = time.monotonic()
    forced = run_playbook(
        RENEW_CERTIFICATES, "-e", "clusterproof_certificates_force=true", inventory=site_stages.inventory, timeout=900
    )
    print("[lab site] certificates renewed and the control plane restarted: %.0f s" % (time.monotonic() - started))
    assert forced.returncode == 0, forced.tail(3000)
    assert "restarted etcd, kube-apiserver, kube-controller-manager, kube-scheduler" in forced.output
    assert _apiserver_expiry(site_stages) > before
    assert site_stages.kubectl("get nodes").returncode == 0


def _links_and_chains(lab: SiteLab, address: str) -> str:
    return lab.ssh(address, "ip -o link show; iptables-save").stdout


def test_a_worker_removed_leaves_a_clean_host_the_validation_says_removed_as_declared_and_it_joins_again(
    site_stages: SiteLab,
) -> None:
    worker = ADDED_WORKER
    address = WORKERS[worker]
    assert "KUBE-" in _links_and_chains(site_stages, address)
    started = time.monotonic()
    removed = run_playbook(REMOVE_NODE, "-e", "node=" + worker, inventory=site_stages.inventory, timeout=900)
    print("[lab site] remove_node.yml, a worker: %.0f s" % (time.monotonic() - started), flush=True)
    assert removed.returncode == 0, removed.tail(5000)
    assert worker not in site_stages.kubectl("get nodes -o name").stdout
    host = site_stages.ssh(
        address,
        "test -e /etc/kubernetes/kubelet.conf; echo conf=$?; systemctl is-active kubelet; ls -A /etc/cni/net.d | wc -l",
    ).stdout.split()
    assert host == ["conf=1", "inactive", "0"], host
    left = _links_and_chains(site_stages, address)
    assert "KUBE-" not in left and "FLANNEL-" not in left and "flannel.1" not in left and "cni0" not in left, left
    # The packages and containerd's nvidia runtime stay for the next join.
    assert site_stages.ssh(address, "dpkg -s kubeadm >/dev/null && systemctl is-active containerd").returncode == 0

    again = run_playbook(REMOVE_NODE, "-e", "node=" + worker, inventory=site_stages.inventory, timeout=600)
    assert again.returncode == 0, again.tail(3000)
    assert again.changed_tasks() == {}

    # The inventory without the host: the validation passes and says the node was removed as declared.
    validated = run_playbook(VALIDATE, *_validate_args([], False), inventory=site_stages.first_inventory, timeout=900)
    assert validated.returncode == 0, validated.tail(4000)
    report = _latest_report(site_stages)
    assert report["verdict"] == "pass", [c for s in report["sections"] for c in s["checks"] if c["status"] == "fail"]
    assert report["changes"]["nodes_removed"] == [worker] and report["changes"]["nodes_gone"] == []

    started = time.monotonic()
    for playbook in (GPU_NODES, CLUSTER):
        rejoined = run_playbook(playbook, inventory=site_stages.inventory, timeout=900)
        assert rejoined.returncode == 0, rejoined.tail(5000)
    print("[lab site] the removed worker joined again: %.0f s" % (time.monotonic() - started), flush=True)
    _wait_for("%s Ready again" % worker, lambda: _node_ready(site_stages, worker) == "True", timeout=300)


def test_a_worker_out_of_reach_is_removed_by_force_and_reset_once_it_answers(
    site_stages: SiteLab, tmp_path: Path
) -> None:
    worker = ADDED_WORKER
    declaration = yaml.safe_load(site_stages.inventory.read_text())
    gpu_nodes = declaration["all"]["children"]["lab"]["children"]["gpu_nodes"]["hosts"]
    gpu_nodes[worker]["ansible_host"] = UNREACHABLE[1]
    unreachable = tmp_path / "worker-away.yml"
    unreachable.write_text(yaml.safe_dump(declaration))
    forced = run_playbook(
        REMOVE_NODE, "-e", "node=" + worker, "-e", "ansible_ssh_timeout=5", inventory=unreachable, timeout=600
    )
    assert forced.returncode == 0, forced.tail(4000)
    assert "is removed by force: its host did not answer" in forced.output
    assert worker not in site_stages.kubectl("get nodes -o name").stdout
    # Nothing ran on the host: its kubelet still has its kubeconfig until it is reset.
    assert site_stages.ssh(WORKERS[worker], "test -e /etc/kubernetes/kubelet.conf").returncode == 0
    reset = run_playbook(REMOVE_NODE, "-e", "node=" + worker, inventory=site_stages.inventory, timeout=600)
    assert reset.returncode == 0, reset.tail(4000)
    assert site_stages.ssh(WORKERS[worker], "test -e /etc/kubernetes/kubelet.conf").returncode == 1


def test_kueue_by_the_inventory_switch_installs_from_the_bundle_and_runs_the_scenarios(site_stages: SiteLab) -> None:
    # Last in the module: the lab's site now also runs Kueue (KAI stays; each engine places only
    # what names it), and the admission policy is Kueue's, which a validation declaring KAI fails.
    # The inventory without the worker the test before removed.
    switch = ("-e", "clusterproof_scheduler=kueue")
    installed = run_playbook(
        str(REPO / "playbooks" / "scheduler.yml"), *switch, inventory=site_stages.first_inventory, timeout=900
    )
    assert installed.returncode == 0, installed.tail(5000)
    releases = json.loads(
        site_stages.ssh(
            CONTROL_PLANE["lab-cp-1"], "helm list -A -o json --kubeconfig /etc/kubernetes/admin.conf"
        ).stdout
    )
    assert ("kueue", "kueue-" + versions.KUEUE.bare, "deployed") in {
        (r["name"], r["chart"], r["status"]) for r in releases
    }
    pods = yaml.safe_load(site_stages.kubectl("get pods -n kueue-system -o yaml").stdout)["items"]
    managers = [pod for pod in pods if pod["metadata"]["name"].startswith("kueue-controller-manager-")]
    assert managers and all(pod["status"]["phase"] == "Running" for pod in managers), pods
    assert {pod["spec"]["nodeName"] for pod in managers} <= set(CONTROL_PLANE) | set(WORKERS)
    scenario = [str(REPO / "scenarios" / "netapp-runai-4.8-4.10.yml")]
    validated = run_playbook(
        VALIDATE, *switch, *_validate_args(scenario, True), inventory=site_stages.first_inventory, timeout=900
    )
    assert validated.returncode == 0, validated.tail(5000)
    report = _latest_report(site_stages)
    checks = lab_site.report_checks(report)
    scenario_checks = {k: v for k, v in checks.items() if k.startswith("scenario/")}
    assert scenario_checks and all(c["status"] != "fail" for c in scenario_checks.values()), scenario_checks
    # The projects were read back from Kueue's ClusterQueues, and the model named is Kueue's.
    assert any(k.startswith("projects/") and c["status"] == "pass" for k, c in checks.items()), sorted(checks)
    assert "Kueue" in json.dumps(report["sections"]), "the report does not name Kueue"
    assert _scenario_namespaces(site_stages) == []
