"""GPUs counted from dynamic resource allocation on the sandbox: a simulated node without the
device plugin (no ``nvidia.com/gpu`` in its allocatable), whose GPUs are devices in ResourceSlices
of NVIDIA's DRA driver ``gpu.nvidia.com``, is validated by ``validate_gpu_nodes`` against the
sandbox's real API server (``resource.k8s.io/v1``): counted from the newest generation of its pool
of two slices, the source named, beside the inventory's device-plugin nodes."""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane

from .conftest import Sandbox, ansible_module, module_result, wait_for

NODE = "dgx-h100-dra"
PRODUCT = "NVIDIA H100 80GB HBM3"


def gpu_slice(part: int, generation: int, minors: range, slices: int) -> dict:
    """One ResourceSlice of the driver's pool for NODE, shaped as NVIDIA's driver publishes it
    (kubernetes-sigs/dra-driver-nvidia-gpu, cmd/gpu-kubelet-plugin/deviceinfo.go): whole GPUs
    named gpu-<minor> with ``type: gpu``, and one MIG device, which is no whole GPU."""
    devices = [
        {
            "name": "gpu-%d" % minor,
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": "GPU-e2e-%d-%d" % (generation, minor)},
                "productName": {"string": PRODUCT},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for minor in minors
    ]
    devices.append({"name": "gpu-%d-mig-1g10gb-0" % minors[0], "attributes": {"type": {"string": "mig"}}})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "%s-gpu.nvidia.com-g%d-%d" % (NODE, generation, part)},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": NODE,
            "pool": {"name": NODE, "generation": generation, "resourceSliceCount": slices},
            "devices": devices,
        },
    }


@pytest.mark.sandbox
def test_a_node_without_the_device_plugin_is_counted_from_its_resource_slices(sandbox: Sandbox, api_client, tmp_path):
    from kubernetes import client

    core, resource = client.CoreV1Api(api_client), client.ResourceV1Api(api_client)
    node = control_plane.node_manifest({"name": NODE, "gpu_count": 0, "cpu_cores": 64, "memory_gib": 512})
    for field in ("capacity", "allocatable"):
        del node["status"][field]["nvidia.com/gpu"]
    # Generation 2 is the pool now (two slices of four GPUs); a slice of generation 1 is left behind.
    slices = [gpu_slice(0, 2, range(0, 4), 2), gpu_slice(1, 2, range(4, 8), 2), gpu_slice(0, 1, range(0, 2), 1)]
    created: list[str] = []
    try:
        core.create_node(node)
        for item in slices:
            resource.create_resource_slice(copy.deepcopy(item))
            created.append(item["metadata"]["name"])
        assert wait_for(lambda: _ready(core.read_node(NODE)), timeout=60), "KWOK did not make the node Ready"

        declared = [
            {"name": NODE, "gpu_count": 8},
            {"name": "dgx1-1", "gpu_count": 8},
            {"name": "dgx1-2", "gpu_count": 8},
        ]
        done = ansible_module("clusterproof.gpu.validate_gpu_nodes", {"nodes": declared}, sandbox)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        result = module_result(done)
        checks = {check["id"]: check for check in result["section"]["checks"]}
        count = checks[f"gpu-nodes/{NODE}/gpu-count"]
        assert (count["status"], count["expected"], count["observed"]) == ("pass", 8, 8), count
        assert "counted from dynamic resource allocation (ResourceSlices)" in count["message"]
        assert f"pool {NODE} generation 2: 8 whole GPUs ({PRODUCT}), 2 mig devices" in count["message"]
        rows = {row["name"]: row for row in result["section"]["node_table"]}
        assert (rows[NODE]["gpu_source"], rows[NODE]["found_gpus"], rows[NODE]["found_product"]) == ("dra", 8, PRODUCT)
        assert rows["dgx1-1"]["gpu_source"] == "device-plugin"
        assert result["dra_resource_slices"] == 3
        total = checks["cluster/gpu-total"]
        assert (total["status"], total["observed"]) == ("pass", 24), total
        assert "8 from dynamic resource allocation (ResourceSlices) on 1 nodes" in total["message"]
        assert result["failed_checks"] == 0, [check["id"] for check in checks.values() if check["status"] == "fail"]

        # The driver drops a GPU: the pool's next generation has seven; the node now fails, naming DRA.
        for item in slices:
            resource.delete_resource_slice(item["metadata"]["name"])
        for item in (gpu_slice(0, 3, range(0, 4), 2), gpu_slice(1, 3, range(4, 7), 2)):
            resource.create_resource_slice(item)
            created.append(item["metadata"]["name"])
        # This time the section goes to a file (section_file), as on a large site.
        section_file = tmp_path / "sections" / "gpu-nodes.json"
        args = {"nodes": declared, "section_file": str(section_file)}
        done = ansible_module("clusterproof.gpu.validate_gpu_nodes", args, sandbox)
        assert done.returncode == 0, done.stdout[-3000:]
        assert module_result(done)["section_file"] == str(section_file) and "section" not in module_result(done)
        section = json.loads(section_file.read_text())
        count = {check["id"]: check for check in section["checks"]}[f"gpu-nodes/{NODE}/gpu-count"]
        assert (count["status"], count["observed"]) == ("fail", 7), count
        assert f"kubectl get resourceslices --field-selector spec.nodeName={NODE}" in count["message"]
    finally:
        # The session's sandbox is shared: leave no slice and no node of this test behind.
        for name in created:
            try:
                resource.delete_resource_slice(name)
            except client.ApiException as error:
                if error.status != 404:
                    raise
        try:
            core.delete_node(NODE)
        except client.ApiException as error:
            if error.status != 404:
                raise


def _ready(node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or ())
