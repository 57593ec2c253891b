"""Storage classes: objects and chart values from the declaration, the sandbox's provisioner, and
the validator's verdicts on what it observed."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import local_path as storage_sandbox
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import SANDBOX_NODE_LABEL, Layout
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import storage as storage_validation

SITE_VARS = {"vault_ontap": {"username": "vsadmin", "password": "s3cret"}}
DECLARED = [
    {"name": "local-path", "provisioner": "local-path", "default": True},
    {
        "name": "shared",
        "provisioner": "local-path",
        "access_modes": ["ReadWriteMany"],
        "local_path": {"shared_path": "/srv/shared/"},
    },
    {
        "name": "nfs-ai",
        "provisioner": "nfs",
        "access_modes": ["ReadWriteMany"],
        "reclaim_policy": "Retain",
        "nfs": {"server": "nas1.example.org", "path": "/export/ai", "mount_options": ["nfsvers=4.1"]},
    },
    {
        "name": "ontap",
        "provisioner": "trident",
        "trident": {
            "backends": [
                {
                    "name": "aff1",
                    "storage_driver": "ontap-nas",
                    "management_lif": "10.0.0.5",
                    "data_lif": "10.0.1.5",
                    "svm": "svm_ai",
                    "credentials": "vault_ontap",
                },
                {
                    "name": "aff2",
                    "storage_driver": "ontap-nas",
                    "management_lif": "aff2.example.org",
                    "svm": "svm_ai",
                    "credentials": "vault_ontap",
                },
            ]
        },
    },
]


def declared() -> dict[str, storage.StorageClassDeclaration]:
    classes, problems = storage.check_storage_classes(DECLARED, SITE_VARS)
    assert problems == []
    return {cls.name: cls for cls in classes}


def test_declarations_round_trip_through_their_dict_form():
    import dataclasses

    classes = list(declared().values())
    assert storage.from_dicts([dataclasses.asdict(cls) for cls in classes]) == classes


def test_exactly_one_class_is_annotated_default_and_the_others_say_false():
    manifests = [storage.storage_class_manifest(cls) for cls in declared().values()]
    annotations = {
        m["metadata"]["name"]: m["metadata"]["annotations"][storage.DEFAULT_CLASS_ANNOTATION] for m in manifests
    }
    assert annotations == {"local-path": "true", "shared": "false", "nfs-ai": "false", "ontap": "false"}


def test_storage_class_fields_per_provisioner():
    classes = declared()
    local = storage.storage_class_manifest(classes["local-path"])
    assert (local["provisioner"], local["volumeBindingMode"], local["reclaimPolicy"]) == (
        "rancher.io/local-path",
        "WaitForFirstConsumer",
        "Delete",
    )
    assert storage.storage_class_manifest(classes["shared"])["volumeBindingMode"] == "Immediate"
    nfs = storage.storage_class_manifest(classes["nfs-ai"])
    assert nfs["provisioner"] == "clusterproof.io/nfs-nfs-ai"
    assert nfs["parameters"] == {"archiveOnDelete": "true"}
    assert nfs["mountOptions"] == ["nfsvers=4.1"]
    ontap = storage.storage_class_manifest(classes["ontap"])
    assert ontap["provisioner"] == "csi.trident.netapp.io"
    assert ontap["parameters"] == {"backendType": "ontap-nas", "storagePools": "aff1:.*;aff2:.*"}


def test_local_path_config_serves_each_class_from_its_path():
    config = json.loads(storage.local_path_config_text(declared().values()))
    assert config == {
        "storageClassConfigs": {
            "local-path": {
                "nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/opt/local-path-provisioner"]}]
            },
            "shared": {"sharedFileSystemPath": "/srv/shared"},
        }
    }


def test_local_path_chart_values_keep_the_chart_from_making_classes():
    values = storage.local_path_chart_values(declared().values(), "registry.example.org/busybox:1.36")
    # The provisioner must answer to the provisioner the StorageClasses name, or no claim ever binds
    # (found on the lab, where pods run: the chart's own default is cluster.local/local-path-provisioner).
    assert values["storageClass"] == {"create": False, "provisionerName": "rancher.io/local-path"}
    assert storage.storage_class_manifest(declared()["local-path"])["provisioner"] == "rancher.io/local-path"
    assert values["storageClassConfigs"]["shared"] == {
        "storageClass": {"create": False},
        "sharedFileSystemPath": "/srv/shared",
    }
    assert values["helperImage"] == {"repository": "registry.example.org/busybox", "tag": "1.36"}
    assert storage.local_path_chart_values([], "registry:5000/busybox")["helperImage"] == {
        "repository": "registry:5000/busybox",
        "tag": "latest",
    }


def test_nfs_chart_values_name_the_export_and_the_class_provisioner():
    values = storage.nfs_chart_values(declared()["nfs-ai"])
    assert values == {
        "nfs": {"server": "nas1.example.org", "path": "/export/ai", "mountOptions": ["nfsvers=4.1"]},
        "storageClass": {"create": False, "provisionerName": "clusterproof.io/nfs-nfs-ai"},
    }
    assert storage.nfs_release_name(declared()["nfs-ai"]) == "nfs-nfs-ai"


def test_trident_backends_get_a_secret_each_with_the_credentials():
    objects = storage.trident_backend_objects(declared()["ontap"], SITE_VARS)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Secret", "clusterproof-backend-aff1"),
        ("TridentBackendConfig", "clusterproof-aff1"),
        ("Secret", "clusterproof-backend-aff2"),
        ("TridentBackendConfig", "clusterproof-aff2"),
    ]
    secret, backend = objects[0], objects[1]
    assert base64.b64decode(secret["data"]["password"]).decode() == "s3cret"
    assert backend["spec"] == {
        "version": 1,
        "backendName": "aff1",
        "storageDriverName": "ontap-nas",
        "managementLIF": "10.0.0.5",
        "dataLIF": "10.0.1.5",
        "svm": "svm_ai",
        "credentials": {"name": "clusterproof-backend-aff1"},
    }
    assert "dataLIF" not in objects[3]["spec"]


def test_trident_backend_without_credentials_is_refused_naming_the_variable():
    with pytest.raises(ValueError, match="credentials variable vault_ontap has no username and password"):
        storage.trident_backend_objects(declared()["ontap"], {})


def test_rwx_class_prefers_the_default():
    classes = declared()
    assert storage.rwx_class(classes.values()).name == "shared"
    rwx_default = storage.from_dicts([{**storage.dataclasses.asdict(classes["nfs-ai"]), "default": True}])
    assert storage.rwx_class([classes["shared"], *rwx_default]).name == "nfs-ai"
    assert storage.rwx_class([classes["local-path"]]) is None


def test_sandbox_helper_pods_are_completed_by_kwok_and_cluster_ones_are_not():
    sandbox = storage.local_path_helper_pod("busybox:1.36", sandbox=True)
    assert sandbox["metadata"]["annotations"] == {storage.COMPLETE_AFTER_ANNOTATION: "1s"}
    assert "affinity" not in sandbox["spec"]
    cluster = storage.local_path_helper_pod("busybox:1.36", sandbox=False)
    assert "annotations" not in cluster["metadata"]
    assert cluster["spec"]["containers"][0]["image"] == "busybox:1.36"


def test_cluster_helper_pods_keep_off_simulated_nodes():
    # The provisioner gives a shared volume's helper pod no node and a toleration of every taint:
    # only the template's affinity keeps it off KWOK nodes, where it would never run.
    pod = storage.local_path_helper_pod("busybox:1.36", sandbox=False)
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [{"matchExpressions": [{"key": "clusterproof.io/sandbox-node", "operator": "DoesNotExist"}]}]
    # The chart's own settings stay.
    assert pod["spec"]["priorityClassName"] == "system-node-critical"
    assert [t["key"] for t in pod["spec"]["tolerations"]] == ["node.kubernetes.io/disk-pressure"]
    (local_path,) = storage.releases([declared()["local-path"]], "busybox:1.36")
    assert local_path["helper_pod"] == pod


def test_sandbox_provisioner_process_and_files(tmp_path: Path):
    layout = Layout(tmp_path)
    process = storage_sandbox.component(layout, Path("/cache/bin"))
    assert process.argv[:2] == ("/cache/bin/local-path-provisioner", "start")
    assert "--kubeconfig=%s" % layout.kubeconfig in process.argv
    assert "--provisioner-name=rancher.io/local-path" in process.argv
    contents = storage_sandbox.files(declared().values(), "busybox:1.36")
    assert storage_sandbox.write_files(layout, contents, check_mode=True) == [
        str(tmp_path / "local-path" / "config.json"),
        str(tmp_path / "local-path" / "helperPod.yaml"),
    ]
    assert not (tmp_path / "local-path").exists()
    assert len(storage_sandbox.write_files(layout, contents)) == 2
    assert storage_sandbox.write_files(layout, contents) == []
    helper = yaml.safe_load((tmp_path / "local-path" / "helperPod.yaml").read_text())
    assert helper["metadata"]["annotations"][storage.COMPLETE_AFTER_ANNOTATION] == "1s"
    configmap = storage_sandbox.cluster_objects(contents)[2]
    assert json.loads(configmap["data"]["config.json"]) == json.loads(contents["config.json"])


def test_probe_pods_of_one_claim_prefer_different_nodes_and_tolerate_any_taint():
    pod = storage.probe_pod("ns", "shared-a", "shared-claim", "busybox:1.36", "shared-claim")
    assert pod["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "shared-claim"}}]
    assert pod["spec"]["tolerations"] == [{"operator": "Exists"}]
    term = pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == {"clusterproof.io/probe-group": "shared-claim"}
    claim = storage.probe_claim("ns", "c", "shared", "ReadWriteMany", "2Mi")
    assert claim["spec"] == {
        "storageClassName": "shared",
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "2Mi"}},
    }


# --- the validator's verdicts --------------------------------------------------------------------


def observed(*classes: storage.StorageClassDeclaration, extra_default: str = "") -> list[dict]:
    items = [storage.storage_class_manifest(cls) for cls in classes]
    if extra_default:
        items.append(
            {
                "metadata": {"name": extra_default, "annotations": {storage.DEFAULT_CLASS_ANNOTATION: "true"}},
                "provisioner": "ebs.csi.aws.com",
            }
        )
    return items


def test_class_checks_pass_when_the_cluster_has_the_declared_classes():
    classes = declared()
    checks = storage_validation.class_checks(classes.values(), observed(*classes.values()))
    assert [(c.id, c.status) for c in checks] == [
        ("storage/classes/local-path", "pass"),
        ("storage/classes/shared", "pass"),
        ("storage/classes/nfs-ai", "pass"),
        ("storage/classes/ontap", "pass"),
    ]


def test_a_missing_or_different_class_fails_and_says_what_to_do():
    classes = declared()
    changed = storage.storage_class_manifest(classes["shared"])
    changed["reclaimPolicy"] = "Retain"
    checks = storage_validation.class_checks([classes["local-path"], classes["shared"]], [changed])
    assert checks[0].status == "fail" and "not in the cluster" in checks[0].message
    assert checks[1].status == "fail" and "reclaimPolicy" in checks[1].message
    assert checks[1].observed["reclaimPolicy"] == "Retain"


def test_default_class_check_wants_exactly_the_declared_default():
    classes = declared()
    good = storage_validation.default_class_check(classes.values(), observed(*classes.values()))
    assert (good.status, good.observed) == ("pass", ["local-path"])
    two = storage_validation.default_class_check(classes.values(), observed(*classes.values(), extra_default="gp2"))
    assert two.status == "fail"
    assert "expected local-path to be the only default StorageClass, found gp2, local-path" in two.message
    none = storage_validation.default_class_check(classes.values(), [])
    assert none.status == "fail" and "found none" in none.message
    assert storage_validation.default_class_check([], []).status == "skip"


def test_bind_check():
    default = declared()["local-path"]
    bound = storage_validation.ClaimProbe(
        "local-path", "ReadWriteOnce", "Bound", "pvc-1", 2.5, {"c": ("Running", "n1")}
    )
    check = storage_validation.bind_check(default, bound, 180)
    assert (check.status, check.duration_s) == ("pass", 2.5)
    assert "once a pod consumes it" in check.title
    pending = storage_validation.ClaimProbe(
        "local-path", "ReadWriteOnce", "Pending", events=["ProvisioningFailed: boom"]
    )
    check = storage_validation.bind_check(default, pending, 180)
    assert check.status == "fail"
    assert "the claim is Pending after 180 s, expected Bound" in check.message
    assert "ProvisioningFailed: boom" in check.message
    failed = storage_validation.ClaimProbe("local-path", "ReadWriteOnce", error="403 Forbidden")
    assert "403 Forbidden" in storage_validation.bind_check(default, failed, 180).message
    assert storage_validation.bind_check(None, None, 180).status == "skip"


def test_rwx_check():
    shared = declared()["shared"]
    two_nodes = storage_validation.ClaimProbe(
        "shared", "ReadWriteMany", "Bound", "pv", 1.0, {"a": ("Running", "n1"), "b": ("Running", "n2")}
    )
    assert storage_validation.rwx_check(shared, two_nodes, 60).status == "pass"
    one_node = storage_validation.ClaimProbe(
        "shared", "ReadWriteMany", "Bound", "pv", 1.0, {"a": ("Running", "n1"), "b": ("Running", "n1")}
    )
    check = storage_validation.rwx_check(shared, one_node, 60)
    assert check.status == "pass" and "both pods ran on node n1" in check.message
    one_pending = storage_validation.ClaimProbe(
        "shared", "ReadWriteMany", "Bound", "pv", 1.0, {"a": ("Running", "n1"), "b": ("Pending", "")}
    )
    check = storage_validation.rwx_check(shared, one_pending, 60)
    assert check.status == "fail" and "1 of 2 pods run" in check.message
    skipped = storage_validation.rwx_check(None, None, 60)
    assert skipped.status == "skip" and "no declared storage class offers ReadWriteMany" in skipped.message


def test_a_pod_reads_back_what_another_wrote_where_pods_run():
    default = declared()["local-path"]

    def probe(read_back, error=""):
        pods = {"default-consumer": ("Running", "lab-worker-1"), "default-claim-reader": ("Succeeded", "lab-worker-1")}
        return storage_validation.ClaimProbe(
            "local-path", "ReadWriteOnce", "Bound", "pvc-1", 1.0, pods, error=error, read_back=read_back
        )

    check = storage_validation.readback_check(default, probe("default-consumer\n"), True, 60)
    assert (check.id, check.status, check.observed) == ("storage/default-readback", "pass", "default-consumer")
    empty = storage_validation.readback_check(default, probe(""), True, 60)
    assert empty.status == "fail" and "expected the line each writer wrote (default-consumer)" in empty.message
    assert empty.message.endswith(
        "(volume pvc-1; default-consumer Running on lab-worker-1, default-claim-reader Succeeded on lab-worker-1)"
    )
    unread = storage_validation.readback_check(default, probe(None), True, 60)
    assert unread.status == "fail" and "the reader did not finish within 60 s" in unread.message
    sandbox = storage_validation.readback_check(default, probe(None), False, 60)
    assert sandbox.status == "skip" and "KWOK simulates them" in sandbox.message


def test_the_shared_claim_must_hold_each_pod_s_line_where_pods_run():
    shared = declared()["shared"]
    pods = {"shared-a": ("Running", "n1"), "shared-b": ("Running", "n2"), "shared-claim-reader": ("Succeeded", "n1")}
    both = storage_validation.ClaimProbe(
        "shared", "ReadWriteMany", "Bound", "pv", 1.0, pods, read_back="shared-a\nshared-b\n"
    )
    assert storage_validation.rwx_check(shared, both, 60).status == "pass"
    apart = storage_validation.ClaimProbe("shared", "ReadWriteMany", "Bound", "pv", 1.0, pods, read_back="shared-a\n")
    check = storage_validation.rwx_check(shared, apart, 60)
    assert check.status == "fail" and "expected a line from each pod (shared-a, shared-b)" in check.message


def test_probe_pods_that_must_really_run_keep_off_simulated_nodes_and_a_reader_prints_the_file():
    pod = storage.probe_pod("ns", "r", "c", "busybox:1.35", "c", real_nodes_only=True, reader=True)
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [{"matchExpressions": [{"key": "clusterproof.io/sandbox-node", "operator": "DoesNotExist"}]}]
    assert pod["spec"]["containers"][0]["command"] == ["sh", "-c", "cat /data/probe"]
    assert storage.SIMULATED_NODE_LABEL == SANDBOX_NODE_LABEL
    assert "nodeAffinity" not in storage.probe_pod("ns", "w", "c", "busybox:1.35", "c")["spec"]["affinity"]


def test_cleanup_check_names_what_is_left_and_that_the_next_run_removes_it():
    assert storage_validation.cleanup_check("ns", storage_validation.Cleanup()).status == "pass"
    left = storage_validation.cleanup_check("ns", storage_validation.Cleanup(True, ["pvc-1"]))
    assert left.status == "fail" and "left behind: ns, pvc-1" in left.message
    assert "the next validation run removes them" in left.message and "by hand" not in left.message


def test_a_volume_left_on_a_node_that_went_away_is_a_warning_naming_the_node():
    cleanup = storage_validation.Cleanup(
        volumes_left=["pvc-1"], stranded={"pvc-1": "worker-1"}, forced_pods={"probe/default-consumer": "worker-1"}
    )
    check = storage_validation.cleanup_check("probe", cleanup)
    assert check.status == "warn", check
    assert "volume pvc-1 stays until worker-1 is Ready again" in check.message
    assert "removed at once the pods of nodes that are not Ready (probe/default-consumer on worker-1)" in check.message
    # A volume left on a Ready node is not explained by the node: a failure.
    other = storage_validation.Cleanup(volumes_left=["pvc-1", "pvc-2"], stranded={"pvc-1": "worker-1"})
    assert storage_validation.cleanup_check("probe", other).status == "fail"
    # Pods removed at once, everything gone: a pass that says so.
    forced = storage_validation.Cleanup(forced_pods={"probe/reader": "worker-1"})
    passed = storage_validation.cleanup_check("probe", forced)
    assert passed.status == "pass" and "probe/reader on worker-1" in passed.message


def _node(name: str, ready: str = "True", unschedulable: bool = False, simulated: bool = False) -> dict:
    labels = {storage.SIMULATED_NODE_LABEL: "true"} if simulated else {}
    condition = {"type": "Ready", "status": ready}
    if ready != "True":
        condition["message"] = "Kubelet stopped posting node status."
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, condition]},
    }


def test_the_probe_goes_only_to_nodes_ready_and_schedulable_at_the_start():
    nodes = [
        _node("cp-1"),
        _node("worker-1", ready="Unknown"),
        _node("worker-2", unschedulable=True),
        _node("worker-3"),
        _node("dgx-1", simulated=True),
    ]
    chosen, left_out = storage_validation.probe_nodes(nodes, real_only=True)
    assert chosen == ["cp-1", "worker-3"]
    assert left_out == {
        "worker-1": "not Ready (Ready=Unknown: Kubelet stopped posting node status.)",
        "worker-2": "cordoned",
    }
    # On the sandbox the simulated nodes are where the probe goes.
    assert storage_validation.probe_nodes(nodes, real_only=False)[0] == ["cp-1", "dgx-1", "worker-3"]
    assert storage_validation.probe_nodes([{"metadata": {"name": "x"}}], False) == (
        [],
        {"x": "not Ready (no Ready condition)"},
    )
    message = storage_validation.no_node_message(left_out)
    assert message.startswith("no node is Ready and schedulable") and "worker-2: cordoned" in message
    pod = storage.probe_pod("ns", "w", "c", "busybox:1.36", "c", True, nodes=chosen)
    (term,) = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [
        {"key": storage.SIMULATED_NODE_LABEL, "operator": "DoesNotExist"},
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["cp-1", "worker-3"]},
    ]


def test_pods_bound_to_a_node_that_is_not_ready_are_the_ones_removed_at_once():
    pods = [
        {"metadata": {"name": "a"}, "spec": {"nodeName": "worker-1"}},
        {"metadata": {"name": "b"}, "spec": {"nodeName": "worker-2"}},
        {"metadata": {"name": "pending"}, "spec": {}},
    ]
    assert storage_validation.stranded_pods(pods, ["worker-2"]) == {"a": "worker-1"}


def test_a_local_volume_is_pinned_to_its_node_and_a_shared_one_to_none():
    local = {
        "spec": {
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["w-1"]}]}
                    ]
                }
            }
        }
    }
    assert storage_validation.volume_node(local) == "w-1"
    assert storage_validation.volume_node({"spec": {"nfs": {"server": "nas"}}}) == ""


def test_earlier_probes_leftovers_are_found_by_label_and_claim_namespace_not_the_current_one():
    label = {storage.PROBE_LABEL: storage.PROBE_LABEL_VALUE}
    namespaces = [
        {"metadata": {"name": "clusterproof-storage-probe-aaaaaa", "labels": label}},
        {"metadata": {"name": "clusterproof-storage-probe-bbbbbb", "labels": label}},
        # Named like one but not labelled: someone else's, left alone.
        {"metadata": {"name": "clusterproof-storage-probe-cccccc"}},
        {"metadata": {"name": "team-a", "labels": label}},
    ]
    volumes = [
        {"metadata": {"name": "pvc-1"}, "spec": {"claimRef": {"namespace": "clusterproof-storage-probe-aaaaaa"}}},
        {"metadata": {"name": "pvc-2"}, "spec": {"claimRef": {"namespace": "clusterproof-storage-probe-bbbbbb"}}},
        {"metadata": {"name": "pvc-3"}, "spec": {"claimRef": {"namespace": "team-a"}}},
        {"metadata": {"name": "pv-static"}, "spec": {}},
    ]
    found = storage_validation.find_leftovers(namespaces, volumes, current="clusterproof-storage-probe-bbbbbb")
    assert found == storage_validation.Leftovers(["clusterproof-storage-probe-aaaaaa"], ["pvc-1"])
    assert not storage_validation.find_leftovers([], [])


def test_the_leftovers_check_says_what_was_removed_and_what_a_node_still_holds():
    none = storage_validation.Leftovers()
    assert storage_validation.leftovers_check(none, none, {}).status == "pass"
    found = storage_validation.Leftovers(["clusterproof-storage-probe-aaaaaa"], ["pvc-1"])
    removed = storage_validation.leftovers_check(found, none, {})
    assert removed.status == "pass"
    assert removed.message == (
        "removed what an earlier run left: namespace clusterproof-storage-probe-aaaaaa, volume pvc-1"
    )
    waiting = storage_validation.leftovers_check(found, storage_validation.Leftovers([], ["pvc-1"]), {"pvc-1": "w-1"})
    assert waiting.status == "warn" and "volume pvc-1 stays until w-1 is Ready again" in waiting.message
    assert "removed: namespace clusterproof-storage-probe-aaaaaa" in waiting.message
    stuck = storage_validation.leftovers_check(found, found, {})
    assert stuck.status == "fail" and "still there after this run deleted them and waited" in stuck.message


def test_a_node_lost_while_the_probe_waited_is_named_by_the_probe_checks():
    classes = declared()
    probe = storage_validation.ClaimProbe("local-path", "ReadWriteOnce", phase="Bound", volume="pvc-1")
    probe.pods = {"default-consumer": ("Running", "w-1"), "default-claim-reader": ("Pending", "w-1")}
    probe.node_lost, probe.node_lost_why = "w-1", "Ready=Unknown: Kubelet stopped posting node status."
    assert storage_validation.bind_check(classes["local-path"], probe, 180).status == "pass"
    readback = storage_validation.readback_check(classes["local-path"], probe, True, 180)
    assert readback.status == "fail"
    assert "node w-1 went away while the probe waited on it (Ready=Unknown" in readback.message
    assert "default-claim-reader, default-consumer" in readback.message
    shared = storage_validation.ClaimProbe("shared", "ReadWriteMany", phase="Bound")
    shared.pods = {"shared-a": ("Running", "w-1"), "shared-b": ("Pending", "w-1")}
    shared.node_lost = "w-1"
    rwx = storage_validation.rwx_check(classes["shared"], shared, 180)
    assert rwx.status == "fail" and "node w-1 went away" in rwx.message


def test_section_has_the_class_table():
    classes = declared()
    found = observed(classes["local-path"])
    table = storage_validation.class_table([classes["local-path"], classes["shared"]], found)
    assert table["rows"] == [
        ["local-path", "local-path", "yes", "yes", "ReadWriteOnce", "yes"],
        ["shared", "local-path", "no", None, "ReadWriteMany", "no"],
    ]
    assert table["row_status"] == ["pass", "fail"]
    section = storage_validation.section(storage_validation.class_checks(classes.values(), found), table)
    assert section["id"] == "storage" and section["tables"][0]["id"] == "storage-classes"


def test_releases_one_local_path_for_all_one_nfs_per_class_one_trident_operator():
    classes = list(declared().values())
    found = storage.releases(classes, "busybox:1.36", {"trident": "netapp"})
    assert [(r["provisioner"], r["name"], r["namespace"]) for r in found] == [
        ("local-path", "local-path-provisioner", "local-path-storage"),
        ("nfs", "nfs-nfs-ai", "nfs-provisioner"),
        ("trident", "trident-operator", "netapp"),
    ]
    assert set(found[0]["values"]["storageClassConfigs"]) == {"local-path", "shared"}
    assert found[1]["values"] == storage.nfs_chart_values(declared()["nfs-ai"])
    assert storage.releases([declared()["local-path"]], "busybox:1.36")[0]["provisioner"] == "local-path"
    assert storage.releases([], "busybox:1.36") == []


def test_credential_variables_are_named_once():
    assert storage.credential_variables(declared().values()) == ["vault_ontap"]
    assert storage.credential_variables([declared()["local-path"]]) == []


def test_chart_sources_are_pinned_for_every_provisioner_and_local_path_matches_the_sandbox():
    from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build

    assert set(storage.CHART_SOURCES) == set(storage.PROVISIONERS)
    # The chart a real cluster gets is the version the sandbox runs.
    assert storage.CHART_SOURCES["local-path"].version == sandbox_build.SandboxVersions.local_path_provisioner


def test_a_claim_whose_chosen_node_went_away_before_its_pod_was_bound_names_that_node():
    classes = declared()
    shared = storage_validation.ClaimProbe("shared", "ReadWriteMany", phase="Pending", selected_node="w-1")
    shared.pods = {"shared-a": ("Pending", "")}
    shared.node_lost, shared.node_lost_why = "w-1", "Ready=Unknown"
    check = storage_validation.rwx_check(classes["shared"], shared, 180)
    assert check.status == "fail"
    assert (
        "node w-1 went away while the probe waited on it (Ready=Unknown); the claim's volume was to be made there"
        in (check.message)
    )
