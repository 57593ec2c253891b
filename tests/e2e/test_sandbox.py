"""The sandbox site: a real control plane whose simulated GPU nodes are the inventory's."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from kubernetes import client, config

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import pki as sandbox_pki
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import control_plane as control_plane_checks
from tests.conftest import run_module_file

from .conftest import REPO, ad_hoc, free_port_base, module_result, own_sandbox, run_playbook, sandbox_vars, wait_for

pytestmark = pytest.mark.sandbox


@pytest.fixture
def namespace(api_client):
    core = client.CoreV1Api(api_client)
    name = "e2e-" + uuid.uuid4().hex[:8]
    core.create_namespace({"metadata": {"name": name}})
    # The namespace's default ServiceAccount comes from the controller-manager; pods need it.
    assert wait_for(lambda: core.list_namespaced_service_account(name).items, 30), (
        f"no default ServiceAccount in {name}"
    )
    yield name
    core.delete_namespace(name)


def _gpu_job(name: str, gpus: int, annotations: dict[str, str] | None = None) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "nvcr.io/nvidia/pytorch:24.01-py3",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                        }
                    ],
                },
            },
        },
    }


def _job_pods(core, namespace: str, job: str):
    return core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items


def test_api_server_reports_the_pinned_version(api_client):
    assert client.VersionApi(api_client).get_code().git_version == "v1.36.3"


def test_nodes_are_the_declared_gpu_nodes(api_client):
    nodes = {node.metadata.name: node for node in client.CoreV1Api(api_client).list_node().items}
    assert sorted(nodes) == ["dgx1-1", "dgx1-2"]
    for node in nodes.values():
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        assert node.metadata.labels["nvidia.com/gpu.product"] == "Tesla-V100-SXM2-32GB"
        assert node.metadata.labels["nvidia.com/gpu.memory"] == "32768"
        assert node.metadata.labels["nvidia.com/gpu.count"] == "8"
        ready = [c.status for c in node.status.conditions if c.type == "Ready"]
        assert ready == ["True"]
        # As a real node of the pinned Kubernetes says it: kubeadm's upgrade parses it (docs/upgrade.md).
        assert node.status.node_info.kubelet_version == versions.KUBERNETES.version


def test_the_control_plane_reader_reads_the_sandbox_s_etcd_and_api_server(sandbox):
    # The sandbox's etcd is a real etcd of the pinned version, with TLS and client certificates as
    # kubeadm's: the module reads it through its JSON gateway as it reads a control plane's.
    ports, pki = control_plane.Ports(sandbox.port_base), control_plane.Layout(sandbox.state_dir).pki
    client_name = sandbox_pki.ETCD_HEALTHCHECK_CLIENT
    api_server = "127.0.0.1:%d" % ports.apiserver
    started = time.monotonic()
    result = run_module_file(
        REPO / "collections/ansible_collections/clusterproof/gpu/plugins/modules/control_plane_status.py",
        {
            "host": "sandbox",
            "etcd_url": "https://127.0.0.1:%d" % ports.etcd_client,
            "etcd_ca": str(pki.ca_cert),
            "etcd_certificate": str(pki.client_cert(client_name)),
            "etcd_key": str(pki.client_key(client_name)),
            "kubernetes_ca": str(pki.ca_cert),
            "apiserver_address": api_server,
            "endpoint": api_server,
            "apiserver_certificate": str(pki.apiserver_cert),
        },
    )
    assert time.monotonic() - started < 30
    assert result.get("failed") is not True, result
    etcd = result["etcd"]
    assert etcd["error"] == ""
    (member,) = etcd["members"]
    assert (member["name"], member["client_urls"], member["learner"]) == (
        "sandbox",
        ["https://127.0.0.1:%d" % ports.etcd_client],
        False,
    )
    assert member["status"]["leader"] == member["id"] == member["status"]["member_id"]
    assert member["status"]["version"] == versions.ETCD.version.removeprefix("v")
    assert member["status"]["raft_applied_index"] > 0 and member["status"]["errors"] == []
    assert (member["health"], member["status_error"]) == (True, "")
    assert result["apiserver"]["ok"] and result["endpoint"]["ok"], result
    assert "127.0.0.1" in result["sans"]["ips"]
    section = control_plane_checks.section([{"host": "sandbox", "name": "sandbox"}], {"sandbox": result})
    assert {check.id: check.status for check in section.checks} == {
        "control-plane/etcd-members": "pass",
        "control-plane/etcd-quorum": "pass",
        "control-plane/etcd-leader": "pass",
        "control-plane/etcd-lag": "pass",
        "control-plane/endpoint": "pass",
        "control-plane/sandbox/apiserver": "pass",
        "control-plane/sandbox/apiserver-sans": "pass",
    }


def test_second_up_reports_no_change(sandbox):
    assert sandbox.first_up.recap()["changed"] >= 1
    again = run_playbook("playbooks/sandbox.yml", *sandbox.vars())
    assert again.returncode == 0, again.tail(3000)
    assert again.recap()["changed"] == 0, again.changed_tasks()


def test_status_reports_every_process_running(sandbox):
    run = run_playbook("playbooks/sandbox.yml", "-e", "sandbox_cluster_state=status", "-v", *sandbox.vars())
    assert run.returncode == 0, run.tail(3000)
    assert run.recap()["changed"] == 0
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"):
        assert f"'name': '{name}'" in run.output or f'"name": "{name}"' in run.output or f"name: {name}" in run.output


def test_gpu_job_is_scheduled_on_a_gpu_node_and_stays_running(api_client, namespace):
    core, batch = client.CoreV1Api(api_client), client.BatchV1Api(api_client)
    batch.create_namespaced_job(namespace, _gpu_job("two-gpus", 2))
    pods = wait_for(lambda: [p for p in _job_pods(core, namespace, "two-gpus") if p.status.phase == "Running"])
    assert pods, "the 2-GPU job never ran: {}".format(_job_pods(core, namespace, "two-gpus"))
    assert pods[0].spec.node_name in ("dgx1-1", "dgx1-2")
    # KWOK's default stages would complete a Job's pod at once; ours keep it running.
    time.sleep(5)
    pod = core.read_namespaced_pod(pods[0].metadata.name, namespace)
    assert pod.status.phase == "Running"
    assert batch.read_namespaced_job("two-gpus", namespace).status.active == 1


def test_job_larger_than_any_node_stays_pending(api_client, namespace):
    core, batch = client.CoreV1Api(api_client), client.BatchV1Api(api_client)
    batch.create_namespaced_job(namespace, _gpu_job("nine-gpus", 9))

    def unschedulable():
        for pod in _job_pods(core, namespace, "nine-gpus"):
            for condition in pod.status.conditions or []:
                if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
                    return condition
        return None

    condition = wait_for(unschedulable)
    assert condition is not None, "the scheduler never marked the 9-GPU pod unschedulable"
    assert "nvidia.com/gpu" in condition.message
    assert _job_pods(core, namespace, "nine-gpus")[0].status.phase == "Pending"


def test_pod_that_declares_its_run_time_completes(api_client, namespace):
    core, batch = client.CoreV1Api(api_client), client.BatchV1Api(api_client)
    batch.create_namespaced_job(namespace, _gpu_job("short", 1, {"clusterproof.io/complete-after": "2s"}))
    job = wait_for(
        lambda: (lambda j: j if j.status.succeeded == 1 else None)(batch.read_namespaced_job("short", namespace))
    )
    assert job is not None, "the job that runs for 2 s never succeeded"
    assert _job_pods(core, namespace, "short")[0].status.phase == "Succeeded"


def test_deployment_scales(api_client, namespace):
    apps, core = client.AppsV1Api(api_client), client.CoreV1Api(api_client)
    labels = {"app": "notebook"}
    apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "notebook"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "jupyter",
                                "image": "jupyter/base-notebook",
                                "resources": {"requests": {"cpu": "1"}},
                            }
                        ]
                    },
                },
            },
        },
    )

    def running(count: int):
        pods = core.list_namespaced_pod(namespace, label_selector="app=notebook").items
        return len([p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]) == count

    assert wait_for(lambda: running(2)), "2 replicas never ran"
    apps.patch_namespaced_deployment_scale("notebook", namespace, {"spec": {"replicas": 5}})
    assert wait_for(lambda: running(5)), "the deployment did not scale to 5 running replicas"
    apps.patch_namespaced_deployment_scale("notebook", namespace, {"spec": {"replicas": 1}})
    assert wait_for(lambda: running(1)), "the deployment did not scale down to 1"


def _our_processes(state_dir) -> list[int]:
    """Pids of processes whose command line mentions this sandbox's state directory."""
    import os

    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace")
            except OSError:
                continue
            if str(state_dir) in cmdline:
                pids.append(int(entry))
    return pids


def test_down_stops_every_process_and_removes_the_state(tmp_path):
    """A sandbox of its own (other ports, one node), so the session's sandbox is left alone."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    kube_control_plane:\n      hosts:\n        localhost:\n"
        "          ansible_connection: local\n          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
        "    gpu_nodes:\n      hosts:\n        gpu-1:\n          gpu_count: 4\n"
        "  vars:\n    clusterproof_site_name: down-test\n"
    )
    state_dir = tmp_path / "state"
    port_base = free_port_base()

    def down():
        return run_playbook(
            "playbooks/sandbox.yml",
            "-e",
            "sandbox_cluster_state=down",
            *sandbox_vars(state_dir, port_base),
            inventory=inventory,
        )

    try:
        up = run_playbook("playbooks/sandbox.yml", *sandbox_vars(state_dir, port_base), inventory=inventory)
        assert up.returncode == 0, up.tail(3000)
        assert len(_our_processes(state_dir)) == 5
        # KAI scheduler's components and the sandbox GPU agent are the sandbox's too.
        kai = run_playbook("playbooks/scheduler.yml", *sandbox_vars(state_dir, port_base), inventory=inventory)
        assert kai.returncode == 0, kai.tail(3000)
        assert len(_our_processes(state_dir)) == 10
    except BaseException:
        down()  # a failed assertion above must not leave its sandbox running
        raise
    stopped = down()
    assert stopped.returncode == 0, stopped.tail(3000)
    assert stopped.recap()["changed"] == 1
    assert _our_processes(state_dir) == []
    assert not state_dir.exists()
    again = down()
    assert again.returncode == 0 and again.recap()["changed"] == 0


def test_repo_inventory_is_the_netapp_site():
    assert (REPO / "inventories" / "sandbox" / "hosts.yml").read_text().count("dgx1-") == 2


def _sandbox_status(site) -> dict[str, dict]:
    """The sandbox_cluster module's status of every process, by name."""
    done = ad_hoc(
        "clusterproof.gpu.sandbox_cluster",
        {"state": "status", "state_dir": str(site.state_dir), "port_base": site.port_base},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {component["name"]: component for component in module_result(done)["components"]}


def test_up_heals_a_sandbox_whose_api_server_and_gpu_agent_went(tmp_path):
    """SIGTERM to the API server (it closes its port at once but takes about a minute to exit)
    with KAI and the GPU agent running: the agent waits the outage out; killed after all, it is
    started again by the next ``up``, run at once, as is the API server; GPU fractions work after."""
    with own_sandbox(REPO / "inventories" / "sandbox", tmp_path / "state") as site:
        layout = control_plane.Layout(site.state_dir)
        before = _sandbox_status(site)
        assert "sandbox-gpu-agent" in before and all(c["running"] and c["ready"] for c in before.values()), before
        os.kill(before["kube-apiserver"]["pid"], signal.SIGTERM)
        agent_log = layout.log("sandbox-gpu-agent")
        assert wait_for(lambda: "API server not answering" in agent_log.read_text(), 30), agent_log.read_text()
        assert control_plane.running_pid(layout, "sandbox-gpu-agent") == before["sandbox-gpu-agent"]["pid"]
        os.kill(before["sandbox-gpu-agent"]["pid"], signal.SIGKILL)

        healed = run_playbook("playbooks/sandbox.yml", *site.vars())
        assert healed.returncode == 0, healed.tail(3000)
        after = _sandbox_status(site)
        assert set(after) == set(before)
        assert all(c["running"] and c["ready"] for c in after.values()), after
        for name in ("kube-apiserver", "sandbox-gpu-agent"):
            assert after[name]["pid"] != before[name]["pid"], name

        # A half GPU needs KAI's reservation pod answered by the GPU agent before it runs.
        api = config.new_client_from_config(config_file=str(site.kubeconfig))
        core = client.CoreV1Api(api)
        namespace = api.sanitize_for_serialization(core.read_namespace("team-b"))
        settings = workloads.ProjectSettings.from_namespace(namespace)
        job = kai.job_manifest(workloads.Workload("b-half", "team-b", workloads.INTERACTIVE, 0.5), settings)
        client.BatchV1Api(api).create_namespaced_job("team-b", job)

        def half_running():
            return [p for p in core.list_namespaced_pod("team-b").items if p.status.phase == "Running"]

        assert wait_for(half_running, 90), core.list_namespaced_pod("team-b").items
        api.close()
