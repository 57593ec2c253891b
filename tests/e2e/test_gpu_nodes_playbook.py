"""playbooks/gpu_nodes.yml leaves the driver and the toolkit to the GPU operator when the inventory
says the operator installs them (clusterproof_gpu_driver_by, _toolkit_by: gpu_operator): the two
must never both install a driver (docs/gpu-stack.md). The GPU host is this machine, reached locally;
nothing is installed on it either way."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.e2e.conftest import REPO, run_playbook

LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}


def test_what_the_gpu_operator_installs_is_left_to_it(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {
                        "clusterproof_site_name": "operator-site",
                        "clusterproof_cluster_mode": "existing",
                        "clusterproof_kubeconfig": str(tmp_path / "kubeconfig"),
                        "clusterproof_gpu_device_layer": "gpu_operator",
                        "clusterproof_gpu_driver_by": "gpu_operator",
                        "clusterproof_gpu_toolkit_by": "gpu_operator",
                    },
                    "children": {
                        "kube_control_plane": {"hosts": {"localhost": LOCAL}},
                        "gpu_nodes": {"hosts": {"gpu-host-1": {**LOCAL, "gpu_count": 8}}},
                    },
                }
            }
        )
    )
    run = run_playbook(str(REPO / "playbooks" / "gpu_nodes.yml"), inventory=inventory, timeout=300)
    assert run.returncode == 0, run.tail(3000)
    assert (
        "The GPU operator installs the driver and the toolkit on gpu-host-1 (gpu_operator in "
        "clusterproof_gpu_driver_by, clusterproof_gpu_toolkit_by)" in run.output
    )
    assert "TASK [nvidia_driver" not in run.output and "TASK [nvidia_container_toolkit" not in run.output
    assert run.recap("gpu-host-1")["changed"] == 0
