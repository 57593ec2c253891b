"""GPU node validation: declared nodes against the Nodes a cluster reports."""

from __future__ import annotations

import copy

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.validate.nodes import (
    advertised_per_gpu,
    dra_gpus_by_node,
    validate_gpu_nodes,
)
from tests.unit.plugins.module_utils.helpers import UNIT_FIXTURES

PRODUCT = "Tesla-V100-SXM2-32GB"
DRA_FIXTURE = UNIT_FIXTURES / "dra" / "dgx-h100-dynamic-mig.yaml"


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
    assert ids[-3:] == ["cluster/gpu-total", "cluster/undeclared-gpu-nodes", "cluster/node-pressure"]


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


def test_a_node_under_pressure_fails_naming_it_and_the_condition_gpu_node_or_not():
    pressed = api_node("lab-worker-1", gpus=None, labels={})
    pressed["status"]["conditions"].append(
        {"type": "DiskPressure", "status": "True", "message": "kubelet has disk pressure"}
    )
    calm = validate_gpu_nodes(
        [declared("dgx1-1")], [api_node("dgx1-1"), api_node("lab-worker-2", gpus=None, labels={})]
    )
    assert by_id(calm)["cluster/node-pressure"].status == "pass"
    outcome = validate_gpu_nodes([declared("dgx1-1")], [api_node("dgx1-1"), pressed])
    check = by_id(outcome)["cluster/node-pressure"]
    assert check.status == "fail"
    assert check.observed == ["lab-worker-1: DiskPressure (kubelet has disk pressure)"]
    assert "evictionHard" in check.message
    # Pressure is the node's, not the GPUs': the declared node's own checks still pass.
    assert by_id(outcome)["gpu-nodes/dgx1-1/ready"].status == "pass"


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


# --- GPUs counted from dynamic resource allocation (ResourceSlices of NVIDIA's DRA driver) ---------


def resource_slice(node: str, gpus: int, generation: int = 1, count: int = 1, first: int = 0, **spec):
    """A ResourceSlice of NVIDIA's DRA driver with ``gpus`` whole GPUs (gpu-<first>...) on ``node``."""
    devices = [
        {
            "name": "gpu-%d" % index,
            "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100 80GB HBM3"}},
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for index in range(first, first + gpus)
    ]
    body = {
        "driver": "gpu.nvidia.com",
        "nodeName": node,
        "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
        "devices": devices,
    }
    body.update(spec)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": node}, "spec": body}


def test_the_drivers_slices_count_whole_gpus_of_the_newest_generation_only():
    slices = yaml.safe_load(DRA_FIXTURE.read_text())
    found = dra_gpus_by_node(slices)
    assert list(found) == ["dgx-h100-1"]
    (pool,) = found["dgx-h100-1"].pools
    # Generation 3 has the counters' slice and two GPU slices; the stale generation-2 slice's three GPUs do not count.
    assert (pool.name, pool.generation, pool.slices_seen, pool.slices_expected) == ("dgx-h100-1", 3, 3, 3)
    assert pool.complete
    assert pool.whole_gpus == 2
    assert pool.other_devices == {"mig": 3}
    assert found["dgx-h100-1"].products == ["NVIDIA H100 80GB HBM3"]
    assert "2 whole GPUs (NVIDIA H100 80GB HBM3), 3 mig devices" in found["dgx-h100-1"].describe()


def test_a_pool_with_fewer_slices_than_its_count_is_incomplete_and_says_so():
    slices = yaml.safe_load(DRA_FIXTURE.read_text())
    del slices[2]  # gpu-1's slice: the driver is still publishing, or it was lost
    (pool,) = dra_gpus_by_node(slices)["dgx-h100-1"].pools
    assert (pool.whole_gpus, pool.slices_seen, pool.slices_expected, pool.complete) == (1, 2, 3, False)
    assert "incomplete: 2 of 3 ResourceSlices" in pool.describe()


def test_other_drivers_shared_pools_and_repeated_devices_do_not_count():
    slices = [
        resource_slice("n1", 4, count=2),
        resource_slice("n1", 4, count=2, first=2),  # gpu-2 and gpu-3 again: a device counts once per pool
        resource_slice("n1", 8, driver="dra.example.com"),
        resource_slice("n2", 8, nodeName=None, allNodes=True),  # a pool for every node is no node's GPUs
    ]
    assert {node: gpus.whole_gpus for node, gpus in dra_gpus_by_node(slices).items()} == {"n1": 6}


def test_qualified_and_v1beta1_attributes_and_untyped_devices():
    qualified = resource_slice("n1", 0)
    qualified["spec"]["devices"] = [
        {"name": "gpu-0", "attributes": {"gpu.nvidia.com/type": {"string": "gpu"}}},
        {"name": "gpu-1", "basic": {"attributes": {"type": {"string": "gpu"}}}},
        {"name": "gpu-2", "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}}},
        {"name": "gpu-vfio-3", "attributes": {"type": {"string": "vfio"}}},
    ]
    (pool,) = dra_gpus_by_node([qualified])["n1"].pools
    assert (pool.whole_gpus, pool.other_devices) == (2, {"untyped": 1, "vfio": 1})


def test_a_node_without_the_device_plugin_is_counted_from_its_resource_slices():
    slices = [resource_slice("dgx-h100-1", 4, generation=2, count=2), resource_slice("dgx-h100-1", 4, 2, 2, first=4)]
    outcome = validate_gpu_nodes(
        [declared("dgx-h100-1", gpu_product=None, gpu_memory_mib=None)],
        [api_node("dgx-h100-1", gpus=None, labels={})],
        resource_slices=slices,
    )
    assert outcome.failed == []
    count = by_id(outcome)["gpu-nodes/dgx-h100-1/gpu-count"]
    assert (count.status, count.expected, count.observed) == ("pass", 8, 8)
    assert "counted from dynamic resource allocation (ResourceSlices)" in count.message
    assert "pool dgx-h100-1 generation 2: 8 whole GPUs" in count.message
    row = outcome.node_table[0]
    assert (row.gpu_source, row.found_gpus, row.both_sources) == ("dra", 8, False)
    assert row.found_product == "NVIDIA H100 80GB HBM3"  # no GPU feature discovery label: DRA's productName
    total = by_id(outcome)["cluster/gpu-total"]
    assert (total.status, total.observed) == ("pass", 8)
    assert total.message == "8 from dynamic resource allocation (ResourceSlices) on 1 nodes"


def test_a_short_dra_node_fails_naming_the_source_and_where_to_look():
    outcome = validate_gpu_nodes(
        [declared("n1")], [api_node("n1", gpus=None)], resource_slices=[resource_slice("n1", 7)]
    )
    check = by_id(outcome)["gpu-nodes/n1/gpu-count"]
    assert (check.status, check.expected, check.observed) == ("fail", 8, 7)
    assert "expected 8 allocatable GPUs, found 7, counted from dynamic resource allocation" in check.message
    assert "kubectl get resourceslices --field-selector spec.nodeName=n1,spec.driver=gpu.nvidia.com" in check.message
    assert "device plugin /" not in check.message
    assert outcome.node_table[0].gpu_source == "dra"


def test_a_node_with_both_sources_says_so_and_is_judged_by_the_preference():
    nodes, slices = [api_node("n1", gpus=8)], [resource_slice("n1", 4)]
    default = validate_gpu_nodes([declared("n1")], nodes, resource_slices=slices)
    check = by_id(default)["gpu-nodes/n1/gpu-count"]
    assert (check.status, check.observed) == ("pass", 8)
    assert "counted from the device plugin" in check.message
    assert (
        "both sources report GPUs on this node (8 nvidia.com/gpu from the device plugin, 4 from DRA)" in check.message
    )
    assert (default.node_table[0].gpu_source, default.node_table[0].both_sources) == ("device-plugin", True)

    prefer_dra = validate_gpu_nodes([declared("n1")], nodes, resource_slices=slices, gpu_count_preference="dra")
    check = by_id(prefer_dra)["gpu-nodes/n1/gpu-count"]
    assert (check.status, check.expected, check.observed) == ("fail", 8, 4)
    assert "both sources report GPUs" in check.message
    assert prefer_dra.node_table[0].gpu_source == "dra"


def test_the_preferred_source_reporting_nothing_gives_way_to_the_other():
    # A device plugin that advertises 0 (DRA took the GPUs over) and a DRA-preferring site without DRA.
    plugin_zero = validate_gpu_nodes(
        [declared("n1")], [api_node("n1", gpus=0)], resource_slices=[resource_slice("n1", 8)]
    )
    assert plugin_zero.node_table[0].gpu_source == "dra" and plugin_zero.failed == []
    no_dra = validate_gpu_nodes([declared("n1")], [api_node("n1")], gpu_count_preference="dra")
    assert no_dra.node_table[0].gpu_source == "device-plugin" and no_dra.failed == []


def test_a_node_with_neither_source_says_both_are_missing():
    outcome = validate_gpu_nodes([declared("n1")], [api_node("n1", gpus=None)])
    check = by_id(outcome)["gpu-nodes/n1/gpu-count"]
    assert "no ResourceSlice of the DRA driver gpu.nvidia.com" in check.message
    assert "device plugin / GPU operator pod on n1" in check.message and "DRA driver's kubelet plugin" in check.message
    assert outcome.node_table[0].gpu_source == "none"


def test_time_slicing_replicas_multiply_only_the_device_plugins_count():
    layer = {"layer": "device_plugin", "time_slicing": {"replicas": 4, "resources": ["nvidia.com/gpu"]}}
    outcome = validate_gpu_nodes(
        [declared("sliced"), declared("dra")],
        [api_node("sliced", gpus=32), api_node("dra", gpus=None)],
        advertised_per_gpu(layer),
        resource_slices=[resource_slice("dra", 8)],
    )
    assert outcome.failed == []
    assert [row.declared_gpus for row in outcome.node_table] == [32, 8]
    total = by_id(outcome)["cluster/gpu-total"]
    assert (total.expected, total.observed) == (40, 40)
    assert "32 from the device plugin (allocatable nvidia.com/gpu) on 1 nodes" in total.message


def test_an_undeclared_dra_gpu_node_is_a_warning():
    outcome = validate_gpu_nodes(
        [declared("n1")],
        [api_node("n1"), api_node("stray", gpus=None, labels={})],
        resource_slices=[resource_slice("stray", 2), resource_slice("no-such-node", 8)],
    )
    stray = by_id(outcome)["cluster/undeclared-gpu-nodes"]
    assert (stray.status, stray.observed) == ("warn", ["stray"])
    total = by_id(outcome)["cluster/gpu-total"]
    assert (total.status, total.observed) == ("fail", 10)  # a slice naming no Node of the cluster is no GPU of it
    assert "stray 2 undeclared" in total.message
    assert (outcome.node_table[-1].name, outcome.node_table[-1].gpu_source) == ("stray", "dra")


def test_an_unknown_preference_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="gpu_count_preference must be one of device_plugin, dra, got 'nvml'"):
        validate_gpu_nodes([], [], gpu_count_preference="nvml")


def test_a_thousand_nodes_half_of_them_on_dra():
    names = ["gpu-%04d" % index for index in range(1000)]
    observed = [api_node(name, gpus=None if index % 2 else 8) for index, name in enumerate(names)]
    slices = [resource_slice(name, 8) for name in names[1::2]]
    slices[100] = copy.deepcopy(slices[100])
    slices[100]["spec"]["devices"].pop()
    outcome = validate_gpu_nodes([declared(name) for name in names], observed, resource_slices=slices)
    assert [check.id for check in outcome.failed] == ["gpu-nodes/gpu-0201/gpu-count", "cluster/gpu-total"]
    assert by_id(outcome)["cluster/gpu-total"].observed == 7999
    assert sum(row.gpu_source == "dra" for row in outcome.node_table) == 500


def test_a_simulated_node_is_named_simulated_in_every_check_and_a_real_one_is_not():
    outcome = validate_gpu_nodes(
        [declared("dgx1-1", simulated=True), declared("lab-worker-1", gpus=0, gpu_product=None, gpu_memory_mib=None)],
        [api_node("dgx1-1"), api_node("lab-worker-1", gpus=None, labels={})],
    )
    checks = by_id(outcome)
    simulated = [check for check_id, check in checks.items() if check_id.startswith("gpu-nodes/dgx1-1/")]
    assert simulated and all("dgx1-1 (simulated)" in check.title for check in simulated)
    assert checks["gpu-nodes/dgx1-1/present"].observed == "found, simulated by KWOK"
    real = [check for check_id, check in checks.items() if check_id.startswith("gpu-nodes/lab-worker-1/")]
    assert real and not any("simulated" in check.title for check in real)
    assert checks["gpu-nodes/lab-worker-1/present"].observed == "found"


def test_the_node_table_says_which_node_s_gpus_are_simulated():
    from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import node_table

    outcome = validate_gpu_nodes(
        [declared("dgx1-1", simulated=True), declared("dgx1-2")], [api_node("dgx1-1"), api_node("dgx1-2")]
    )
    table = node_table([row.to_dict() for row in outcome.node_table])
    sources = {row[0]: row[3] for row in table.rows}
    assert sources == {"dgx1-1": "simulated (KWOK)", "dgx1-2": "device plugin"}
