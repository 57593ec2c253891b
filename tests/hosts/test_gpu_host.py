"""A GPU host is what the inventory says it is: the driver of the pinned branch is loaded, it sees the
declared number of GPUs in persistence mode, and the container runtimes run the nvidia runtime as the
roles configured it, through which a container sees the GPUs it was given and, where the toolkit is set
so (``nvidia_container_toolkit_gpus_only_by_volume_mounts``), none it merely names in NVIDIA_VISIBLE_DEVICES.

What is expected comes from the inventory (``gpu_count``, the roles' variables), with the roles'
defaults where the inventory sets none, so these tests check what nvidia_driver and
nvidia_container_toolkit were asked to do. Run them with testinfra's Ansible backend:

    .venv/bin/pytest tests/hosts --hosts='ansible://gpu_nodes' --ansible-inventory=inventories/<site> \\
        --sudo --junitxml=gpu-hosts.xml

``--sudo`` where the Ansible user is not root (reading containerd's config and running containers
need root). The container test pulls ``CLUSTERPROOF_GPU_TEST_IMAGE`` (default
``docker.io/library/ubuntu:24.04``; an air-gapped site names its registry's copy), and is skipped,
with the reason, on a host with neither docker nor containerd's ctr. On a host the inventory gives no
GPUs and that has no NVIDIA device (a test bed such as the lab), the GPU tests say "needs hardware".
"""

from __future__ import annotations

import contextlib
import os
import re
import tomllib
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.install.runtime_config import CONTAINERD_CRI_PATHS
from ansible_collections.clusterproof.gpu.plugins.module_utils.node.host_tests import (
    NEEDS_HARDWARE,
    TOOLKIT_CONFIG,
    toolkit_config_problems,
    toolkit_visible_devices_settings,
)

REPO = Path(__file__).resolve().parents[2]
ROLES = ("nvidia_driver", "nvidia_container_toolkit")
TEST_IMAGE = os.environ.get("CLUSTERPROOF_GPU_TEST_IMAGE", "docker.io/library/ubuntu:24.04")
# Where the device plugin's volume-mounts strategy puts a pod's GPUs: the host's /dev/null mounted at
# <root>/<GPU UUID>, with NVIDIA_VISIBLE_DEVICES pointing at the root.
VOLUME_MOUNTS_ROOT = "/var/run/nvidia-container-devices"


def _role_defaults() -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for role in ROLES:
        defaults.update(yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text()) or {})
    return defaults


@pytest.fixture(scope="module")
def declared(host) -> dict[str, Any]:
    """The host's inventory variables over the roles' defaults."""
    if host.backend.NAME != "ansible":
        pytest.fail(
            "the GPU host suite reads what to expect from the inventory: use --hosts='ansible://<group or host>' "
            "with --ansible-inventory (got the %s backend)" % host.backend.NAME
        )
    return {**_role_defaults(), **host.ansible.get_variables()}


@pytest.fixture(scope="module")
def nvidia_hardware(host, declared) -> None:
    """Skip as "needs hardware" on a host the inventory gives no GPUs and that has no NVIDIA device on
    its PCI bus (the lab's hosts): nothing there for a GPU test to see. A host declared with GPUs
    and none on its bus is not skipped: its tests fail, as they should."""
    if int(declared.get("gpu_count", 1)) != 0:
        return
    found = host.run("grep -lx 0x10de /sys/bus/pci/devices/*/vendor")
    if not found.stdout.strip():
        pytest.skip("%s %s has no NVIDIA device on its PCI bus" % (NEEDS_HARDWARE, host.backend.hostname))


@pytest.fixture(scope="module")
def gpus(host, nvidia_hardware) -> list[dict[str, str]]:
    """One entry per GPU, as nvidia-smi reports it."""
    fields = ["index", "name", "driver_version", "persistence_mode", "pci.bus_id", "uuid"]
    command = host.run("nvidia-smi --query-gpu=%s --format=csv,noheader,nounits" % ",".join(fields))
    if command.rc != 0:
        pytest.fail(
            "nvidia-smi failed on %s (rc %d): %s. Is the driver installed and loaded? "
            "Look at 'lsmod | grep nvidia' and 'journalctl -k | grep -i nvidia'."
            % (host.backend.hostname, command.rc, (command.stderr or command.stdout).strip())
        )
    rows = [line.split(", ") for line in command.stdout.strip().splitlines() if line.strip()]
    return [dict(zip(fields, row, strict=True)) for row in rows]


def _as_root(host):
    """sudo where the connection's user is not root already (a root login may have no sudo)."""
    return contextlib.nullcontext() if host.user().uid == 0 else host.sudo()


def _expected_gpu_count(host, declared: dict[str, Any]) -> int:
    if "gpu_count" not in declared:
        pytest.fail("the inventory declares no gpu_count for %s (docs/inventory.md)" % host.backend.hostname)
    return int(declared["gpu_count"])


def test_driver_is_loaded_and_of_the_pinned_branch(host, declared, nvidia_hardware):
    version_file = host.file("/sys/module/nvidia/version")
    assert version_file.exists, (
        "the nvidia kernel module is not loaded on %s (no /sys/module/nvidia): run the nvidia_driver role, "
        "which reboots into it, or look at 'dkms status'" % host.backend.hostname
    )
    loaded = version_file.content_string.strip()
    branch = str(declared["nvidia_driver_branch"])
    assert loaded.split(".")[0] == branch, "%s runs NVIDIA driver %s; the inventory pins branch %s" % (
        host.backend.hostname,
        loaded,
        branch,
    )


def test_nouveau_is_not_loaded(host):
    assert not host.file("/sys/module/nouveau").exists, (
        "nouveau is loaded on %s; the nvidia_driver role blacklists it, and a reboot unloads it" % host.backend.hostname
    )


def test_gpu_count_is_the_inventorys(host, declared, gpus):
    expected = _expected_gpu_count(host, declared)
    assert len(gpus) == expected, "%s shows %d GPU(s) (%s); the inventory declares gpu_count: %d" % (
        host.backend.hostname,
        len(gpus),
        ", ".join("%s %s" % (gpu["pci.bus_id"], gpu["name"]) for gpu in gpus) or "none",
        expected,
    )


def test_every_gpu_runs_the_loaded_driver(host, gpus):
    loaded = host.file("/sys/module/nvidia/version").content_string.strip()
    assert {gpu["driver_version"] for gpu in gpus} <= {loaded}


def test_persistence_mode_is_on(host, declared, gpus):
    if not declared["nvidia_driver_persistence_mode"]:
        pytest.skip("nvidia_driver_persistence_mode is false for %s" % host.backend.hostname)
    off = [gpu["pci.bus_id"] for gpu in gpus if gpu["persistence_mode"] != "Enabled"]
    assert not off, "persistence mode is off on %s of %s" % (", ".join(off), host.backend.hostname)
    daemon = host.service("nvidia-persistenced")
    assert daemon.is_enabled and daemon.is_running, "nvidia-persistenced is not enabled and running on %s" % (
        host.backend.hostname
    )


def _runtimes(declared: dict[str, Any]) -> list[str]:
    return list(declared["nvidia_container_toolkit_runtimes"])


def test_containerd_runs_the_nvidia_runtime(host, declared):
    if "containerd" not in _runtimes(declared):
        pytest.skip("containerd is not in nvidia_container_toolkit_runtimes for %s" % host.backend.hostname)
    with _as_root(host):
        dump = host.run("containerd --config %s config dump" % declared["nvidia_container_toolkit_containerd_config"])
    assert dump.rc == 0, "containerd does not load its config on %s: %s" % (host.backend.hostname, dump.stderr)
    config = tomllib.loads(dump.stdout)
    version = config.get("version", 1)
    node: Any = config
    for key in CONTAINERD_CRI_PATHS.get(version, CONTAINERD_CRI_PATHS[3]):
        node = node.get(key, {})
    name = declared["nvidia_container_toolkit_runtime_name"]
    runtime = node.get("runtimes", {}).get(name)
    assert runtime, "containerd on %s has no %s runtime (runtimes: %s); run the nvidia_container_toolkit role" % (
        host.backend.hostname,
        name,
        sorted(node.get("runtimes", {})),
    )
    assert runtime.get("options", {}).get("BinaryName") == declared["nvidia_container_toolkit_runtime_binary"]
    if declared["nvidia_container_toolkit_default_runtime"]:
        assert node.get("default_runtime_name") == name, "containerd's default runtime on %s is %s, not %s" % (
            host.backend.hostname,
            node.get("default_runtime_name", "runc"),
            name,
        )


def test_docker_runs_the_nvidia_runtime(host, declared):
    if "docker" not in _runtimes(declared):
        pytest.skip("docker is not in nvidia_container_toolkit_runtimes for %s" % host.backend.hostname)
    assert host.exists("docker"), "docker is in nvidia_container_toolkit_runtimes but not installed on %s" % (
        host.backend.hostname
    )
    # Plain "docker info" (no Go template: its braces would be taken for Jinja by Ansible's shell).
    with _as_root(host):
        info = host.run("docker info")
    assert info.rc == 0, "docker info failed on %s: %s %s" % (host.backend.hostname, info.stderr, info.stdout[-500:])
    lines = dict(line.strip().split(": ", 1) for line in info.stdout.splitlines() if ": " in line)
    runtimes = lines.get("Runtimes", "").split()
    name = declared["nvidia_container_toolkit_runtime_name"]
    assert name in runtimes, "dockerd on %s has no %s runtime (runtimes: %s)" % (host.backend.hostname, name, runtimes)
    if declared["nvidia_container_toolkit_default_runtime"]:
        assert lines.get("Default Runtime") == name, "dockerd's default runtime on %s is %s, not %s" % (
            host.backend.hostname,
            lines.get("Default Runtime"),
            name,
        )


def _toolkit_by_the_hosts(host, declared: dict[str, Any]) -> None:
    if declared.get("clusterproof_gpu_toolkit_by", "hosts") == "gpu_operator":
        pytest.skip(
            "the GPU operator's toolkit container configures the nvidia runtime on %s "
            "(clusterproof_gpu_toolkit_by: gpu_operator)" % host.backend.hostname
        )


def test_toolkit_config_sets_how_unprivileged_containers_get_gpus(host, declared):
    _toolkit_by_the_hosts(host, declared)
    config = host.file(TOOLKIT_CONFIG)
    with _as_root(host):
        text = config.content_string if config.exists else None
    expected = toolkit_visible_devices_settings(bool(declared["nvidia_container_toolkit_gpus_only_by_volume_mounts"]))
    problems = toolkit_config_problems(text, expected, host.backend.hostname)
    assert not problems, "\n".join(problems)


def _listed_gpus(output: str) -> int:
    return sum(1 for line in output.splitlines() if line.startswith("GPU "))


def _run_in_a_container(host, declared, environment: dict[str, str], mounts: list[tuple[str, str]], command: str):
    """Run ``command`` in an unprivileged container of TEST_IMAGE through the nvidia runtime, with
    ``environment`` and read-only bind ``mounts`` (host path, container path): docker where it is
    installed, else containerd's ctr. Returns the command line and its result."""
    if host.exists("docker"):
        # With the nvidia runtime as the default, no --gpus and no --runtime: the default must do it.
        options = [] if declared["nvidia_container_toolkit_default_runtime"] else ["--runtime nvidia"]
        options += ["-e %s=%s" % pair for pair in environment.items()]
        options += ["-v %s:%s:ro" % mount for mount in mounts]
        line = "docker run --rm %s %s %s" % (" ".join(options), TEST_IMAGE, command)
    elif host.exists("ctr"):
        with _as_root(host):
            pulled = host.run("ctr --namespace clusterproof image pull %s" % TEST_IMAGE)
        assert pulled.rc == 0, "could not pull %s on %s: %s (set CLUSTERPROOF_GPU_TEST_IMAGE to a reachable copy)" % (
            TEST_IMAGE,
            host.backend.hostname,
            pulled.stderr,
        )
        options = ["--env %s=%s" % pair for pair in environment.items()]
        options += ["--mount type=bind,src=%s,dst=%s,options=rbind:ro" % mount for mount in mounts]
        line = "ctr --namespace clusterproof run --rm --runc-binary %s %s %s clusterproof-gpu-check-%s %s" % (
            declared["nvidia_container_toolkit_runtime_binary"],
            " ".join(options),
            TEST_IMAGE,
            uuid.uuid4().hex[:8],
            command,
        )
    else:
        pytest.skip("no container engine on %s: neither docker nor ctr is installed" % host.backend.hostname)
    with _as_root(host):
        return line, host.run(line)


def test_a_container_sees_the_gpus(host, declared, gpus):
    expected = _expected_gpu_count(host, declared)
    environment = {"NVIDIA_DRIVER_CAPABILITIES": "utility"}
    mounts: list[tuple[str, str]] = []
    if declared["nvidia_container_toolkit_gpus_only_by_volume_mounts"]:
        # Given as the device plugin gives a pod its GPUs (deviceListStrategy volume-mounts): the variable
        # alone no longer does it for an unprivileged container.
        environment["NVIDIA_VISIBLE_DEVICES"] = VOLUME_MOUNTS_ROOT
        mounts = [("/dev/null", "%s/%s" % (VOLUME_MOUNTS_ROOT, gpu["uuid"])) for gpu in gpus]
    else:
        environment["NVIDIA_VISIBLE_DEVICES"] = "all"
    command, ran = _run_in_a_container(host, declared, environment, mounts, "nvidia-smi -L")
    assert ran.rc == 0, "%s failed on %s: %s" % (command, host.backend.hostname, ran.stderr or ran.stdout)
    assert _listed_gpus(ran.stdout) == expected, "a container on %s sees %d GPU(s), the inventory declares %d:\n%s" % (
        host.backend.hostname,
        _listed_gpus(ran.stdout),
        expected,
        ran.stdout,
    )
    if not declared["nvidia_container_toolkit_gpus_only_by_volume_mounts"]:
        return
    # And one given no GPU sees none, though it names them all in the variable (issue 30).
    naming = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "utility"}
    command, ran = _run_in_a_container(host, declared, naming, [], "ls /dev")
    assert ran.rc == 0, "%s failed on %s: %s" % (command, host.backend.hostname, ran.stderr or ran.stdout)
    seen = sorted(name for name in ran.stdout.split() if re.fullmatch(r"nvidia\d+", name))
    assert not seen, (
        "an unprivileged container on %s that was given no GPU but set NVIDIA_VISIBLE_DEVICES=all has %s: the "
        "toolkit lets it pick GPUs by the variable. Look at %s there (the toolkit config test says what it lacks) "
        "and run the nvidia_container_toolkit role"
        % (host.backend.hostname, ", ".join("/dev/" + n for n in seen), TOOLKIT_CONFIG)
    )
