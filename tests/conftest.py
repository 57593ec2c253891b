"""Make the collection importable as ``ansible_collections.clusterproof.gpu``, and the entry point's
``cli`` package, in every test."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
COLLECTIONS = REPO / "collections"
for path in (COLLECTIONS, REPO):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

# Where a run's time goes, recorded when CLUSTERPROOF_TEST_TIMES names a file (bench/suite_profile.py).
pytest_plugins = ["tests.timings"]


def run_module_file(module: Path, arguments: dict[str, Any], timeout: int = 120) -> dict[str, Any]:
    """Run a module file directly, as Ansible runs it on a host, and return its JSON result."""
    completed = subprocess.run(
        [sys.executable, str(module), json.dumps({"ANSIBLE_MODULE_ARGS": arguments})],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONPATH=str(COLLECTIONS)),
        check=False,
    )
    return json.loads(completed.stdout)


def quota_tree_of_scenario(name: str) -> list[dict[str, Any]]:
    """A scenario's project tree in the inventory's ``clusterproof_quota_tree`` form: min and max per
    resource, and each leaf bound to the namespace its steps deploy into (the guide's namespaceN)."""
    scenario = yaml.safe_load((REPO / "scenarios" / f"{name}.yml").read_text())
    resource = scenario["resource"]
    namespaces: dict[str, list[str]] = {}
    for step in scenario["steps"]:
        for submit in step["submit"]:
            namespaces.setdefault(submit["project"], []).append(submit["name"])
    parents = {project.get("parent") for project in scenario["projects"]}
    tree = []
    for project in scenario["projects"]:
        node: dict[str, Any] = {"name": project["name"]}
        if project.get("parent"):
            node["parent"] = project["parent"]
        node["min"], node["max"] = {resource: project["min"]}, {resource: project["max"]}
        if project["name"] not in parents:
            node["namespaces"] = namespaces[project["name"]]
        tree.append(node)
    return tree


# The host test suite's tests, in the order the suite runs them (node/host_tests.py).
HOST_SUITE_TESTS = [
    "driver-is-loaded-and-of-the-pinned-branch",
    "nouveau-is-not-loaded",
    "gpu-count-is-the-inventorys",
    "every-gpu-runs-the-loaded-driver",
    "persistence-mode-is-on",
    "containerd-runs-the-nvidia-runtime",
    "docker-runs-the-nvidia-runtime",
    "toolkit-config-sets-how-unprivileged-containers-get-gpus",
    "a-container-sees-the-gpus",
]

# Alibaba Cloud's elastic quota tree, the guide's 40 cores (scenarios/alibaba-elastic-quota-tree.yml).
ALIBABA_QUOTA_TREE = quota_tree_of_scenario("alibaba-elastic-quota-tree")

# Team A of NetApp's Run:AI validation (SCENARIOS.md 4.8 - 4.10) as the engines' unit tests declare it,
# as ``Project`` keyword arguments; each engine's tests add what that engine reads.
TEAM_A = {
    "name": "team-a",
    "gpu_quota": 4,
    "over_quota_weight": 4,
    "gpu_limit": 8,
    "training_nodes": ("dgx1-1",),
    "interactive_time_limit_seconds": 3600,
    "users": ("alice",),
}
