"""The bad-input suite (issue 16): inventories, scenario files and module arguments that a hostile
but fair user writes, each refused with an error that names where (file, host, group, project),
the field, what was expected and what was found; nothing changes, and nothing but the project's
own error types escapes.

Inventories go through ``schema.validate_site`` with hostvars built from the sandbox inventory's
own files (tests/e2e/test_bad_input_playbooks.py runs the few cases that need Ansible's loader
through the real playbook); scenario files through the one loader, from files on disk; module
arguments through each module's argument spec (Ansible's validator) and then the module's own
checks. bench/bad_input_bench.py runs every case here and reports its time (the 5 s bound).
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import importlib
import json
import math
import shutil
import types
import unittest.mock
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleParserError
from ansible.module_utils import basic
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.clusterproof.gpu.plugins.action import site_inventory as site_inventory_action
from ansible_collections.clusterproof.gpu.plugins.module_utils.common import bounds, yaml_file
from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory import schema
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import quota_tree
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import scenario_runner, scenarios
from ansible_collections.clusterproof.gpu.plugins.modules import (
    control_plane_status,
    gpu_project,
    sandbox_cluster,
    validate_scenario,
)
from tests.conftest import REPO

SANDBOX = REPO / "inventories" / "sandbox"


# --- inventories ----------------------------------------------------------------------------


def _vars_of(folder: Path) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for path in sorted(folder.glob("*.yml")):
        merged.update(yaml.safe_load(path.read_text()) or {})
    return merged


@cache
def _sandbox_vars() -> tuple[dict[str, Any], dict[str, Any]]:
    return _vars_of(SANDBOX / "group_vars" / "all"), _vars_of(SANDBOX / "group_vars" / "gpu_nodes")


def sandbox_inventory() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The sandbox inventory as Ansible's hostvars hold it: the site's variables on every host,
    the GPU nodes' on dgx1-1 and dgx1-2, and some of Ansible's own."""
    site, gpu = copy.deepcopy(_sandbox_vars())
    return site, {"dgx1-1": dict(gpu), "dgx1-2": dict(gpu)}


Change = Callable[[dict[str, Any], dict[str, dict[str, Any]], dict[str, list[str]]], None]


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    kind: str  # inventory | scenario | module
    run: Callable[[Path], str]  # returns the error text; raises AssertionError when accepted
    expect: tuple[str, ...]


def _hostvars(site, nodes, groups):
    hostvars = {
        "localhost": {**site, "ansible_connection": "local", "inventory_hostname": "localhost"},
    }
    for host, variables in nodes.items():
        hostvars[host] = {**site, **variables, "inventory_hostname": host, "group_names": ["gpu_nodes"]}
    return hostvars


def inventory_errors(change: Change) -> str:
    site, nodes = sandbox_inventory()
    groups = {"kube_control_plane": ["localhost"], "gpu_nodes": list(nodes)}
    change(site, nodes, groups)
    groups["all"] = sorted({host for hosts in groups.values() for host in hosts} | set(nodes) | {"localhost"})
    hostvars = _hostvars(site, nodes, groups)
    before = repr(hostvars) if bounds.expanded_size(hostvars) <= bounds.MAX_VALUES else None
    declaration, errors = schema.validate_site(groups, hostvars)
    assert declaration is None, "accepted"
    assert errors and all(isinstance(error, schema.InventoryError) for error in errors)
    if before is not None:
        assert repr(hostvars) == before, "the check changed its input"
    return "\n".join(str(error) for error in errors)


def site_set(**values: Any) -> Change:
    def change(site, nodes, groups):
        site.update(values)

    return change


def node_set(host: str = "dgx1-1", **values: Any) -> Change:
    def change(site, nodes, groups):
        nodes[host].update(values)

    return change


def project_set(index: int = 0, **values: Any) -> Change:
    def change(site, nodes, groups):
        site["clusterproof_projects"][index].update(values)

    return change


def tree_set(tree: Any) -> Change:
    return site_set(clusterproof_quota_tree=tree)


def billion_laughs(levels: int = 12, width: int = 9) -> list[Any]:
    """What Ansible's YAML loader makes of an anchor bomb: lists sharing the same lists."""
    value: list[Any] = ["lol"] * width
    for _ in range(levels):
        value = [value] * width
    return value


def inv(case_id: str, change: Change, *expect: str) -> Case:
    return Case(case_id, "inventory", lambda tmp: inventory_errors(change), expect)


def groups_set(**groups_: list[str]) -> Change:
    def change(site, nodes, groups):
        for name, hosts in groups_.items():
            if hosts is None:
                groups.pop(name, None)
            else:
                groups[name] = hosts

    return change


NAN, INF = math.nan, math.inf
HOST = "host dgx1-1: "
ALL = "group all: "
TEAM_A = "project team-a: "

# fmt: off
INVENTORY_CASES = [
    # Numbers: finite, in range, of the right kind.
    inv("gpu-count-huge", node_set(gpu_count=10**15), HOST + "gpu_count: expected a non-negative integer, at most 256", "found 1000000000000000"),
    inv("gpu-count-257", node_set(gpu_count=257), HOST + "gpu_count: expected", "at most 256", "found 257"),
    inv("gpu-count-negative", node_set(gpu_count=-1), HOST + "gpu_count: expected a non-negative integer", "found -1"),
    inv("gpu-count-float", node_set(gpu_count=2.5), HOST + "gpu_count:", "found 2.5"),
    inv("gpu-count-nan", node_set(gpu_count=NAN), HOST + "gpu_count:", "found nan"),
    inv("gpu-count-inf", node_set(gpu_count=INF), HOST + "gpu_count:", "found inf"),
    inv("gpu-count-string", node_set(gpu_count="eight"), HOST + "gpu_count:", "found 'eight'"),
    inv("gpu-count-bool", node_set(gpu_count=True), HOST + "gpu_count:", "found True"),
    inv("gpu-count-list", node_set(gpu_count=[8]), HOST + "gpu_count:", "found a list"),
    inv("gpu-count-missing", node_set(gpu_count=None), HOST + "gpu_count: expected", "found nothing"),
    inv("gpu-memory-zero", node_set(gpu_memory_mib=0), HOST + "gpu_memory_mib: expected a positive integer", "found 0"),
    inv("gpu-memory-huge", node_set(gpu_memory_mib=10**12), HOST + "gpu_memory_mib: expected", "at most 1048576"),
    inv("gpu-memory-nan", node_set(gpu_memory_mib=NAN), HOST + "gpu_memory_mib:", "found nan"),
    inv("cpu-cores-zero", node_set(node_cpu_cores=0), HOST + "node_cpu_cores: expected a positive integer", "found 0"),
    inv("cpu-cores-huge", node_set(node_cpu_cores=10**9), HOST + "node_cpu_cores:", "at most 4096"),
    inv("cpu-cores-string", node_set(node_cpu_cores="80"), HOST + "node_cpu_cores:", "found '80'"),
    inv("memory-gib-negative", node_set(node_memory_gib=-512), HOST + "node_memory_gib:", "found -512"),
    inv("memory-gib-huge", node_set(node_memory_gib=2**40), HOST + "node_memory_gib:", "at most 65536"),
    inv("memory-gib-inf", node_set(node_memory_gib=INF), HOST + "node_memory_gib:", "found inf"),
    # Names, labels and taints within Kubernetes' limits and syntax.
    inv("node-name-300", node_set(node_name="a" * 300), HOST + "node_name: expected a Kubernetes node name", "at most 253", "(300 characters)"),
    inv("node-name-label-64", node_set(node_name="a" * 64 + ".site"), HOST + "node_name:", "found 'aaaa"),
    inv("node-name-80", node_set(node_name="a" * 80), HOST + "node_name: expected a Kubernetes node name whose dot-separated DNS labels have at most 63 characters each (one has 80)", "found 'aaaa"),
    inv("node-name-upper", node_set(node_name="DGX1-1"), HOST + "node_name:", "found 'DGX1-1'"),
    inv("node-name-underscore", node_set(node_name="dgx_1"), HOST + "node_name:", "found 'dgx_1'"),
    inv("node-name-newline", node_set(node_name="dgx1-1\n"), HOST + "node_name:", "found 'dgx1-1\\n'"),
    inv("node-name-empty", node_set(node_name=""), HOST + "node_name:", "found ''"),
    inv("node-name-number", node_set(node_name=7), HOST + "node_name:", "found 7"),
    inv("node-name-twice", node_set("dgx1-2", node_name="dgx1-1"), "host dgx1-2: node_name: expected a node name no other host uses"),
    inv("label-value-80", node_set(node_labels={"rack": "r" * 80}), HOST + "node_labels.rack: expected a label value (63 characters"),
    inv("label-value-space", node_set(node_labels={"rack": "row 1"}), HOST + "node_labels.rack:", "found 'row 1'"),
    inv("label-value-number", node_set(node_labels={"rack": 7}), HOST + "node_labels.rack:", "found 7"),
    inv("label-value-trailing-dash", node_set(node_labels={"rack": "r1-"}), HOST + "node_labels.rack:", "found 'r1-'"),
    inv("label-key-80", node_set(node_labels={"k" * 80: "v"}), HOST + "node_labels: expected label keys of the form [prefix/]name"),
    inv("label-key-prefix-300", node_set(node_labels={"a" * 300 + "/rack": "v"}), HOST + "node_labels: expected label keys"),
    inv("label-key-space", node_set(node_labels={"my rack": "v"}), HOST + "node_labels:", "found 'my rack'"),
    inv("label-key-empty-name", node_set(node_labels={"example.com/": "v"}), HOST + "node_labels:", "found 'example.com/'"),
    inv("labels-list", node_set(node_labels=["rack=1"]), HOST + "node_labels: expected a mapping", "found a list"),
    inv("taint-value-space", node_set(node_taints=[{"key": "gpu", "value": "a b", "effect": "NoSchedule"}]), HOST + "node_taints[0].value: expected a taint value", "found 'a b'"),
    inv("taint-value-80", node_set(node_taints=[{"key": "gpu", "value": "v" * 80, "effect": "NoSchedule"}]), HOST + "node_taints[0].value:"),
    inv("taint-value-number", node_set(node_taints=[{"key": "gpu", "value": 1, "effect": "NoSchedule"}]), HOST + "node_taints[0].value:", "found 1"),
    inv("taint-key-bad", node_set(node_taints=[{"key": "g p u", "effect": "NoSchedule"}]), HOST + "node_taints[0].key: expected a taint key", "found 'g p u'"),
    inv("taint-key-80", node_set(node_taints=[{"key": "k" * 80, "effect": "NoSchedule"}]), HOST + "node_taints[0].key:"),
    inv("taint-effect-bad", node_set(node_taints=[{"key": "gpu", "effect": "Never"}]), HOST + "node_taints[0].effect: expected one of NoSchedule", "found 'Never'"),
    inv("taint-effect-list", node_set(node_taints=[{"key": "gpu", "effect": ["NoSchedule"]}]), HOST + "node_taints[0].effect:", "found a list"),
    inv("taint-unknown-key", node_set(node_taints=[{"key": "gpu", "effect": "NoSchedule", "operator": "Exists"}]), HOST + "node_taints[0].operator: expected only key, value and effect"),
    inv("taints-mapping", node_set(node_taints={"gpu": "NoSchedule"}), HOST + "node_taints: expected a list", "found a mapping"),
    inv("gpu-product-space", node_set(gpu_product="Tesla V100"), HOST + "gpu_product: expected a GPU product name", "found 'Tesla V100'"),
    inv("gpu-product-80", node_set(gpu_product="T" * 80), HOST + "gpu_product:"),
    # Projects: quotas, weights, priorities, time limits, members.
    inv("quota-nan", project_set(gpu_quota=NAN), TEAM_A + "gpu_quota: expected a non-negative number of GPUs", "found nan"),
    inv("quota-inf", project_set(gpu_quota=INF), TEAM_A + "gpu_quota:", "found inf"),
    inv("quota-negative", project_set(gpu_quota=-4), TEAM_A + "gpu_quota:", "found -4"),
    inv("quota-string", project_set(gpu_quota="4"), TEAM_A + "gpu_quota:", "found '4'"),
    inv("quota-huge", project_set(gpu_quota=10**9), TEAM_A + "gpu_quota: expected a number of GPUs of at most 100000", "found 1000000000"),
    inv("quota-thousandths", project_set(gpu_quota=0.001), TEAM_A + "gpu_quota:", "in hundredths", "found 0.001"),
    inv("quota-1e-9", project_set(gpu_quota=1e-9), TEAM_A + "gpu_quota: expected a number of GPUs of at most 100000, in hundredths", "found 1e-09"),
    inv("limit-1e-9-over-a-hundredth", project_set(gpu_limit=4 + 1e-9), TEAM_A + "gpu_limit:", "in hundredths", "found 4.000000001"),
    inv("cpu-quota-1e-10", project_set(cpu_quota=1e-10), TEAM_A + "cpu_quota: expected a number of CPU cores", "in thousandths (millicpus)", "found 1e-10"),
    inv("memory-quota-1e-10", project_set(memory_quota=1e-10), TEAM_A + "memory_quota: expected a number of GiB", "in MiB", "found 1e-10"),
    inv("limit-below-quota", project_set(gpu_limit=2), TEAM_A + "gpu_limit: expected a number of GPUs not below gpu_quota (4)", "found 2"),
    inv("limit-nan", project_set(gpu_limit=NAN), TEAM_A + "gpu_limit:", "found nan"),
    inv("limit-inf", project_set(gpu_limit=INF), TEAM_A + "gpu_limit:", "found inf"),
    inv("limit-huge", project_set(gpu_limit=10**7), TEAM_A + "gpu_limit:", "at most 100000"),
    inv("weight-negative", project_set(over_quota_weight=-5), TEAM_A + "over_quota_weight: expected a non-negative number", "found -5"),
    inv("weight-word", project_set(over_quota_weight="heavy"), TEAM_A + "over_quota_weight:", "found 'heavy'"),
    inv("weight-nan", project_set(over_quota_weight=NAN), TEAM_A + "over_quota_weight:", "found nan"),
    inv("weight-huge", project_set(over_quota_weight=1e300), TEAM_A + "over_quota_weight:", "at most 1000000"),
    inv("priority-huge", project_set(priority=10**20), TEAM_A + "priority: expected an integer from -2147483648 to 2147483647", "found 100000000000000000000"),
    inv("priority-float", project_set(priority=1.5), TEAM_A + "priority:", "found 1.5"),
    inv("priority-string", project_set(priority="high"), TEAM_A + "priority:", "found 'high'"),
    inv("time-limit-zero", project_set(interactive_time_limit_seconds=0), TEAM_A + "interactive_time_limit_seconds: expected a positive whole number of seconds", "found 0"),
    inv("time-limit-huge", project_set(interactive_time_limit_seconds=10**12), TEAM_A + "interactive_time_limit_seconds:", "at most 2147483647"),
    inv("time-limit-float", project_set(interactive_time_limit_seconds=1.5), TEAM_A + "interactive_time_limit_seconds:", "found 1.5"),
    inv("lending-over-quota", project_set(gpu_lending_limit=8), TEAM_A + "gpu_lending_limit: expected"),
    inv("users-string", project_set(users="alice"), TEAM_A + "users: expected a list of names", "found 'alice'"),
    inv("users-empty-name", project_set(users=[""]), TEAM_A + "users: expected a list of names"),
    inv("users-nested", project_set(users=[["alice"]]), TEAM_A + "users: expected a list of names", "found a list"),
    inv("groups-number", project_set(groups=[7]), TEAM_A + "groups: expected a list of names"),
    inv("project-name-upper", project_set(name="Team-A"), "name: expected a lower-case DNS label", "found 'Team-A'"),
    inv("project-name-64", project_set(name="t" * 64), "name: expected a lower-case DNS label"),
    inv("project-name-twice", project_set(1, name="team-a"), "name: expected a name used by one project only", "found 'team-a'"),
    inv("project-unknown-field", project_set(gpu_qouta=4), TEAM_A + "gpu_qouta: expected one of name, gpu_quota", "found an unknown field"),
    inv("project-not-mapping", site_set(clusterproof_projects=["team-a"]), "clusterproof_projects[0]: project: expected a mapping", "found 'team-a'"),
    inv("projects-mapping", site_set(clusterproof_projects={"team-a": 4}), ALL + "clusterproof_projects: expected a list of projects", "found a mapping"),
    inv("affinity-unknown-node", project_set(1, node_affinity={"interactive": ["dgx9-9"]}), "project team-b: node_affinity.interactive: expected a GPU node of this inventory (dgx1-1, dgx1-2)", "found 'dgx9-9'"),
    inv("affinity-not-list", project_set(1, node_affinity={"interactive": "dgx1-2"}), "project team-b: node_affinity.interactive: expected a list of node names"),
    inv("affinity-unknown-kind", project_set(1, node_affinity={"inference": ["dgx1-2"]}), "project team-b: node_affinity.inference: expected training or interactive"),
    # Anchor bombs arrive as shared references: refused in about a second, naming the field.
    inv("bomb-users", project_set(users=billion_laughs()), ALL + "clusterproof_projects: expected at most 100000 values (YAML aliases expanded)", "found more than 100000"),
    inv("bomb-groups", project_set(2, groups=billion_laughs(8, 10)), ALL + "clusterproof_projects: expected at most 100000 values"),
    inv("bomb-quota-tree", tree_set([{"name": "root", "namespaces": billion_laughs()}]), ALL + "clusterproof_quota_tree: expected at most 100000 values"),
    inv("bomb-quota-tree-min", tree_set([{"name": "root", "min": {"gpu": 1, "x": billion_laughs()}}]), ALL + "clusterproof_quota_tree: expected at most"),
    inv("bomb-node-labels", node_set(node_labels={"a": billion_laughs()}), HOST + "node_labels: expected at most 100000 values"),
    inv("bomb-node-taints", node_set("dgx1-2", node_taints=billion_laughs()), "host dgx1-2: node_taints: expected at most 100000 values"),
    inv("bomb-storage", site_set(clusterproof_storage_classes=billion_laughs()), ALL + "clusterproof_storage_classes: expected at most"),
    inv("bomb-unknown-site-variable", site_set(clusterproof_whatever=billion_laughs()), ALL + "clusterproof_whatever: expected at most"),
    # The quota tree's amounts: finite, non-negative.
    inv("tree-min-nan", tree_set([{"name": "root", "min": {"gpu": NAN}}]), "quota tree node root: min.gpu: expected a non-negative number", "found nan"),
    inv("tree-max-inf", tree_set([{"name": "root", "max": {"gpu": INF}}]), "quota tree node root: max.gpu: expected a non-negative number", "found inf"),
    inv("tree-min-negative", tree_set([{"name": "root", "min": {"cpu": -1}}]), "quota tree node root: min.cpu:", "found -1"),
    inv("tree-min-string", tree_set([{"name": "root", "min": {"memory": "lots"}}]), "quota tree node root: min.memory:", "found 'lots'"),
    inv("tree-max-below-min", tree_set([{"name": "root", "min": {"gpu": 8}, "max": {"gpu": 4}}]), "quota tree node root: max.gpu: expected at least min.gpu (8)", "found 4"),
    inv("tree-unknown-resource", tree_set([{"name": "root", "min": {"tpu": 1}}]), "quota tree node root: min.tpu: expected one of cpu, memory, gpu"),
    inv("tree-parent-unknown", tree_set([{"name": "leaf", "parent": "root"}]), "quota tree node leaf: parent: expected a node declared before it (none yet)", "found 'root'"),
    inv("tree-name-bad", tree_set([{"name": "Root"}]), "name: expected a DNS label no other tree node uses", "found 'Root'"),
    inv("tree-mapping", tree_set({"root": {}}), ALL + "clusterproof_quota_tree: expected a list of tree nodes", "found a mapping"),
    # Site settings: booleans boolean, the port base in range, paths strings, known values.
    inv("benchmarks-maybe", site_set(clusterproof_benchmarks="maybe"), ALL + "clusterproof_benchmarks: expected a boolean (true or false)", "found 'maybe'"),
    inv("benchmarks-number", site_set(clusterproof_benchmarks=2), ALL + "clusterproof_benchmarks:", "found 2"),
    inv("host-tests-list", site_set(clusterproof_host_tests=[True]), ALL + "clusterproof_host_tests: expected a boolean", "found a list"),
    inv("control-plane-checks-maybe", site_set(clusterproof_control_plane_checks="maybe"), ALL + "clusterproof_control_plane_checks: expected a boolean (true or false)", "found 'maybe'"),
    inv("control-plane-checks-list", site_set(clusterproof_control_plane_checks=[True]), ALL + "clusterproof_control_plane_checks: expected a boolean", "found a list"),
    inv("certificates-force-maybe", site_set(clusterproof_certificates_force="maybe"), ALL + "clusterproof_certificates_force: expected a boolean (true or false)", "found 'maybe'"),
    inv("upgrade-work-back-negative", site_set(clusterproof_upgrade_work_back_timeout=-1), ALL + "clusterproof_upgrade_work_back_timeout: expected a non-negative integer", "found -1"),
    inv("upgrade-serial-zero", site_set(clusterproof_upgrade_serial=0), ALL + "clusterproof_upgrade_serial: expected a positive integer", "found 0"),
    inv("etcd-backup-keep-zero", site_set(clusterproof_etcd_backup_keep=0), ALL + "clusterproof_etcd_backup_keep: expected a positive integer", "found 0"),
    inv("etcd-backup-keep-word", site_set(clusterproof_etcd_backup_keep="all"), ALL + "clusterproof_etcd_backup_keep: expected a positive integer", "found 'all'"),
    inv("etcd-backup-warn-hours-negative", site_set(clusterproof_etcd_backup_warn_hours=-1), ALL + "clusterproof_etcd_backup_warn_hours: expected a positive integer", "found -1"),
    inv("etcd-backup-dir-list", site_set(clusterproof_etcd_backup_dir=["/backups"]), ALL + "clusterproof_etcd_backup_dir: expected a path (a string)", "found a list"),
    inv("renew-days-negative", site_set(clusterproof_certificates_renew_days="-3"), ALL + "clusterproof_certificates_renew_days: expected a non-negative integer", "found '-3'"),
    inv("monitoring-maybe", site_set(clusterproof_monitoring="maybe"), ALL + "clusterproof_monitoring: expected a boolean (true or false)", "found 'maybe'"),
    inv("monitoring-retention-number", site_set(clusterproof_monitoring_retention=15), ALL + "clusterproof_monitoring_retention: expected a Prometheus duration of at least 1h", "found 15"),
    inv("monitoring-retention-word", site_set(clusterproof_monitoring_retention="15 days"), ALL + "clusterproof_monitoring_retention: expected a Prometheus duration of at least 1h", "found '15 days'"),
    inv("monitoring-gpu-operator-namespace-upper", site_set(clusterproof_monitoring_gpu_operator_namespace="GPU_Operator"), ALL + "clusterproof_monitoring_gpu_operator_namespace: expected a namespace name (a DNS label", "found 'GPU_Operator'"),
    inv("monitoring-retention-short", site_set(clusterproof_monitoring_retention="30m"), ALL + "clusterproof_monitoring_retention: expected a Prometheus duration of at least 1h", "found '30m'"),
    *(
        inv(
            "port-base-" + label,
            site_set(clusterproof_sandbox_port_base=value),
            ALL + "clusterproof_sandbox_port_base: expected an integer from 1024 to 65509 (the sandbox takes 27 ports",
            "found " + found,
        )
        for label, value, found in [
            ("70000", 70000, "70000"),
            ("abc", "abc", "'abc'"),
            ("no-room", 65530, "65530"),
            ("privileged", 80, "80"),
            ("negative-string", "-1", "'-1'"),
            ("float", 16440.5, "16440.5"),
            ("bool", True, "True"),
        ]
    ),
    inv("reports-dir-number", site_set(clusterproof_reports_dir=42), ALL + "clusterproof_reports_dir: expected a path (a string)", "found 42"),
    inv("sandbox-dir-list", site_set(clusterproof_sandbox_dir=["/tmp"]), ALL + "clusterproof_sandbox_dir: expected a path", "found a list"),
    inv("sandbox-cache-mapping", site_set(clusterproof_sandbox_cache={"path": "/tmp"}), ALL + "clusterproof_sandbox_cache: expected a path", "found a mapping"),
    inv("kubeconfig-number", site_set(clusterproof_kubeconfig=1), ALL + "clusterproof_kubeconfig: expected a path", "found 1"),
    inv("site-name-upper", site_set(clusterproof_site_name="NetApp"), ALL + "clusterproof_site_name: expected a lower-case DNS label", "found 'NetApp'"),
    inv("site-name-missing", site_set(clusterproof_site_name=None), ALL + "clusterproof_site_name:", "found nothing"),
    inv("cluster-mode-bad", site_set(clusterproof_cluster_mode="cloud"), ALL + "clusterproof_cluster_mode: expected one of sandbox, existing, kubeadm", "found 'cloud'"),
    inv("scheduler-bad", site_set(clusterproof_scheduler="slurm"), ALL + "clusterproof_scheduler: expected one of", "found 'slurm'"),
    inv("existing-without-kubeconfig", site_set(clusterproof_cluster_mode="existing"), ALL + "clusterproof_kubeconfig: expected the path of the cluster's kubeconfig"),
    inv("site-variable-typo", site_set(clusterproof_benchmark=False), "clusterproof_benchmark: expected one of", "found an unknown variable"),
    inv("node-variable-typo", node_set(gpu_cuont=8), HOST + "gpu_cuont: expected one of gpu_count", "found an unknown variable"),
    # Groups: present and not empty.
    inv("control-plane-empty", groups_set(kube_control_plane=[]), "group kube_control_plane: hosts: expected at least one host, found an empty group"),
    inv("control-plane-missing", groups_set(kube_control_plane=None), "inventory: group kube_control_plane: expected a group named kube_control_plane"),
    inv("gpu-nodes-empty", groups_set(gpu_nodes=[]), "group gpu_nodes: hosts: expected at least one host, found an empty group"),
    inv("gpu-nodes-missing", groups_set(gpu_nodes=None), "inventory: group gpu_nodes: expected a group named gpu_nodes"),
    # Mode kubeadm's VIP (install/api_endpoint.py): an IPv4 unicast address no host has, and the endpoint it makes.
    inv("vip-not-an-address", site_set(clusterproof_cluster_mode="kubeadm", clusterproof_control_plane_vip="10.0.0.300"), ALL + "clusterproof_control_plane_vip: expected an IPv4 unicast address", "found '10.0.0.300'"),
    inv("vip-a-network", site_set(clusterproof_cluster_mode="kubeadm", clusterproof_control_plane_vip="10.0.0.0/24"), ALL + "clusterproof_control_plane_vip: expected an IPv4 unicast address", "found '10.0.0.0/24'"),
    inv("vip-ipv6", site_set(clusterproof_cluster_mode="kubeadm", clusterproof_control_plane_vip="fd00::10"), ALL + "clusterproof_control_plane_vip: expected an IPv4 unicast address", "found 'fd00::10'"),
    inv("vip-loopback", site_set(clusterproof_cluster_mode="kubeadm", clusterproof_control_plane_vip="127.0.0.1"), ALL + "clusterproof_control_plane_vip: expected an IPv4 unicast address", "found '127.0.0.1'"),
    inv("vip-multicast", site_set(clusterproof_cluster_mode="kubeadm", clusterproof_control_plane_vip="224.0.0.18"), ALL + "clusterproof_control_plane_vip: expected an IPv4 unicast address", "found '224.0.0.18'"),
    inv("vip-number", site_set(clusterproof_cluster_mode="kubeadm", clusterproof_control_plane_vip=167772260), ALL + "clusterproof_control_plane_vip: expected an IPv4 unicast address", "found 167772260"),
    inv("vip-list", site_set(clusterproof_cluster_mode="kubeadm", clusterproof_control_plane_vip=["10.0.0.100"]), ALL + "clusterproof_control_plane_vip: expected an IPv4 unicast address", "found a list"),
    inv("vip-held-by-a-node", lambda site, nodes, groups: (site.update(clusterproof_cluster_mode="kubeadm", clusterproof_control_plane_vip="10.0.0.21"), nodes["dgx1-2"].update(ansible_host="10.0.0.21")), ALL + "clusterproof_control_plane_vip: expected an address no host of the site has (host dgx1-2 has it)", "found '10.0.0.21'"),
    inv("vip-endpoint-other-address", site_set(clusterproof_cluster_mode="kubeadm", clusterproof_control_plane_vip="10.0.0.100", clusterproof_control_plane_endpoint="10.0.0.99"), ALL + "clusterproof_control_plane_endpoint: expected 10.0.0.100:8443, or a name of it on port 8443", "found '10.0.0.99'"),
    inv("vip-endpoint-api-server-port", site_set(clusterproof_cluster_mode="kubeadm", clusterproof_control_plane_vip="10.0.0.100", clusterproof_control_plane_endpoint="10.0.0.100:6443"), ALL + "clusterproof_control_plane_endpoint: expected 10.0.0.100:8443", "found '10.0.0.100:6443'"),
    inv("vip-endpoint-name-other-port", site_set(clusterproof_cluster_mode="kubeadm", clusterproof_control_plane_vip="10.0.0.100", clusterproof_control_plane_endpoint="api.site.example:6443"), ALL + "clusterproof_control_plane_endpoint: expected 10.0.0.100:8443, or a name of it on port 8443", "found 'api.site.example:6443'"),
]
# fmt: on


def test_a_bad_node_name_is_not_blamed_on_the_projects_that_name_it():
    """The issue's empty list: the node's own error, not one per project naming it with ``()``."""
    text = inventory_errors(node_set("dgx1-2", node_name="x" * 300))
    assert "host dgx1-2: node_name" in text
    assert "node_affinity" not in text and "()" not in text


def test_affinity_says_when_no_node_is_declared_without_errors():
    def change(site, nodes, groups):
        for variables in nodes.values():
            variables["gpu_count"] = -1
        site["clusterproof_projects"][1]["node_affinity"] = {"interactive": ["dgx7"]}

    text = inventory_errors(change)
    assert "expected a GPU node of this inventory (none is declared without errors), found 'dgx7'" in text


@pytest.mark.parametrize("value", [True, False, "true", "False", "yes", "no", "1", "0"])
def test_booleans_ansible_reads_as_booleans_are_accepted(value):
    site, nodes = sandbox_inventory()
    site["clusterproof_benchmarks"] = value
    groups = {"all": ["localhost", *nodes], "kube_control_plane": ["localhost"], "gpu_nodes": list(nodes)}
    declaration, errors = schema.validate_site(groups, _hostvars(site, nodes, groups))
    assert errors == [] and declaration is not None


@pytest.mark.parametrize("value", [1024, 16440, "17000", 65509])
def test_port_bases_with_room_are_accepted(value):
    site, nodes = sandbox_inventory()
    site["clusterproof_sandbox_port_base"] = value
    groups = {"all": ["localhost", *nodes], "kube_control_plane": ["localhost"], "gpu_nodes": list(nodes)}
    assert schema.validate_site(groups, _hostvars(site, nodes, groups))[1] == []


def test_the_schema_knows_how_many_ports_the_sandbox_takes():
    assert schema.SANDBOX_PORTS == control_plane.PORTS_PER_SANDBOX


def test_an_alias_reused_in_a_sane_way_is_accepted():
    site, nodes = sandbox_inventory()
    shared = ["alice", "bob"]  # users: *team (an alias) in two projects
    site["clusterproof_projects"][0]["users"] = shared
    site["clusterproof_projects"][1]["users"] = shared
    groups = {"all": ["localhost", *nodes], "kube_control_plane": ["localhost"], "gpu_nodes": list(nodes)}
    assert schema.validate_site(groups, _hostvars(site, nodes, groups))[1] == []


def test_expanded_size_counts_shared_references_without_walking_them():
    assert bounds.expanded_size(billion_laughs(30)) == bounds.MAX_VALUES + 1
    assert bounds.expanded_size([1, [2, 3], {"a": 4}]) == 8  # 3 containers, 5 scalars (a key counts)
    loop: list[Any] = []
    loop.append(loop)
    assert bounds.expanded_size(loop) > bounds.MAX_VALUES


# --- scenario files -------------------------------------------------------------------------

BASE_SCENARIO: dict[str, Any] = {
    "name": "bad-input",
    "policy": "runai",
    "capacity": {"gpus": 8, "node_gpus": 4},
    "projects": [{"name": "team-a", "gpu_quota": 4}, {"name": "team-b", "gpu_quota": 4}],
    "steps": [
        {
            "name": "one",
            "submit": [
                {"name": "a-1", "project": "team-a", "kind": "train", "gpus": 2},
                {"name": "b-1", "project": "team-b", "kind": "interactive", "gpus": 0.5},
            ],
            "expect": {"allocated": {"team-a": 2, "team-b": 0.5}, "total": 2.5, "running": "all"},
        }
    ],
}


def scenario_errors(directory: Path, text: bytes) -> str:
    path = directory / "scenario.yml"
    path.write_bytes(text)
    try:
        scenario_runner.load(path)
    except scenario_runner.ScenarioRefused as refused:
        message = str(refused)
    else:
        raise AssertionError("accepted")
    assert path.read_bytes() == text
    assert str(path) in message and message.endswith("nothing was changed")
    return message


def scn(case_id: str, change: Callable[[dict[str, Any]], None], *expect: str) -> Case:
    def run(directory: Path) -> str:
        data = copy.deepcopy(BASE_SCENARIO)
        change(data)
        return scenario_errors(directory, yaml.safe_dump(data, sort_keys=False).encode())

    return Case(case_id, "scenario", run, expect)


def scn_text(case_id: str, text: bytes, *expect: str) -> Case:
    return Case(case_id, "scenario", lambda directory: scenario_errors(directory, text), expect)


def at(*path: Any, value: Any = None, delete: bool = False) -> Callable[[dict[str, Any]], None]:
    """A change of one field, addressed by its path (keys and list indexes)."""

    def change(data: dict[str, Any]) -> None:
        target = data
        for key in path[:-1]:
            target = target[key]
        if delete:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return change


JOB0 = ("steps", 0, "submit", 0)
JOB1 = ("steps", 0, "submit", 1)
BASE_TEXT = yaml.safe_dump(BASE_SCENARIO, sort_keys=False)
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    "%s: &%s [%s]\n" % (name, name, ",".join(["*" + previous] * 9))
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
)

# fmt: off
SCENARIO_CASES = [
    scn("gpus-nan", at(*JOB0, "gpus", value=NAN), "steps[0].submit[0].gpus: expected whole GPUs", "found nan"),
    scn("gpus-inf", at(*JOB0, "gpus", value=INF), "steps[0].submit[0].gpus:", "found inf"),
    scn("gpus-thousandth", at(*JOB1, "gpus", value=0.001), "steps[0].submit[1].gpus:", "at most 10000, in hundredths (0.25, not 0.001), found 0.001"),
    scn("gpus-zero", at(*JOB0, "gpus", value=0), "steps[0].submit[0].gpus:", "found 0"),
    scn("gpus-negative", at(*JOB0, "gpus", value=-1), "steps[0].submit[0].gpus:", "found -1"),
    scn("gpus-string", at(*JOB0, "gpus", value="two"), "steps[0].submit[0].gpus:", "found 'two'"),
    scn("gpus-one-and-a-half", at(*JOB0, "gpus", value=1.5), "steps[0].submit[0].gpus:", "found 1.5"),
    scn("gpus-beyond-node", at(*JOB0, "gpus", value=8), "steps[0].submit[0].gpus: expected at most capacity.node_gpus (4)", "found 8"),
    scn("node-gpus-3-beside-4-gpu-job", lambda d: (d["capacity"].update(node_gpus=3), d["steps"][0]["submit"][0].update(gpus=4)), "steps[0].submit[0].gpus: expected at most capacity.node_gpus (3)", "found 4"),
    scn("gpus-bool", at(*JOB0, "gpus", value=True), "steps[0].submit[0].gpus:", "found True"),
    scn("quota-nan", at("projects", 0, "gpu_quota", value=NAN), "projects[0].gpu_quota: expected a non-negative number", "found nan"),
    scn("quota-inf", at("projects", 0, "gpu_quota", value=INF), "projects[0].gpu_quota:", "found inf"),
    scn("quota-negative", at("projects", 0, "gpu_quota", value=-1), "projects[0].gpu_quota:", "found -1"),
    scn("quota-thousandths", at("projects", 0, "gpu_quota", value=0.125), "projects[0].gpu_quota:", "in hundredths", "found 0.125"),
    # Within a float tolerance of a hundredth, but not one: decided on the decimal written (issue 32).
    scn("quota-1e-9", at("projects", 0, "gpu_quota", value=1e-9), "projects[0].gpu_quota:", "in hundredths", "found 1e-09"),
    scn("gpus-a-hair-over-a-half", at(*JOB1, "gpus", value=0.500000001), "steps[0].submit[1].gpus:", "in hundredths", "found 0.500000001"),
    scn("quota-huge", at("projects", 0, "gpu_quota", value=1e12), "projects[0].gpu_quota:", "at most 10000"),
    scn("min-nan", at("projects", 0, "min", value=NAN), "projects[0].min:", "found nan"),
    scn("limit-inf", at("projects", 0, "gpu_limit", value=INF), "projects[0].gpu_limit: expected a number at least the quota (4)", "found inf"),
    scn("max-nan", at("projects", 0, "max", value=NAN), "projects[0].max:", "found nan"),
    scn("limit-below-quota", at("projects", 0, "gpu_limit", value=2), "projects[0].gpu_limit:", "found 2"),
    scn("weight-negative", at("projects", 0, "over_quota_weight", value=-5), "projects[0].over_quota_weight: expected a number from 0 to 1000000", "found -5"),
    scn("weight-word", at("projects", 0, "over_quota_weight", value="heavy"), "projects[0].over_quota_weight:", "found 'heavy'"),
    scn("weight-nan", at("projects", 0, "over_quota_weight", value=NAN), "projects[0].over_quota_weight:", "found nan"),
    scn("weight-huge", at("projects", 0, "over_quota_weight", value=1e300), "projects[0].over_quota_weight:", "found 1e+300"),
    scn("capacity-nan", at("capacity", "gpus", value=NAN), "capacity.gpus: expected a positive whole number of GPUs", "found nan"),
    scn("capacity-huge", at("capacity", "gpus", value=10**9), "capacity.gpus:", "at most 10000"),
    scn("capacity-float", at("capacity", "gpus", value=8.5), "capacity.gpus:", "found 8.5"),
    scn("capacity-string", at("capacity", value="eight"), "capacity: expected a mapping with gpus and node_gpus", "found 'eight'"),
    scn("node-gpus-over-capacity", at("capacity", "node_gpus", value=16), "capacity.node_gpus: expected at most capacity.gpus (8)", "found 16"),
    scn("node-gpus-zero", at("capacity", "node_gpus", value=0), "capacity.node_gpus:", "found 0"),
    scn("replicas-zero", at(*JOB0, "replicas", value=0), "steps[0].submit[0].replicas: expected a positive whole number of pods", "found 0"),
    scn("replicas-huge", at(*JOB0, "replicas", value=10**9), "steps[0].submit[0].replicas:", "at most 1000"),
    scn("replicas-float", at(*JOB0, "replicas", value=2.5), "steps[0].submit[0].replicas:", "found 2.5"),
    scn("allocated-nan", at("steps", 0, "expect", "allocated", "team-a", value=NAN), "steps[0].expect.allocated: expected a mapping of project to GPUs"),
    scn("total-inf", at("steps", 0, "expect", "total", value=INF), "steps[0].expect.total: expected a number of GPUs", "found inf"),
    scn("expect-replicas-negative", at("steps", 0, "expect", "replicas", value={"a-1": -1}), "steps[0].expect.replicas: expected a mapping of Deployment name"),
    scn("kind-bad", at(*JOB0, "kind", value="batch"), "steps[0].submit[0].kind: expected one of train, interactive", "found 'batch'"),
    scn("project-unknown", at(*JOB0, "project", value="team-z"), "steps[0].submit[0].project: expected one of the scenario's projects", "found 'team-z'"),
    scn("job-name-upper", at(*JOB0, "name", value="A-1"), "steps[0].submit[0].name: expected a workload name (a DNS label)", "found 'A-1'"),
    scn("job-name-long", at(*JOB0, "name", value="a" * 60), "steps[0].submit[0].name:"),
    scn("job-name-twice", at(*JOB1, "name", value="a-1"), "steps[0].submit[1].name:", "found 'a-1'"),
    scn("job-unknown-field", at(*JOB0, "gpu", value=1), "steps[0].submit[0].gpu: expected one of name, project, kind, gpus, replicas", "found an unknown field"),
    scn("project-name-upper", at("projects", 0, "name", value="Team-A"), "projects[0].name: expected a DNS label", "found 'Team-A'"),
    scn("project-parent-unknown", at("projects", 1, "parent", value="root"), "projects[1].parent: expected a project declared before it (team-a)", "found 'root'"),
    scn("projects-mapping", at("projects", value={"team-a": 4}), "projects: expected a list of 1 to 100 projects"),
    scn("projects-too-many", at("projects", value=[{"name": "p%d" % n, "gpu_quota": 0} for n in range(101)]), "projects: expected a list of 1 to 100 projects", "found 101 projects"),
    scn("steps-too-many", at("steps", value=[{"name": "s%d" % n} for n in range(101)]), "steps: expected a list of 1 to 100 steps", "found 101 steps"),
    scn("steps-mapping", at("steps", value={"one": {}}), "steps: expected a list of 1 to 100 steps"),
    scn("steps-none", at("steps", delete=True), "steps: expected at least one step"),
    scn("step-not-mapping", at("steps", 0, value="submit a-1"), "steps[0]: expected a mapping with name, submit, delete and expect"),
    scn("delete-unknown", at("steps", 0, "delete", value=["z-9"]), "steps[0].delete: expected workloads submitted in an earlier step", "found 'z-9'"),
    scn("policy-bad", at("policy", value="fifo"), "policy: expected one of runai, elastic, kueue", "found 'fifo'"),
    scn("resource-bad", at("resource", value="tpu"), "resource: expected one of gpu, cpu", "found 'tpu'"),
    scn("name-missing", at("name", delete=True), "name: expected a name of 1 to 200 characters", "found None"),
    scn("name-long", at("name", value="n" * 300), "name: expected a name of 1 to 200 characters"),
    scn("title-number", at("title", value=42), "title: expected a string", "found 42"),
    scn("unknown-field", at("capacityy", value={}), "capacityy: expected one of name, title", "found an unknown field"),
    scn_text("not-utf8", b"name: caf\xe9\n" + BASE_TEXT.encode(), "line 1: expected UTF-8 text, found the byte 0xe9"),
    scn_text("utf16", BASE_TEXT.encode("utf-16"), "expected UTF-8 text, found the byte 0xff"),
    scn_text("anchor-bomb-steps", (BOMB + BASE_TEXT.replace("steps:", "x: *i\nsteps:")).encode(), "line 2, column 8: expected plain YAML, found an alias (*a)"),
    scn_text("alias-steps", BASE_TEXT.replace("steps:\n- name: one", "steps:\n- &s\n  name: one", 1).encode() + b"more: *s\n", "expected plain YAML, found an alias (*s)"),
    scn_text("merge-key", b"base: &b {gpus: 1}\n" + BASE_TEXT.encode() + b"other: {<<: *b}\n", "expected plain YAML, found an alias (*b)"),
    scn_text("repeated-key", BASE_TEXT.encode() + b"name: again\n", "expected plain YAML, found the key 'name' written twice"),
    scn_text("tab", BASE_TEXT.replace("  gpus: 8", "\tgpus: 8").encode(), "line 4, column 1: expected plain YAML", "'\\t'"),
    scn_text("two-documents", BASE_TEXT.encode() + b"---\nname: second\n", "expected plain YAML, found", "single document"),
    scn_text("too-deep", b"name: deep\nx: " + b"[" * 100 + b"]" * 100 + b"\n", "expected plain YAML, found more than 64 levels of nesting"),
    scn_text("too-big", b"name: big\n" + b"# padding\n" * 110_000, "expected a file of at most 1048576 bytes"),
    scn_text("python-tag", b"name: !!python/object/apply:os.system ['true']\n", "expected plain YAML, found", "could not determine a constructor"),
    scn_text("empty-file", b"", "expected a mapping with name"),
    scn_text("a-list", b"- name: x\n", "expected a mapping with name"),
    scn_text("unclosed-quote", b'name: "open\n', "expected plain YAML"),
]
# fmt: on


def test_a_missing_scenario_file_names_it(tmp_path):
    with pytest.raises(scenario_runner.ScenarioRefused, match="scenario %s: No such file" % (tmp_path / "none.yml")):
        scenario_runner.load(tmp_path / "none.yml")


def test_the_loader_reads_every_scenario_of_the_repository():
    for path in sorted((REPO / "scenarios").glob("*.yml")):
        assert scenario_runner.load(path).steps


def test_the_loader_answers_for_the_file_it_names(tmp_path):
    path = tmp_path / "site.yml"
    path.write_bytes(b"a: 1\nb: [1, 2]\n")
    assert yaml_file.load(path) == {"a": 1, "b": [1, 2]}
    with pytest.raises(yaml_file.YamlFileError, match="^x.yml line 2, column 4: expected plain YAML"):
        yaml_file.loads(b"a: &x [1]\nb: *x\n", "x.yml")


def test_the_role_hands_the_module_a_scenario_file_s_bytes_for_the_project_s_loader(tmp_path):
    """validate_scenarios reads each file on the controller as bytes (slurp) for the module, which may
    run on a host without the project: a file that is not UTF-8 reaches the project's loader, which
    names it, and not Ansible's module setup, where text holding escaped bytes cannot be encoded."""
    bad = tmp_path / "scenario.yml"
    bad.write_bytes(b"name: caf\xe9\n" + BASE_TEXT.encode())
    tasks = yaml.safe_load((REPO / "roles" / "validate_scenarios" / "tasks" / "main.yml").read_text())
    read = next(task for task in tasks if "ansible.builtin.slurp" in task)
    run = next(task for task in tasks if "clusterproof.gpu.validate_scenario" in task)
    assert "lookup(" not in repr(run)
    file_var = read["loop_control"]["loop_var"]
    assert read["ansible.builtin.slurp"]["src"] == "{{ %s }}" % file_var and read["delegate_to"] == "localhost"
    # What slurp registers for the file, as the module task's loop gives it.
    result = {file_var: str(bad), "content": base64.b64encode(bad.read_bytes()).decode(), "encoding": "base64"}
    assert run["loop"] == "{{ %s.results }}" % read["register"]
    templar = Templar(loader=DataLoader(), variables={run["loop_control"]["loop_var"]: result})
    arguments = run["clusterproof.gpu.validate_scenario"]
    params = {key: templar.template(trust_as_template(arguments[key])) for key in ("scenario_file", "scenario_content")}
    json.dumps(params).encode("utf-8")  # what Ansible's module setup does with the arguments
    message = module_errors("validate_scenario", {**SCENARIO_FILE, **params}, tmp_path)
    assert message == (
        "scenario %s: %s line 1: expected UTF-8 text, found the byte 0xe9 (at byte 9); nothing was changed" % (bad, bad)
    )


# --- module arguments -----------------------------------------------------------------------


class _Captured(Exception):
    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__("argument spec captured")
        self.spec = spec


@cache
def module_spec(name: str) -> dict[str, Any]:
    """The argument spec the module hands AnsibleModule, captured before it reads anything."""

    def capture(self, argument_spec, *args, **kwargs):
        raise _Captured(argument_spec)

    module = importlib.import_module(f"ansible_collections.clusterproof.gpu.plugins.modules.{name}")
    with unittest.mock.patch.object(basic.AnsibleModule, "__init__", capture):
        try:
            module.main()
        except _Captured as captured:
            return captured.spec
    raise AssertionError(f"{name}: main() built no AnsibleModule")


def _semantic(name: str, params: dict[str, Any], directory: Path) -> list[str]:
    """What the module checks of its arguments after Ansible's validator, before it touches anything."""
    if name == "gpu_project":
        return gpu_project._bad_input(params)
    if name in ("quota_tree", "validate_quota_tree"):
        problems = quota_tree.check_tree(params["tree"])[1]
        return ["%s: %s: expected %s, found %r" % dataclasses.astuple(problem) for problem in problems]
    if name == "sandbox_cluster" and params["state"] == "status":
        # status only reads: where no sandbox is, it says so instead of an address and a kubeconfig.
        try:
            sandbox_cluster.run(types.SimpleNamespace(params=params, check_mode=False))
        except runner.ModuleError as error:
            return [str(error)]
    if name == "control_plane_status":
        try:
            control_plane_status.check_options(params)
        except ValueError as error:
            return [str(error)]
    if name == "validate_scenario":
        try:
            scenario_runner.load(Path(params["scenario_file"]), validate_scenario._content(params))
        except scenario_runner.ScenarioRefused as refused:
            return [str(refused)]
    return []


def module_errors(name: str, args: dict[str, Any], directory: Path) -> str:
    if name == "validate_scenario" and isinstance(args.get("scenario_file"), bytes):
        path = directory / "scenario.yml"
        path.write_bytes(args["scenario_file"])
        args = {**args, "scenario_file": str(path)}
    before = copy.deepcopy(args)
    result = ArgumentSpecValidator(module_spec(name)).validate(copy.deepcopy(args))
    errors = list(result.error_messages) or _semantic(name, result.validated_parameters, directory)
    assert args == before
    assert errors, "accepted"
    return "\n".join(errors)


def mod(case_id: str, name: str, args: dict[str, Any], *expect: str) -> Case:
    return Case(case_id, "module", lambda directory: module_errors(name, dict(args), directory), expect)


PROJECT = {"name": "team-a", "gpu_quota": 4}
TREE_ROOT = {"name": "root", "min": {"gpu": 8}, "max": {"gpu": 8}}
NODES = [{"name": "dgx1-1", "gpu_count": 8}]
SCENARIO_FILE = {"nodes": NODES, "kubeconfig": "/dev/null"}

# fmt: off
MODULE_CASES = [
    mod("project-quota-nan", "gpu_project", {**PROJECT, "gpu_quota": "nan"}, "project team-a: gpu_quota: expected a non-negative number of GPUs, found nan"),
    mod("project-quota-inf", "gpu_project", {**PROJECT, "gpu_quota": float("inf")}, "project team-a: gpu_quota:", "found inf"),
    mod("project-quota-negative", "gpu_project", {**PROJECT, "gpu_quota": -1}, "project team-a: gpu_quota:", "found -1"),
    mod("project-quota-word", "gpu_project", {**PROJECT, "gpu_quota": "four"}, "argument 'gpu_quota' is of type", "unable to convert to float"),
    mod("project-limit-below", "gpu_project", {**PROJECT, "gpu_limit": 2}, "project team-a: gpu_limit: expected a number not below gpu_quota (4), found 2"),
    mod("project-limit-nan", "gpu_project", {**PROJECT, "gpu_limit": "nan"}, "project team-a: gpu_limit:", "found nan"),
    mod("project-weight-negative", "gpu_project", {**PROJECT, "over_quota_weight": -5}, "project team-a: over_quota_weight: expected a non-negative number, found -5"),
    mod("project-weight-word", "gpu_project", {**PROJECT, "over_quota_weight": "heavy"}, "argument 'over_quota_weight' is of type"),
    mod("project-weight-inf", "gpu_project", {**PROJECT, "over_quota_weight": "inf"}, "project team-a: over_quota_weight:", "found inf"),
    mod("project-priority-float", "gpu_project", {**PROJECT, "priority": 1.5}, "argument 'priority' is of type", "int"),
    mod("project-priority-word", "gpu_project", {**PROJECT, "priority": "high"}, "argument 'priority' is of type"),
    mod("project-time-limit-zero", "gpu_project", {**PROJECT, "interactive_time_limit_seconds": 0}, "project team-a: interactive_time_limit_seconds: expected a positive number of seconds, found 0"),
    mod("project-time-limit-word", "gpu_project", {**PROJECT, "interactive_time_limit_seconds": "long"}, "argument 'interactive_time_limit_seconds' is of type"),
    mod("project-lending-over-quota", "gpu_project", {**PROJECT, "gpu_lending_limit": 8, "scheduler": "kueue"}, "project team-a: gpu_lending_limit: expected a number of GPUs from 0 to gpu_quota (4), found 8"),
    mod("project-lending-on-kai", "gpu_project", {**PROJECT, "gpu_lending_limit": 1, "scheduler": "kai"}, "project team-a: gpu_lending_limit: expected no lending limit"),
    mod("project-cpu-quota-negative", "gpu_project", {**PROJECT, "cpu_quota": -1}, "project team-a: cpu_quota: expected a non-negative number of CPU cores, found -1"),
    mod("project-cpu-limit-below", "gpu_project", {**PROJECT, "cpu_quota": 8, "cpu_limit": 4}, "project team-a: cpu_limit:", "not below cpu_quota (8), found 4"),
    mod("project-memory-on-kueue", "gpu_project", {**PROJECT, "memory_quota": 8, "scheduler": "kueue"}, "project team-a: memory_quota: expected none with scheduler kueue", "found 8"),
    mod("project-name-upper", "gpu_project", {**PROJECT, "name": "Team-A"}, "project Team-A: name: expected a lower-case DNS label, found 'Team-A'"),
    mod("project-state-bad", "gpu_project", {**PROJECT, "state": "gone"}, "value of state must be one of: present, absent, got: gone"),
    mod("project-scheduler-bad", "gpu_project", {**PROJECT, "scheduler": "slurm"}, "value of scheduler must be one of", "got: slurm"),
    mod("project-users-mapping", "gpu_project", {**PROJECT, "users": {"alice": 1}}, "argument 'users' is of type", "list"),
    mod("project-unknown-option", "gpu_project", {**PROJECT, "gpu_qouta": 4}, "gpu_qouta. Supported parameters include:"),
    mod("project-affinity-unknown-kind", "gpu_project", {**PROJECT, "node_affinity": {"inference": []}}, "node_affinity.inference. Supported parameters include: interactive, training"),
    mod("project-name-missing", "gpu_project", {"gpu_quota": 4}, "missing required arguments: name"),
    mod("tree-min-nan", "quota_tree", {"tree": [{"name": "root", "min": {"gpu": float("nan")}}]}, "quota tree node root: min.gpu: expected a non-negative number, found nan"),
    mod("tree-max-inf", "quota_tree", {"tree": [{"name": "root", "max": {"gpu": float("inf")}}]}, "quota tree node root: max.gpu:", "found inf"),
    mod("tree-max-below-min", "quota_tree", {"tree": [{"name": "root", "min": {"gpu": 8}, "max": {"gpu": 4}}]}, "quota tree node root: max.gpu: expected at least min.gpu (8), found 4.0"),
    mod("tree-children-over-parent", "quota_tree", {"tree": [TREE_ROOT, {"name": "a", "parent": "root", "min": {"gpu": 9}}]}, "quota tree node root: min.gpu: expected children's min.gpu adding up to at most root's min.gpu (8)"),
    mod("tree-parent-unknown", "quota_tree", {"tree": [{"name": "a", "parent": "root"}]}, "quota tree node a: parent: expected a node declared before it"),
    mod("tree-not-list", "quota_tree", {"tree": "root"}, "option 'tree' is of type str and we were unable to convert to dict"),
    mod("tree-missing", "quota_tree", {}, "missing required arguments: tree"),
    mod("validate-tree-namespace-bad", "validate_quota_tree", {"tree": [{"name": "root", "namespaces": ["Team A"]}]}, "quota tree node root: namespaces: expected a list of namespace names"),
    mod("scenario-nan", "validate_scenario", {**SCENARIO_FILE, "scenario_file": BASE_TEXT.replace("gpus: 2", "gpus: .nan").encode()}, "steps[0].submit[0].gpus:", "found nan"),
    mod("scenario-not-utf8", "validate_scenario", {**SCENARIO_FILE, "scenario_file": b"\xfe\xff" + BASE_TEXT.encode()}, "scenario.yml line 1: expected UTF-8 text"),
    mod("scenario-bomb", "validate_scenario", {**SCENARIO_FILE, "scenario_file": (BOMB + BASE_TEXT).encode()}, "scenario.yml line 2", "found an alias (*a)"),
    mod("scenario-content-not-utf8", "validate_scenario", {**SCENARIO_FILE, "scenario_file": "/elsewhere/scenario.yml", "scenario_content": base64.b64encode(b"name: caf\xe9\n").decode()}, "scenario /elsewhere/scenario.yml: /elsewhere/scenario.yml line 1: expected UTF-8 text, found the byte 0xe9 (at byte 9); nothing was changed"),
    mod("scenario-content-not-base64", "validate_scenario", {**SCENARIO_FILE, "scenario_file": "/elsewhere/scenario.yml", "scenario_content": "name: x"}, "scenario /elsewhere/scenario.yml: scenario_content: expected the file's bytes in base64"),
    mod("scenario-missing", "validate_scenario", {**SCENARIO_FILE, "scenario_file": "/nonexistent/scenario.yml"}, "scenario /nonexistent/scenario.yml: No such file or directory"),
    mod("scenario-step-timeout-word", "validate_scenario", {**SCENARIO_FILE, "scenario_file": "x.yml", "step_timeout": "long"}, "argument 'step_timeout' is of type"),
    mod("scenario-settle-word", "validate_scenario", {**SCENARIO_FILE, "scenario_file": "x.yml", "settle_seconds": "soon"}, "argument 'settle_seconds' is of type"),
    mod("scenario-nodes-missing", "validate_scenario", {"scenario_file": "x.yml"}, "missing required arguments: nodes"),
    mod("sandbox-port-base-word", "sandbox_cluster", {"state_dir": "/tmp/x", "state": "status", "port_base": "abc"}, "argument 'port_base' is of type", "int"),
    mod("sandbox-state-bad", "sandbox_cluster", {"state_dir": "/tmp/x", "state": "sideways"}, "value of state must be one of: up, status, down, got: sideways"),
    mod("sandbox-status-where-none-is", "sandbox_cluster", {"state_dir": "/nonexistent/sandbox", "state": "status"}, "no sandbox in /nonexistent/sandbox: the directory does not exist (state_dir); nothing to report"),
    mod("sandbox-status-of-another-directory", "sandbox_cluster", {"state_dir": str(REPO / "inventories"), "state": "status"}, "no sandbox in %s: the directory holds no sandbox (no .clusterproof-sandbox file)" % (REPO / "inventories")),
    mod("sandbox-timeout-word", "sandbox_cluster", {"state_dir": "/tmp/x", "state": "status", "timeout": "forever"}, "argument 'timeout' is of type"),
    mod("control-plane-endpoint-space", "control_plane_status", {"host": "cp-1", "endpoint": "api site:6443"}, "endpoint: expected host or host:port (port 1-65535), found 'api site:6443'"),
    mod("control-plane-endpoint-port", "control_plane_status", {"host": "cp-1", "endpoint": "10.0.0.1:70000"}, "endpoint: expected host or host:port (port 1-65535), found '10.0.0.1:70000'"),
    mod("control-plane-apiserver-url", "control_plane_status", {"host": "cp-1", "apiserver_address": "https://10.0.0.1:6443"}, "apiserver_address: expected host or host:port", "found 'https://10.0.0.1:6443'"),
    mod("control-plane-etcd-plain-http", "control_plane_status", {"host": "cp-1", "etcd_url": "http://127.0.0.1:2379"}, "etcd_url: expected an https:// URL", "found 'http://127.0.0.1:2379'"),
    mod("control-plane-timeout-word", "control_plane_status", {"host": "cp-1", "timeout": "soon"}, "argument 'timeout' is of type"),
    mod("control-plane-host-missing", "control_plane_status", {}, "missing required arguments: host"),
    mod("gpu-nodes-not-list", "validate_gpu_nodes", {"nodes": "dgx1-1"}, "option 'nodes' is of type str and we were unable to convert to dict"),
    mod("gpu-nodes-count-word", "validate_gpu_nodes", {"nodes": [{"name": "dgx1-1", "gpu_count": "eight"}]}, "gpu_count", "int"),
]
# fmt: on

CASES = [*INVENTORY_CASES, *SCENARIO_CASES, *MODULE_CASES]
# The project's own errors: what a case may raise (as a refusal the case turns into text).
PROJECT_ERRORS = (AssertionError,)


def run_case(case: Case, directory: Path) -> str:
    """Run one case; the error text. Anything but an assertion (the case's own) is a crash."""
    try:
        return case.run(directory)
    except PROJECT_ERRORS:
        raise
    except Exception as error:  # noqa: BLE001 - the point: nothing else may escape
        raise AssertionError(f"{case.id}: {type(error).__name__} escaped: {error}") from error


def test_the_suite_has_at_least_150_cases_of_each_kind():
    kinds = {kind: sum(1 for case in CASES if case.kind == kind) for kind in ("inventory", "scenario", "module")}
    assert sum(kinds.values()) >= 150 and min(kinds.values()) >= 30, kinds
    assert len({(case.kind, case.id) for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case.kind}-{case.id}")
def test_bad_input_is_refused_naming_the_field(case, tmp_path):
    text = run_case(case, tmp_path)
    for part in case.expect:
        assert part in text, f"{part!r} not in:\n{text}"


# --- no hostile value crashes any field -----------------------------------------------------

HOSTILE = [NAN, INF, -INF, 10**20, -1, 0, 0.001, "x" * 300, "", "A B\n", None, True, [], {}, [NAN], [[]], [{}], {1: 2}]


def _inventory_fields() -> list[tuple[str, Callable[[Any], Change]]]:
    fields: list[tuple[str, Callable[[Any], Change]]] = []
    for name in schema.SITE_VARIABLES:
        fields.append((name, lambda value, name=name: site_set(**{name: value})))
    for name in schema.NODE_VARIABLES:
        fields.append((name, lambda value, name=name: node_set(**{name: value})))
    for name in schema.PROJECT_FIELDS:
        fields.append(("project." + name, lambda value, name=name: project_set(**{name: value})))
    for name in quota_tree.NODE_FIELDS:
        fields.append(("tree." + name, lambda value, name=name: tree_set([{"name": "root", name: value}])))
    fields.append(("taint.key", lambda value: node_set(node_taints=[{"key": value, "effect": "NoSchedule"}])))
    fields.append(("affinity", lambda value: project_set(node_affinity={"training": [value]})))
    fields.append(("labels.key", lambda value: node_set(node_labels={"k": value, 1: "v"})))
    return fields


@pytest.mark.parametrize(("field", "make"), _inventory_fields(), ids=[field for field, _ in _inventory_fields()])
def test_no_hostile_value_crashes_the_inventory_check(field, make):
    for value in HOSTILE:
        site, nodes = sandbox_inventory()
        groups = {"kube_control_plane": ["localhost"], "gpu_nodes": list(nodes)}
        make(value)(site, nodes, groups)
        groups["all"] = ["localhost", *nodes]
        declaration, errors = schema.validate_site(groups, _hostvars(site, nodes, groups))
        assert (declaration is None) == bool(errors), (field, value)


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_no_hostile_vip_or_endpoint_crashes_the_kubeadm_checks(value):
    """The VIP is read in mode kubeadm alone (the field loop above runs the sandbox's mode)."""
    for variables in (
        {"clusterproof_control_plane_vip": value},
        {"clusterproof_control_plane_vip": "10.0.0.100", "clusterproof_control_plane_endpoint": value},
    ):
        site, nodes = sandbox_inventory()
        site.update(clusterproof_cluster_mode="kubeadm", **variables)
        groups = {"kube_control_plane": ["localhost"], "gpu_nodes": list(nodes), "all": ["localhost", *nodes]}
        declaration, errors = schema.validate_site(groups, _hostvars(site, nodes, groups))
        assert (declaration is None) == bool(errors), (variables, value)


SCENARIO_PATHS = [
    ("name",),
    ("policy",),
    ("resource",),
    ("capacity",),
    ("capacity", "gpus"),
    ("capacity", "node_gpus"),
    ("projects",),
    ("projects", 0),
    ("projects", 0, "name"),
    ("projects", 0, "gpu_quota"),
    ("projects", 0, "gpu_limit"),
    ("projects", 0, "over_quota_weight"),
    ("projects", 1, "parent"),
    ("steps",),
    ("steps", 0),
    ("steps", 0, "submit"),
    ("steps", 0, "delete"),
    ("steps", 0, "expect"),
    (*JOB0,),
    (*JOB0, "name"),
    (*JOB0, "project"),
    (*JOB0, "kind"),
    (*JOB0, "gpus"),
    (*JOB0, "replicas"),
    ("steps", 0, "expect", "allocated"),
    ("steps", 0, "expect", "allocated", "team-a"),
    ("steps", 0, "expect", "total"),
    ("steps", 0, "expect", "running"),
    ("steps", 0, "expect", "pending"),
    ("steps", 0, "expect", "shared_gpus"),
    ("steps", 0, "expect", "replicas"),
    ("steps", 0, 1),
]


@pytest.mark.parametrize("path", SCENARIO_PATHS, ids=[".".join(map(str, path)) for path in SCENARIO_PATHS])
def test_no_hostile_value_crashes_the_scenario_check(path):
    """Whatever a field holds, the check answers with ScenarioError; what it accepts, the model can size."""
    for value in HOSTILE:
        data = copy.deepcopy(BASE_SCENARIO)
        at(*path, value=value)(data)
        try:
            scenario = scenarios.load(data, where="scenario.yml")
        except scenarios.ScenarioError as error:
            assert str(error).startswith("scenario.yml: "), error
            continue
        plan = scenarios.fit_to_site(scenario, [("dgx1-1", 8), ("dgx1-2", 8)])
        if not isinstance(plan, str):
            scenarios.predictions(plan.scenario, list(plan.nodes))


# --- what Ansible fails on while the action reads the inventory -----------------------------


class _HostVars:
    """Ansible's HostVars as the action plugin uses it: ``raw_get`` (untemplated), or a failure to
    read a host's files (Ansible parses them when the host's variables are first read)."""

    def __init__(
        self,
        hostvars: dict[str, dict[str, Any]],
        unreadable: tuple[str, ...] = (),
        failure: str = "YAML parsing failed: Tabs are usually invalid in YAML.",
    ) -> None:
        self.hostvars = hostvars
        self.unreadable = unreadable
        self.failure = failure

    def raw_get(self, host: str) -> dict[str, Any]:
        if host in self.unreadable:
            raise AnsibleParserError(self.failure)
        return self.hostvars[host]


def action_errors(change: Change, unreadable: tuple[str, ...] = (), **failure: str) -> list[str]:
    site, nodes = sandbox_inventory()
    groups = {"kube_control_plane": ["localhost"], "gpu_nodes": list(nodes)}
    change(site, nodes, groups)
    groups["all"] = ["localhost", *nodes]
    declaration, errors = site_inventory_action.check(
        groups, _HostVars(_hostvars(site, nodes, groups), unreadable, **failure), DataLoader()
    )
    assert declaration is None
    return [str(error) for error in errors]


def test_an_undefined_variable_names_the_host_and_variable_once():
    errors = action_errors(node_set(gpu_count=trust_as_template("{{ gpus_per_dgx }}")))
    assert errors == [
        "host dgx1-1: gpu_count: expected a value Ansible can template, found 'gpus_per_dgx' is undefined "
        "(Ansible does not say in which file)"
    ]


def test_hosts_whose_files_fail_to_parse_are_named_together():
    errors = action_errors(lambda site, nodes, groups: None, unreadable=("dgx1-1", "dgx1-2"))
    assert errors == [
        "hosts dgx1-1, dgx1-2: variables: expected files Ansible can read, found YAML parsing failed: "
        "Tabs are usually invalid in YAML. (Ansible does not say in which file)"
    ]


def test_a_file_ansible_quotes_is_not_said_to_go_unnamed():
    """A host_vars file holding a list: Ansible quotes its path in the message and tags no origin."""
    failure = (
        "Could not process '/site/host_vars/dgx1-1.yml': failed to combine variables, expected dicts but got "
        "a 'dict' and a '_AnsibleTaggedList'."
    )
    errors = action_errors(lambda site, nodes, groups: None, unreadable=("dgx1-1",), failure=failure)
    assert errors == ["host dgx1-1: variables: expected files Ansible can read, found " + failure]


def test_the_preamble_names_an_inventory_file_that_is_not_utf8_by_line_and_byte(tmp_path):
    """The action reads the inventory sources' files itself: Ansible would hand it escaped bytes."""
    inventory = tmp_path / "site"
    shutil.copytree(SANDBOX, inventory)
    gpus = inventory / "group_vars" / "gpu_nodes" / "gpus.yml"
    text = gpus.read_bytes().replace(b"Tesla", b"T\xe9sla", 1)
    gpus.write_bytes(text)
    site, nodes = sandbox_inventory()
    groups = {"all": ["localhost", *nodes], "kube_control_plane": ["localhost"], "gpu_nodes": list(nodes)}
    task = types.SimpleNamespace(async_val=0, check_mode=False, args={}, action="clusterproof.gpu.site_inventory")
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=str(tmp_path)))
    action = site_inventory_action.ActionModule(task, connection, None, DataLoader(), None)
    task_vars = {
        "groups": groups,
        "hostvars": _HostVars(_hostvars(site, nodes, groups)),
        "ansible_inventory_sources": [str(inventory)],
    }
    result = action.run(task_vars=task_vars)
    offset = text.index(b"\xe9")
    where = "%s: line %d, byte %d: expected UTF-8 text, found the byte 0xe9; save the file as UTF-8" % (
        gpus,
        text[:offset].count(b"\n") + 1,
        offset,
    )
    assert result["failed"] and result["errors"] == [where]
    assert result["msg"] == "the inventory has 1 error(s); nothing was changed:\n  - " + where
    assert gpus.read_bytes() == text


def test_an_anchor_bomb_reaches_the_schema_untemplated():
    errors = action_errors(project_set(users=billion_laughs(20)))
    assert errors == [
        "group all: clusterproof_projects: expected at most 100000 values (YAML aliases expanded), found more than 100000"
    ]
