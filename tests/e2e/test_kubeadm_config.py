"""kubeadm's configuration as the roles render it, checked by the real kubeadm (built from
k8s.io/kubernetes at the sandbox's pinned version into the sandbox cache).

The roles run with their switches for rendering only (no init, no join), against this machine, for
every host of the sandbox inventory in mode kubeadm and of the multi-node example inventory; each role
runs 'kubeadm config validate' itself, and the tests run it again on what was written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build

from .conftest import REPO, run_playbook

JOIN_COMMAND = (
    "kubeadm join api.example:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash sha256:" + "ab" * 32
)
# What 'kubeadm init phase upload-certs --upload-certs' prints.
CERTIFICATE_KEY_OUTPUT = "[upload-certs] Using certificate key:\n" + "0f" * 32 + "\n"

# The example inventory's hosts have addresses; the sandbox's localhost advertises its default IPv4
# address, as a host without one set does (kubeadm refuses a loopback address).
RENDER_PLAYBOOK = """
- name: Check the inventory
  hosts: kube_control_plane[0]
  gather_facts: false
  roles:
    - role: site_inventory

- name: Render and validate kubeadm init's configuration
  hosts: kube_control_plane[0]
  gather_facts: false
  tasks:
    - name: Run kubeadm_control_plane without init
      ansible.builtin.include_role:
        name: kubeadm_control_plane
      vars:
        kubeadm_control_plane_init: false
        kubeadm_control_plane_config_dir: "{{ render_dir }}/{{ inventory_hostname }}"
        kubeadm_control_plane_advertise_address: "{{ ansible_host if ansible_host is match('^[0-9.]+$') else '' }}"
        kubeadm_control_plane_kubeadm: "{{ kubeadm }}"

- name: Render and validate kubeadm join's configuration
  hosts: kube_control_plane[1:]:gpu_nodes:kube_workers
  gather_facts: false
  tasks:
    - name: Run kubeadm_join without joining
      ansible.builtin.include_role:
        name: kubeadm_join
      vars:
        kubeadm_join_run: false
        kubeadm_join_config_dir: "{{ render_dir }}/{{ inventory_hostname }}"
        kubeadm_join_advertise_address: "{{ ansible_host if ansible_host is match('^[0-9.]+$') else '' }}"
        kubeadm_join_kubeadm: "{{ kubeadm }}"
        kubeadm_join_certificate_key: "{{ certificate_key_output }}"
"""


@pytest.fixture(scope="module")
def kubeadm() -> Path:
    plan = sandbox_build.plan()
    if not plan.is_current("kubeadm"):
        sandbox_build.ensure_built(plan)
    return plan.binary("kubeadm")


@pytest.fixture(scope="module")
def example(tmp_path_factory, kubeadm):
    """The example inventory rendered once, for the tests that read it."""
    run, out = render(tmp_path_factory.mktemp("example"), kubeadm, REPO / "inventories" / "kubeadm-example")
    assert run.returncode == 0, run.tail(4000)
    return out


def render(tmp_path: Path, kubeadm: Path, inventory: Path, *extra: str):
    playbook = tmp_path / "render.yml"
    playbook.write_text(RENDER_PLAYBOOK)
    out = tmp_path / "rendered"
    run = run_playbook(
        str(playbook),
        "-e",
        "ansible_connection=local ansible_python_interpreter=%s" % sys.executable,
        "-e",
        "render_dir=%s kubeadm=%s" % (out, kubeadm),
        "-e",
        json.dumps({"kubeadm_join_command": JOIN_COMMAND, "certificate_key_output": CERTIFICATE_KEY_OUTPUT}),
        *extra,
        inventory=inventory,
    )
    return run, out


def validate(kubeadm: Path, config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(kubeadm), "config", "validate", "--config", str(config)], capture_output=True, text=True)


@pytest.mark.sandbox
def test_sandbox_inventory_in_mode_kubeadm(tmp_path, kubeadm):
    run, out = render(tmp_path, kubeadm, REPO / "inventories" / "sandbox", "-e", "clusterproof_cluster_mode=kubeadm")
    assert run.returncode == 0, run.tail(4000)
    init = out / "localhost" / "kubeadm-init.yaml"
    assert validate(kubeadm, init).returncode == 0
    documents = list(yaml.safe_load_all(init.read_text()))
    assert documents[1]["clusterName"] == "netapp-sandbox"
    assert documents[1]["kubernetesVersion"] == "v1.36.3"
    address = documents[0]["localAPIEndpoint"]["advertiseAddress"]
    assert not address.startswith("127.")
    assert documents[1]["controlPlaneEndpoint"] == address + ":6443"
    for node in ("dgx1-1", "dgx1-2"):
        join = out / node / "kubeadm-join.yaml"
        assert validate(kubeadm, join).returncode == 0
        (document,) = yaml.safe_load_all(join.read_text())
        assert document["nodeRegistration"]["name"] == node
        assert document["nodeRegistration"]["taints"] == []


@pytest.mark.sandbox
def test_multi_node_example_inventory(example, kubeadm):
    out = example
    rendered = sorted(path.relative_to(out).as_posix() for path in out.rglob("*.yaml"))
    assert rendered == [
        "cp-1/kubeadm-init.yaml",
        "cp-2/kubeadm-join.yaml",
        "cp-3/kubeadm-join.yaml",
        "cpu-1/kubeadm-join.yaml",
        "dgx-1/kubeadm-join.yaml",
        "dgx-2/kubeadm-join.yaml",
    ]
    for path in out.rglob("*.yaml"):
        done = validate(kubeadm, path)
        assert done.returncode == 0, (path, done.stderr)
    init, cluster, kubelet = yaml.safe_load_all((out / "cp-1" / "kubeadm-init.yaml").read_text())
    assert init["localAPIEndpoint"]["advertiseAddress"] == "192.0.2.11"
    assert cluster["controlPlaneEndpoint"] == "192.0.2.10:8443"
    assert cluster["apiServer"] == {"certSANs": ["192.0.2.10"]}
    assert cluster["networking"] == {"podSubnet": "10.32.0.0/16", "serviceSubnet": "10.96.0.0/16"}
    assert kubelet["cgroupDriver"] == "systemd"
    (cp2,) = yaml.safe_load_all((out / "cp-2" / "kubeadm-join.yaml").read_text())
    assert cp2["controlPlane"] == {
        "localAPIEndpoint": {"advertiseAddress": "192.0.2.12", "bindPort": 6443},
        "certificateKey": "0f" * 32,
    }
    (dgx2,) = yaml.safe_load_all((out / "dgx-2" / "kubeadm-join.yaml").read_text())
    assert dgx2["nodeRegistration"]["taints"] == [
        {"key": "site.example/reserved", "value": "training", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    ]
    assert dgx2["nodeRegistration"]["kubeletExtraArgs"] == [
        {"name": "node-labels", "value": "nvidia.com/gpu.present=true,site.example/rack=r1"}
    ]
    (cpu1,) = yaml.safe_load_all((out / "cpu-1" / "kubeadm-join.yaml").read_text())
    assert "taints" not in cpu1["nodeRegistration"] and "controlPlane" not in cpu1


@pytest.mark.sandbox
def test_kubeadm_rejects_a_broken_configuration(example, kubeadm, tmp_path):
    """The check above can fail: a misspelt field and a bad subnet are refused by kubeadm."""
    init, cluster, kubelet = yaml.safe_load_all((example / "cp-1" / "kubeadm-init.yaml").read_text())
    misspelt = tmp_path / "misspelt.yaml"
    cluster["networking"]["podSubnett"] = cluster["networking"].pop("podSubnet")
    misspelt.write_text(yaml.safe_dump_all([init, cluster, kubelet]))
    done = validate(kubeadm, misspelt)
    assert done.returncode != 0 and "podSubnett" in done.stderr, done.stderr
    bad_subnet = tmp_path / "bad-subnet.yaml"
    cluster["networking"]["podSubnet"] = "10.32.0.0/99"
    del cluster["networking"]["podSubnett"]
    bad_subnet.write_text(yaml.safe_dump_all([init, cluster, kubelet]))
    done = validate(kubeadm, bad_subnet)
    assert done.returncode != 0 and "10.32.0.0/99" in done.stderr, done.stderr


@pytest.mark.sandbox
def test_overlapping_subnets_stop_the_run_before_anything_is_rendered(tmp_path, kubeadm):
    run, out = render(
        tmp_path, kubeadm, REPO / "inventories" / "kubeadm-example", "-e", "clusterproof_pod_subnet=10.96.0.0/20"
    )
    assert run.returncode != 0
    assert (
        "group all: clusterproof_pod_subnet: expected a network that does not overlap clusterproof_service_subnet "
        "(10.96.0.0/16), found '10.96.0.0/20'" in run.output
    )
    assert not out.exists()
