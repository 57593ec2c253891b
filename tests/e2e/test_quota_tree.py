"""The inventory's elastic quota tree on KAI scheduler and on Kueue: installed, enforced, shown like the guide's dashboard."""

from __future__ import annotations

import pytest
import yaml
from kubernetes import client, config

from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai, kueue
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads

from ..conftest import ALIBABA_QUOTA_TREE as TREE
from .conftest import ansible_module, module_result, own_sandbox, run_playbook, wait_for

pytestmark = pytest.mark.sandbox


@pytest.mark.parametrize("scheduler", ["kai", "kueue"])
def test_the_guides_tree_from_the_inventory_caps_a_leaf_at_its_max_and_shows_it(tmp_path, scheduler):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {
                        "kube_control_plane": {
                            "hosts": {
                                "localhost": {
                                    "ansible_connection": "local",
                                    "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                                }
                            }
                        },
                        # One node with the guide's 40 cores.
                        "gpu_nodes": {"hosts": {"pool-1": {"gpu_count": 8, "node_cpu_cores": 40}}},
                    },
                    "vars": {
                        "clusterproof_site_name": "quota-tree-test",
                        "clusterproof_scheduler": scheduler,
                        "clusterproof_quota_tree": TREE,
                    },
                }
            }
        )
    )
    with own_sandbox(inventory, tmp_path / "state", scheduler=False) as site:
        first = run_playbook("playbooks/scheduler.yml", *site.vars(), inventory=inventory)
        assert first.returncode == 0, first.tail(3000)
        again = run_playbook("playbooks/scheduler.yml", *site.vars(), inventory=inventory)
        assert again.returncode == 0 and again.recap()["changed"] == 0, again.tail(3000)

        api = config.new_client_from_config(config_file=str(site.kubeconfig))
        custom = client.CustomObjectsApi(api)
        workload = workloads.Workload("app", "namespace1", workloads.TRAINING, 5)
        settings = workloads.ProjectSettings("namespace1")
        if scheduler == "kai":
            queues = custom.list_cluster_custom_object(*kai.QUEUE_API)["items"]
            parents = {queue["metadata"]["name"]: queue["spec"].get("parentQueue") for queue in queues}
            # namespace1 deploys 5 replicas of 5 cores: its leaf's max of 20 lets 4 run (the guide's step 1).
            deployment = kai.deployment_manifest(workload, settings, 5, "cpu")
            for labels in (deployment["metadata"]["labels"], deployment["spec"]["template"]["metadata"]["labels"]):
                labels[kai.QUEUE_LABEL] = "root-a-1"
            client.AppsV1Api(api).create_namespaced_deployment("namespace1", deployment)
        else:
            group, version = kueue.API_VERSION.split("/")
            cohorts = custom.list_cluster_custom_object(group, version, "cohorts")["items"]
            queues = custom.list_cluster_custom_object(group, version, "clusterqueues")["items"]
            parents = {item["metadata"]["name"]: item["spec"].get("parentName") for item in cohorts}
            parents |= {item["metadata"]["name"]: item["spec"].get("cohortName") for item in queues}
            # The same five replicas as single-pod Jobs in the leaf's LocalQueue.
            for job in kueue.replica_jobs(workload, settings, 5, "cpu"):
                job["metadata"]["labels"][kueue.QUEUE_NAME_LABEL] = "root-a-1"
                client.BatchV1Api(api).create_namespaced_job("namespace1", job)
        assert {name: parents[name] for name in ("root", "root-a", "root-b-2")} == {
            "root": None,
            "root-a": "root",
            "root-b-2": "root-b",
        }

        def running():
            pods = client.CoreV1Api(api).list_namespaced_pod("namespace1").items
            return sum(1 for pod in pods if pod.status.phase == "Running" and pod.spec.node_name)

        assert wait_for(lambda: running() == 4, timeout=60)
        assert wait_for(lambda: running() == 5, timeout=8) is False, "the leaf's max of 20 cores was not enforced"

        done = ansible_module("clusterproof.gpu.validate_quota_tree", {"tree": TREE, "scheduler": scheduler}, site)
        result = module_result(done)
        assert done.returncode == 0, result.get("msg")
        assert result["failed_checks"] == 0, result["section"]["checks"]
        rows = {row[0].strip(): row for row in result["section"]["tables"][0]["rows"]}
        assert rows["root-a-1"] == ["    root-a-1", "namespace1", "cpu", "20", "10", "20"]
        assert rows["root"][3:] == ["40", "40", "20"] and rows["root-b"][5] == "0"
        api.close()
