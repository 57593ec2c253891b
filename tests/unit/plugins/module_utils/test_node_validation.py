"""GPU node validation: declared nodes against the Nodes a cluster reports."""

from __future__ import annotations

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.validate.nodes import (
    advertised_per_gpu,
    validate_gpu_nodes,
)

PRODUCT = "Tesla-V100-SXM2-32GB"


def declared(name: str, gpus: int = 8, **extra):
    node = {
        "name": name,
        "gpu_count": gpus,
        "gpu_product": PRODUCT,
        "gpu_memory_mib": 32768,
        "cpu_cores": 80,
        "memory_gib": 512,
        "labels": {},
    }
    node.update(extra)
    return node


def api_node(name: str, gpus: int | str | None = 8, ready: str = "True", labels: dict | None = None, **condition):
    """A Node as the API's JSON gives it (what kube.list_nodes returns)."""
    if labels is None:
        labels = {"nvidia.com/gpu.product": PRODUCT, "nvidia.com/gpu.memory": "32768"}
    allocatable = {"cpu": "80", "memory": "527557512Ki", "pods": "110"}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {
            "allocatable": allocatable,
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": ready, **condition},
            ],
        },
    }


def by_id(outcome):
    return {check.id: check for check in outcome.checks}


def test_two_dgx1_nodes_as_declared_pass_every_check():
    outcome = validate_gpu_nodes(
        [declared("dgx1-1"), declared("dgx1-2")],
        [api_node("dgx1-1"), api_node("dgx1-2"), api_node("control-plane", gpus=None, labels={})],
    )
    assert outcome.failed == []
    assert {check.status for check in outcome.checks} == {"pass"}
    checks = by_id(outcome)
    assert checks["cluster/gpu-total"].expected == 16
    assert checks["cluster/gpu-total"].observed == 16
    assert checks["gpu-nodes/dgx1-1/gpu-count"].observed == 8
    assert [row.name for row in outcome.node_table] == ["dgx1-1", "dgx1-2"]  # the control plane is no GPU node
    assert all(row.status == "pass" and row.ready for row in outcome.node_table)


def test_check_ids_are_unique_and_stable():
    outcome = validate_gpu_nodes([declared("dgx1-1"), declared("dgx1-2")], [api_node("dgx1-1")])
    ids = [check.id for check in outcome.checks]
    assert len(ids) == len(set(ids))
    assert ids[:6] == [
        "gpu-nodes/dgx1-1/present",
        "gpu-nodes/dgx1-1/ready",
        "gpu-nodes/dgx1-1/gpu-count",
        "gpu-nodes/dgx1-1/gpu-product",
        "gpu-nodes/dgx1-1/gpu-memory",
        "gpu-nodes/dgx1-2/present",
    ]
    assert ids[-2:] == ["cluster/gpu-total", "cluster/undeclared-gpu-nodes"]


def test_missing_node_fails_naming_it_and_skips_its_other_checks():
    outcome = validate_gpu_nodes([declared("dgx1-1"), declared("dgx1-2")], [api_node("dgx1-1")])
    checks = by_id(outcome)
    present = checks["gpu-nodes/dgx1-2/present"]
    assert present.status == "fail"
    assert "dgx1-2" in present.message
    assert "kubectl get nodes" in present.message
    for suffix in ("ready", "gpu-count", "gpu-product", "gpu-memory"):
        assert checks["gpu-nodes/dgx1-2/" + suffix].status == "skip"
    total = checks["cluster/gpu-total"]
    assert (total.status, total.expected, total.observed) == ("fail", 16, 8)
    assert "dgx1-2 0 of 8" in total.message
    row = outcome.node_table[1]
    assert (row.name, row.present, row.found_gpus, row.status) == ("dgx1-2", False, None, "fail")


def test_wrong_gpu_count_fails_naming_expected_and_found():
    outcome = validate_gpu_nodes([declared("dgx1-1"), declared("dgx1-2")], [api_node("dgx1-1"), api_node("dgx1-2", 6)])
    check = by_id(outcome)["gpu-nodes/dgx1-2/gpu-count"]
    assert (check.status, check.expected, check.observed) == ("fail", 8, 6)
    assert "dgx1-2" in check.message
    assert "expected 8" in check.message
    assert "found 6" in check.message
    assert "device plugin" in check.message
    assert by_id(outcome)["gpu-nodes/dgx1-1/gpu-count"].status == "pass"
    assert [check.id for check in outcome.failed] == ["gpu-nodes/dgx1-2/gpu-count", "cluster/gpu-total"]


def test_node_without_gpu_resource_is_found_with_none():
    outcome = validate_gpu_nodes([declared("dgx1-1")], [api_node("dgx1-1", gpus=None)])
    check = by_id(outcome)["gpu-nodes/dgx1-1/gpu-count"]
    assert (check.status, check.observed) == ("fail", 0)
    assert "no nvidia.com/gpu in allocatable" in check.message


def test_unreadable_gpu_quantity_is_reported_as_found():
    outcome = validate_gpu_nodes([declared("dgx1-1")], [api_node("dgx1-1", gpus="8k")])
    check = by_id(outcome)["gpu-nodes/dgx1-1/gpu-count"]
    assert (check.status, check.observed) == ("fail", "8k")
    assert "'8k'" in check.message


def test_not_ready_node_fails_with_the_condition_found():
    outcome = validate_gpu_nodes(
        [declared("dgx1-1")],
        [api_node("dgx1-1", ready="False", reason="KubeletNotReady", message="PLEG is not healthy")],
    )
    check = by_id(outcome)["gpu-nodes/dgx1-1/ready"]
    assert check.status == "fail"
    assert check.observed == "Ready=False (KubeletNotReady; PLEG is not healthy)"
    assert "kubectl describe node dgx1-1" in check.message
    assert outcome.node_table[0].ready is False


def test_product_and_memory_labels_are_compared_when_declared():
    labels = {"nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB", "nvidia.com/gpu.memory": "16384"}
    outcome = validate_gpu_nodes([declared("dgx1-1")], [api_node("dgx1-1", labels=labels)])
    checks = by_id(outcome)
    product = checks["gpu-nodes/dgx1-1/gpu-product"]
    assert (product.status, product.expected, product.observed) == ("fail", PRODUCT, "Tesla-V100-SXM2-16GB")
    assert "nvidia.com/gpu.product=" + PRODUCT in product.message
    assert "gpu-feature-discovery" in product.message
    memory = checks["gpu-nodes/dgx1-1/gpu-memory"]
    assert (memory.status, memory.expected, memory.observed) == ("fail", "32768", "16384")
    assert outcome.node_table[0].found_product == "Tesla-V100-SXM2-16GB"


def test_missing_labels_say_so():
    outcome = validate_gpu_nodes([declared("dgx1-1")], [api_node("dgx1-1", labels={})])
    product = by_id(outcome)["gpu-nodes/dgx1-1/gpu-product"]
    assert product.status == "fail"
    assert "found no such label" in product.message


def test_product_and_memory_not_declared_are_not_checked():
    node = declared("dgx1-1", gpu_product=None, gpu_memory_mib=None)
    outcome = validate_gpu_nodes([node], [api_node("dgx1-1", labels={})])
    ids = set(by_id(outcome))
    assert "gpu-nodes/dgx1-1/gpu-product" not in ids
    assert "gpu-nodes/dgx1-1/gpu-memory" not in ids
    assert outcome.failed == []


def test_declared_labels_are_checked():
    node = declared("dgx1-1", labels={"clusterproof.io/pool": "training", "zone": "a"})
    outcome = validate_gpu_nodes([node], [api_node("dgx1-1", labels={"zone": "a", "nvidia.com/gpu.product": PRODUCT})])
    check = by_id(outcome)["gpu-nodes/dgx1-1/labels"]
    assert check.status == "fail"
    assert "clusterproof.io/pool expected 'training' found no such label" in check.message
    assert "zone" not in check.message  # only the wrong label is named


def test_undeclared_gpu_node_is_a_warning_not_a_failure():
    outcome = validate_gpu_nodes(
        [declared("dgx1-1")],
        [api_node("dgx1-1"), api_node("stray-gpu", 4), api_node("cpu-only", gpus=None, labels={})],
    )
    checks = by_id(outcome)
    stray = checks["cluster/undeclared-gpu-nodes"]
    assert (stray.status, stray.observed) == ("warn", ["stray-gpu"])
    assert "stray-gpu" in stray.message
    assert "cpu-only" not in stray.message
    # The cluster-wide total counts every GPU the cluster reports.
    assert (checks["cluster/gpu-total"].status, checks["cluster/gpu-total"].observed) == ("fail", 12)
    assert "stray-gpu 4 undeclared" in checks["cluster/gpu-total"].message
    assert outcome.node_table[-1].name == "stray-gpu"
    assert (outcome.node_table[-1].declared, outcome.node_table[-1].status) == (False, "warn")


def test_every_failure_says_expected_found_and_where_to_look():
    outcome = validate_gpu_nodes(
        [declared("a"), declared("b"), declared("c", labels={"x": "y"})],
        [api_node("b", 2, ready="Unknown", labels={}), api_node("c", labels={})],
    )
    assert len(outcome.failed) >= 6
    for check in outcome.failed:
        text = check.message.lower()
        assert "expected" in text, check
        assert "found" in text, check
        assert "look at" in text, check


def test_section_dict_is_what_the_report_takes():
    outcome = validate_gpu_nodes([declared("dgx1-1")], [api_node("dgx1-1")])
    section = outcome.section_dict()
    assert section["id"] == "gpu-nodes"
    assert section["checks"][0] == {
        "id": "gpu-nodes/dgx1-1/present",
        "title": "dgx1-1 is in the cluster",
        "status": "pass",
        "expected": "a Node named dgx1-1",
        "observed": "found",
        "message": "",
        "duration_s": None,
    }
    assert section["node_table"][0]["found_gpus"] == 8


@pytest.mark.parametrize(
    ("nodes", "error"),
    [
        ([declared("a"), declared("a")], "declared more than once: a"),
        ([declared("a", gpus=-1)], "gpu_count must be a whole number"),
        ([{"gpu_count": 8}], "has no name"),
        ([declared("a", gpu_memory_mib="lots")], "gpu_memory_mib must be a whole number"),
    ],
)
def test_invalid_declarations_are_refused(nodes, error):
    with pytest.raises(ValueError, match=error):
        validate_gpu_nodes(nodes, [])


def test_a_thousand_eight_gpu_nodes_name_the_one_short_node():
    # How fast this is, is bench/validation_bench.py's figure (a timed assertion here would flake
    # on a loaded 2-core machine).
    names = ["gpu-%04d" % index for index in range(1000)]
    wanted = [declared(name) for name in names]
    observed = [api_node(name) for name in names]
    observed[500] = api_node(names[500], 7)
    outcome = validate_gpu_nodes(wanted, observed)
    assert [check.id for check in outcome.failed] == ["gpu-nodes/gpu-0500/gpu-count", "cluster/gpu-total"]
    assert by_id(outcome)["cluster/gpu-total"].expected == 8000
    assert len(outcome.node_table) == 1000


def test_time_slicing_multiplies_the_allocatable_gpus_each_node_must_show():
    layer = {"layer": "device_plugin", "time_slicing": {"replicas": 4, "resources": ["nvidia.com/gpu"]}}
    assert advertised_per_gpu(layer) == 4
    assert advertised_per_gpu({"layer": "gpu_operator", "time_slicing": None}) == 1
    assert advertised_per_gpu(None) == 1
    sliced = validate_gpu_nodes([declared("dgx1-1")], [api_node("dgx1-1", gpus=32)], advertised_per_gpu(layer))
    assert sliced.failed == [] and by_id(sliced)["cluster/gpu-total"].expected == 32
    # Without the declaration's time-slicing, 32 advertised GPUs on an 8-GPU node is a failure.
    plain = validate_gpu_nodes([declared("dgx1-1")], [api_node("dgx1-1", gpus=32)])
    assert [check.id for check in plain.failed] == ["gpu-nodes/dgx1-1/gpu-count", "cluster/gpu-total"]
