"""Storage classes on the sandbox: a claim really binds through local-path-provisioner, two pods
share a ReadWriteMany claim, the validator cleans up, and the provisioners' charts rendered with
the role's values are accepted by the API server (server-side dry run), a wrong value refused.

nfs-subdir-external-provisioner's and Trident's charts are taken from their Go modules; where the
module proxy does not serve the pinned versions, those two chart tests skip with the reason, or
run on a chart folder given in CLUSTERPROOF_NFS_CHART / CLUSTERPROOF_TRIDENT_CHART.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import chart_source, storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build

from .conftest import REPO, ansible_module, dry_run_apply, helm_render, run_playbook, wait_for

pytestmark = pytest.mark.sandbox
# helm built from its module renders for Kubernetes v1.20 unless told; the sandbox's version.
KUBE_VERSION = sandbox_build.SandboxVersions.kubernetes
GROUP_VARS = REPO / "inventories" / "sandbox" / "group_vars" / "all" / "storage.yml"


def sandbox_classes() -> list[storage.StorageClassDeclaration]:
    declared = yaml.safe_load(GROUP_VARS.read_text())["clusterproof_storage_classes"]
    classes, problems = storage.check_storage_classes(declared, {})
    assert problems == []
    return classes


@pytest.fixture(scope="module")
def storage_site(sandbox):
    """The storage playbook run on the session's sandbox (twice: the second run changes nothing)."""
    first = run_playbook("playbooks/storage.yml", *sandbox.vars())
    assert first.returncode == 0, first.tail(5000)
    second = run_playbook("playbooks/storage.yml", *sandbox.vars())
    assert second.returncode == 0, second.tail(5000)
    assert second.recap()["changed"] == 0, second.changed_tasks()
    return first


def validate(sandbox, classes, timeout=60) -> dict:
    args = {"classes": [dataclasses.asdict(cls) for cls in classes], "timeout": timeout}
    done = ansible_module("clusterproof.gpu.validate_storage", args, sandbox)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.split("=>", 1)[1])


def statuses(result: dict) -> dict[str, str]:
    return {check["id"]: check["status"] for check in result["checks"]}


def test_classes_exist_with_one_default_and_the_provisioner_runs(storage_site, sandbox, api_client):
    classes = {c.metadata.name: c for c in client.StorageV1Api(api_client).list_storage_class().items}
    assert {"local-path", "shared"} <= set(classes)
    defaults = [
        name
        for name, c in classes.items()
        if (c.metadata.annotations or {}).get(storage.DEFAULT_CLASS_ANNOTATION) == "true"
    ]
    assert defaults == ["local-path"]
    assert classes["local-path"].provisioner == "rancher.io/local-path"
    assert classes["local-path"].volume_binding_mode == "WaitForFirstConsumer"
    record = json.loads((sandbox.state_dir / "run" / "local-path-provisioner.json").read_text())
    assert Path("/proc/%d" % record["pid"]).exists()


def test_a_claim_binds_and_a_shared_claim_serves_two_pods_and_all_is_removed(storage_site, sandbox, api_client):
    result = validate(sandbox, sandbox_classes())
    assert statuses(result) == {
        "storage/classes/local-path": "pass",
        "storage/classes/shared": "pass",
        "storage/default-class": "pass",
        "storage/earlier-leftovers": "pass",
        "storage/default-binds": "pass",
        # The sandbox's pods only seem to run (KWOK): nothing is read back here (the lab reads it back).
        "storage/default-readback": "skip",
        "storage/rwx-shared": "pass",
        "storage/cleanup": "pass",
    }, result["checks"]
    checks = {check["id"]: check for check in result["checks"]}
    bound = checks["storage/default-binds"]["observed"]
    assert bound["phase"] == "Bound" and bound["volume"].startswith("pvc-")
    assert bound["pods"]["default-consumer"]["phase"] == "Running"
    shared_nodes = {pod["node"] for pod in checks["storage/rwx-shared"]["observed"]["pods"].values()}
    assert len(shared_nodes) == 2, checks["storage/rwx-shared"]
    core = client.CoreV1Api(api_client)
    namespaces = [ns.metadata.name for ns in core.list_namespace().items]
    assert result["namespace"] not in namespaces
    assert core.list_persistent_volume().items == []
    # The provisioner really made and removed the volumes (its helper pods, completed by KWOK).
    log = (sandbox.state_dir / "logs" / "local-path-provisioner.log").read_text()
    assert "helper-pod-create-%s" % bound["volume"] in log and "helper-pod-delete-%s" % bound["volume"] in log


def test_a_class_nothing_provisions_fails_the_checks_and_is_still_cleaned_up(storage_site, sandbox, api_client):
    ghost = storage.StorageClassDeclaration(
        "ghost", "local-path", True, "Delete", ["ReadWriteOnce"], "WaitForFirstConsumer", path="/nowhere"
    )
    result = validate(sandbox, [ghost], timeout=8)
    assert statuses(result) == {
        "storage/classes/ghost": "fail",
        "storage/default-class": "fail",
        "storage/earlier-leftovers": "pass",
        "storage/default-binds": "fail",
        "storage/default-readback": "skip",
        "storage/rwx-shared": "skip",
        "storage/cleanup": "pass",
    }, result["checks"]
    binds = next(check for check in result["checks"] if check["id"] == "storage/default-binds")
    assert "the claim is Pending after 8 s, expected Bound" in binds["message"]
    assert result["namespace"] not in [ns.metadata.name for ns in client.CoreV1Api(api_client).list_namespace().items]


def test_what_an_earlier_probe_left_is_removed_first_and_the_report_says_so(storage_site, sandbox, api_client):
    """A run cut off (or a node gone) leaves a probe namespace with a claim and its pod: the next run
    finds it by its label, removes it with its volume, and says so; the probe avoids a cordoned node."""
    core = client.CoreV1Api(api_client)
    earlier = "clusterproof-storage-probe-0ld0ld"
    core.create_namespace(storage.probe_namespace(earlier))
    kube.wait_for_default_service_account(api_client, earlier)
    core.create_namespaced_persistent_volume_claim(
        earlier, storage.probe_claim(earlier, "default-claim", "local-path", "ReadWriteOnce")
    )
    core.create_namespaced_pod(
        earlier, storage.probe_pod(earlier, "default-consumer", "default-claim", "busybox:1.36", "default-claim")
    )

    def bound_volume() -> str:
        claim = core.read_namespaced_persistent_volume_claim("default-claim", earlier)
        return claim.spec.volume_name if claim.status.phase == "Bound" else ""

    volume = wait_for(bound_volume, timeout=60)
    assert volume, "the earlier probe's claim did not bind"
    nodes = [node.metadata.name for node in core.list_node().items]
    cordoned = nodes[0]
    core.patch_node(cordoned, {"spec": {"unschedulable": True}})
    try:
        result = validate(sandbox, sandbox_classes())
    finally:
        core.patch_node(cordoned, {"spec": {"unschedulable": None}})
    checks = {check["id"]: check for check in result["checks"]}
    leftovers = checks["storage/earlier-leftovers"]
    assert leftovers["status"] == "pass", leftovers
    assert leftovers["message"] == "removed what an earlier run left: namespace %s, volume %s" % (earlier, volume)
    assert earlier not in [ns.metadata.name for ns in core.list_namespace().items]
    assert core.list_persistent_volume().items == []
    assert checks["storage/default-binds"]["status"] == "pass", checks["storage/default-binds"]
    placed = [pod["node"] for pod in checks["storage/rwx-shared"]["observed"]["pods"].values()]
    placed.append(checks["storage/default-binds"]["observed"]["pods"]["default-consumer"]["node"])
    assert cordoned not in placed, (cordoned, placed)
    assert checks["storage/cleanup"]["status"] == "pass"


def test_sandbox_mode_refuses_classes_it_cannot_provision(sandbox):
    nfs = storage.StorageClassDeclaration(
        "nfs", "nfs", True, "Delete", ["ReadWriteMany"], "Immediate", path="/export", server="nas"
    )
    args = {
        "mode": "sandbox",
        "classes": [dataclasses.asdict(nfs)],
        "state_dir": str(sandbox.state_dir),
        "bin_dir": "/nonexistent",
    }
    done = ansible_module("clusterproof.gpu.storage_classes", args, sandbox)
    assert done.returncode != 0
    assert "the sandbox provisions local-path classes only; these need a real cluster: nfs" in done.stdout


# --- the charts, rendered with the role's values -------------------------------------------------


def helm_template(chart: Path | str, release: str, namespace: str, values: dict) -> list[dict]:
    return helm_render(chart, release, namespace, values, "--kube-version", KUBE_VERSION)


def dry_run(api_client, objects: list[dict], namespace: str) -> None:
    """Server-side apply with dryRun=All: the API server validates each object, changes nothing."""
    # The sandbox's own local-path objects (same names) belong to another field manager.
    dry_run_apply(api_client, objects, namespace, force_conflicts=True)


def ensure_namespace(api_client, name: str) -> None:
    kube.Applier(api_client).apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def chart(kind: str, env: str) -> Path:
    given = os.environ.get(env)
    if given:
        return Path(given)
    try:
        return chart_source.chart_in_module(storage.CHART_SOURCES[kind])
    except chart_source.ChartSourceError as error:
        pytest.skip("%s (set %s to a folder holding the chart to run this test)" % (error, env))


def release_of(kind: str, classes) -> dict:
    return next(r for r in storage.releases(classes, "busybox:1.36") if r["provisioner"] == kind)


def test_local_path_chart_with_the_role_values_is_accepted(storage_site, api_client):
    release = release_of("local-path", sandbox_classes())
    objects = helm_template(
        chart("local-path", "CLUSTERPROOF_LOCAL_PATH_CHART"), release["name"], release["namespace"], release["values"]
    )
    kinds = {obj["kind"] for obj in objects}
    assert {"Deployment", "ConfigMap", "ServiceAccount", "ClusterRole"} <= kinds, kinds
    assert "StorageClass" not in kinds  # clusterproof makes the classes, one of them the default
    configmap = next(obj for obj in objects if obj["kind"] == "ConfigMap")
    assert json.loads(configmap["data"]["config.json"]) == storage.local_path_config(sandbox_classes())
    dry_run(api_client, objects, release["namespace"])


def test_a_wrong_local_path_value_is_refused_by_the_api_server(storage_site, api_client):
    release = release_of("local-path", sandbox_classes())
    values = release["values"]
    # A class the chart makes itself, with a reclaim policy StorageClasses do not take.
    values["storageClassConfigs"]["local-path"]["storageClass"] = {
        "create": True,
        "defaultClass": True,
        "reclaimPolicy": "Recycle",
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    objects = helm_template(
        chart("local-path", "CLUSTERPROOF_LOCAL_PATH_CHART"), release["name"], release["namespace"], values
    )
    with pytest.raises(ApiException) as refused:
        dry_run(api_client, objects, release["namespace"])
    assert refused.value.status == 422 and "Recycle" in refused.value.body


def test_nfs_chart_with_the_role_values_is_accepted(api_client):
    nfs_class = storage.StorageClassDeclaration(
        "nfs-ai",
        "nfs",
        False,
        "Delete",
        ["ReadWriteMany"],
        "Immediate",
        path="/export/ai",
        server="nas1",
        mount_options=["nfsvers=4.1"],
    )
    release = release_of("nfs", [nfs_class])
    objects = helm_template(
        chart("nfs", "CLUSTERPROOF_NFS_CHART"), release["name"], release["namespace"], release["values"]
    )
    kinds = {obj["kind"] for obj in objects}
    assert "Deployment" in kinds and "StorageClass" not in kinds, kinds
    deployment = next(obj for obj in objects if obj["kind"] == "Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["NFS_SERVER"], env["NFS_PATH"]) == ("nas1", "/export/ai")
    assert env["PROVISIONER_NAME"] == storage.storage_class_manifest(nfs_class)["provisioner"]
    ensure_namespace(api_client, release["namespace"])
    dry_run(api_client, objects, release["namespace"])


def test_trident_chart_with_the_role_values_is_accepted(api_client):
    backend = storage.TridentBackend("aff1", "ontap-nas", "10.0.0.5", "svm_ai", "vault_ontap")
    trident_class = storage.StorageClassDeclaration(
        "ontap", "trident", False, "Delete", ["ReadWriteMany"], "Immediate", backends=[backend]
    )
    release = release_of("trident", [trident_class])
    objects = helm_template(
        chart("trident", "CLUSTERPROOF_TRIDENT_CHART"), release["name"], release["namespace"], release["values"]
    )
    crds = [obj for obj in objects if obj["kind"] == "CustomResourceDefinition"]
    assert {crd["metadata"]["name"] for crd in crds} >= {"tridentorchestrators.trident.netapp.io"}
    # The chart's CRDs are really created (this is the tests' own sandbox), so that its custom
    # resources (the TridentOrchestrator) are checked against their schema. The CRDs of the
    # backends are the operator's to install at run time (and keep any spec), so clusterproof's
    # TridentBackendConfig objects are unit-tested, not checked here.
    applier = kube.Applier(api_client)
    for crd in crds:
        applier.apply(crd)
    names = [crd["metadata"]["name"] for crd in crds]
    extensions = client.ApiextensionsV1Api(api_client)

    def established():
        return all(
            any(
                c.type == "Established" and c.status == "True"
                for c in extensions.read_custom_resource_definition(name).status.conditions or []
            )
            for name in names
        )

    assert wait_for(established, 60)
    applier.refresh_discovery()
    ensure_namespace(api_client, release["namespace"])
    orchestrator = next(obj for obj in objects if obj["kind"] == "TridentOrchestrator")
    assert orchestrator["spec"]["silenceAutosupport"] is True
    others = [obj for obj in objects if obj["kind"] != "CustomResourceDefinition"]
    dry_run(api_client, others + [storage.storage_class_manifest(trident_class)], release["namespace"])


def test_cluster_path_installs_the_local_path_chart_with_helm(storage_site, sandbox, api_client):
    """The real-cluster path of the role on the sandbox: the chart from the Go module, installed
    by kubernetes.core.helm (KWOK reports its pod ready); a second run changes nothing. Its own
    namespace, so the sandbox's local-path objects are left alone."""
    extra = [
        "-e",
        "storage_classes_mode=cluster",
        "-e",
        json.dumps({"storage_classes_namespaces": {"local-path": "lp-chart"}, "storage_classes_helm_timeout": "120s"}),
    ]
    helm = sandbox_build.plan().binary("helm")
    try:
        first = run_playbook("playbooks/storage.yml", *sandbox.vars(), *extra)
        assert first.returncode == 0, first.tail(5000)
        # The release; clusterproof's helper pod template in its ConfigMap; the provisioner restarted for it.
        assert first.recap()["changed"] == 3, first.tail(5000)
        second = run_playbook("playbooks/storage.yml", *sandbox.vars(), *extra)
        assert second.returncode == 0 and second.recap()["changed"] == 0, second.tail(5000)
        deployment = client.AppsV1Api(api_client).read_namespaced_deployment("local-path-provisioner", "lp-chart")
        assert deployment.status.ready_replicas == 1
        configmap = client.CoreV1Api(api_client).read_namespaced_config_map("local-path-config", "lp-chart")
        assert json.loads(configmap.data["config.json"]) == storage.local_path_config(sandbox_classes())
        # Its helper pods keep off simulated nodes (the chart has no value for that), and the provisioner's
        # pod template carries the template's digest, which restarted it.
        helper = yaml.safe_load(configmap.data["helperPod.yaml"])
        assert helper == storage.local_path_helper_pod(helper["spec"]["containers"][0]["image"], sandbox=False)
        annotations = deployment.spec.template.metadata.annotations
        digest = hashlib.sha256(configmap.data["helperPod.yaml"].encode()).hexdigest()
        assert annotations[storage.HELPER_POD_DIGEST_ANNOTATION] == digest
    finally:
        subprocess.run(
            [
                str(helm),
                "uninstall",
                "local-path-provisioner",
                "-n",
                "lp-chart",
                "--kubeconfig",
                str(sandbox.kubeconfig),
            ],
            capture_output=True,
            timeout=120,
        )


def test_a_class_that_cannot_change_in_place_is_refused_with_what_to_do(storage_site, sandbox, api_client):
    shared = next(cls for cls in sandbox_classes() if cls.name == "shared")
    retained = dataclasses.replace(shared, reclaim_policy="Retain")
    done = ansible_module("clusterproof.gpu.storage_classes", {"classes": [dataclasses.asdict(retained)]}, sandbox)
    assert done.returncode != 0
    assert "StorageClass shared exists with settings that cannot change in place" in done.stdout
    assert "Delete the class (its volumes stay) and run again" in done.stdout
    assert client.StorageV1Api(api_client).read_storage_class("shared").reclaim_policy == "Delete"


def test_another_default_class_is_unset_so_exactly_one_default_remains(storage_site, sandbox, api_client):
    storage_api = client.StorageV1Api(api_client)
    foreign = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "foreign-default", "annotations": {storage.DEFAULT_CLASS_ANNOTATION: "true"}},
        "provisioner": "example.com/elsewhere",
    }
    storage_api.create_storage_class(foreign)
    try:
        before = validate(sandbox, sandbox_classes(), timeout=30)
        assert statuses(before)["storage/default-class"] == "fail"
        run = run_playbook("playbooks/storage.yml", *sandbox.vars())
        assert run.returncode == 0 and run.recap()["changed"] == 1, run.tail(5000)
        annotations = storage_api.read_storage_class("foreign-default").metadata.annotations
        assert annotations[storage.DEFAULT_CLASS_ANNOTATION] == "false"
        after = validate(sandbox, sandbox_classes(), timeout=30)
        assert statuses(after)["storage/default-class"] == "pass"
    finally:
        storage_api.delete_storage_class("foreign-default")
