"""The site inventory schema: what an admin may declare, checked before anything runs.

The same inventory drives install and validation, so a typo here would either install the wrong
thing or validate against the wrong expectation. Every error names where it is (a host, the
``all`` group, a project), the field, what was expected and what was found.

Variables are recognised by their prefix: ``clusterproof_*`` (site-wide), and on hosts ``gpu_*``
and ``node_*``. Any variable with one of those prefixes that the schema does not know is an error
(``gpu_cuont: 8`` must not silently fall back to a default). Variables of other prefixes belong
to Ansible or other collections and are left alone.

Pure: takes plain mappings (Ansible's hostvars and groups), returns dataclasses and errors.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common import bounds
from ansible_collections.clusterproof.gpu.plugins.module_utils.common import steps as steps_rule
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.bounds import (
    INT32_MAX,
    PORT_BASE_MAX,
    PORT_MIN,
    SANDBOX_PORTS,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import gpu_device_layer, kubeadm_config, storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import settings as monitoring_settings
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import (
    isolation,
    names,
    projects,
    quota_tree,
    resource_quota,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy.names import (
    DNS_LABEL_MAX,
    DNS_SUBDOMAIN_MAX,
    is_dns_subdomain,
    is_label_key,
    is_label_value,
)

CLUSTER_MODES = ("sandbox", "existing", "kubeadm")


def schedulers() -> tuple[str, ...]:
    """The GPU schedulers an inventory may name: the registry's engines (asked at each check, so that
    an engine registered there is one), or none, which leaves scheduling alone (validation only)."""
    return (*registry.names(), registry.NONE)


REQUIRED_GROUPS = ("kube_control_plane", "gpu_nodes")
# GPU nodes a test bed without GPUs gives a real cluster (mode kubeadm or existing): KWOK nodes attached
# to its API server, declared as GPU nodes are, and never contacted as hosts (the simulated_gpu_nodes
# role, docs/lab.md). The sandbox's nodes are all simulated already.
SIMULATED_GROUP = "simulated_gpu_nodes"
SIMULATED_MODES = ("kubeadm", "existing")

SITE_VARIABLES = {
    "clusterproof_site_name": "the site's name, used for report folders",
    "clusterproof_cluster_mode": "how Kubernetes comes to be: {}".format(" | ".join(CLUSTER_MODES)),
    "clusterproof_kubeconfig": "kubeconfig of an existing cluster (mode existing)",
    "clusterproof_scheduler": "the GPU scheduler to install: %s" % " | ".join(schedulers()),
    "clusterproof_benchmarks": "whether validation benchmarks the GPU hosts (true unless set false)",
    "clusterproof_host_tests": "whether validation runs the GPU host suite on the GPU hosts (true unless set false)",
    "clusterproof_gpu_health": "whether validation reads the GPU hosts' passive health (true unless set false)",
    "clusterproof_certificates": "whether validation reads the cluster certificates' expiry (true unless set false)",
    "clusterproof_control_plane_checks": "whether validation checks a kubeadm control plane: etcd, API servers, "
    "endpoint (true unless set false)",
    "clusterproof_certificates_renew_days": "renew_certificates.yml renews when a certificate has fewer days left",
    "clusterproof_certificates_force": "renew_certificates.yml renews every certificate, due or not",
    "clusterproof_etcd_backup_dir": "the controller's directory etcd_backup.yml keeps etcd snapshots in (docs/etcd.md)",
    "clusterproof_etcd_backup_keep": "how many snapshots etcd_backup.yml keeps (7 unless set)",
    "clusterproof_etcd_backup_warn_hours": "the report warns when the newest etcd snapshot is older (24 unless set)",
    "clusterproof_upgrade_serial": "how many workers upgrade.yml upgrades at a time",
    "clusterproof_upgrade_work_back_timeout": "seconds upgrade.yml waits for the work its drains evicted to run again",
    "clusterproof_upgrade_validate": "whether upgrade.yml validates the site after the upgrade (true unless set false)",
    "clusterproof_upgrade_ignore_validation": "whether upgrade.yml goes on when the last validation failed",
    "clusterproof_projects": "the projects (tenants) and their GPU quotas",
    "clusterproof_tenancy": "the projects' boundary: Pod Security level, NetworkPolicies, exceptions (docs/tenancy.md)",
    "clusterproof_reports_dir": "where site reports are written",
    "clusterproof_sandbox_dir": "where the sandbox keeps its state (mode sandbox)",
    "clusterproof_sandbox_port_base": "first of the loopback ports the sandbox listens on",
    "clusterproof_sandbox_cache": "where the sandbox binaries are cached",
    "clusterproof_storage_classes": "the storage classes, exactly one of them the default (install/storage.py)",
    # Mode kubeadm: the Kubernetes clusterproof installs (install/kubeadm_config.py).
    **kubeadm_config.SITE_VARIABLES,
    # What advertises the GPUs: GPU operator or device plugin (module_utils/install/gpu_device_layer.py).
    **gpu_device_layer.SITE_VARIABLES,
    # An elastic quota tree (module_utils/tenancy/quota_tree.py).
    **quota_tree.SITE_VARIABLES,
    # The monitoring stage (module_utils/monitoring/settings.py, docs/monitoring.md).
    **monitoring_settings.SITE_VARIABLES,
    # Facts clusterproof itself sets during a run.
    "clusterproof_site": "the checked declaration (set by clusterproof.gpu.site_inventory)",
    "clusterproof_report_sections": "validation results gathered for the site report",
    "clusterproof_active_kubeconfig": "kubeconfig of the cluster the run works on (sandbox or existing)",
    "clusterproof_run_started": "when this run started (UTC), for the report",
}
NODE_VARIABLES = {
    "gpu_count": "GPUs the node has (allocatable nvidia.com/gpu)",
    "gpu_product": "GPU product as GPU feature discovery labels it",
    "gpu_memory_mib": "memory of one GPU in MiB",
    "node_name": "the Kubernetes node name, if it differs from the inventory name",
    "node_cpu_cores": "CPU cores the node offers to pods",
    "node_memory_gib": "memory the node offers to pods, in GiB",
    "node_labels": "extra node labels",
    "node_taints": "node taints",
}
PROJECT_FIELDS = {
    "name": "project name (a DNS label; becomes the namespace)",
    "gpu_quota": "guaranteed GPUs (a non-negative number, may be fractional)",
    "gpu_limit": "the most GPUs the project may use, over quota included",
    "over_quota_weight": "share of spare GPUs; defaults to the quota",
    "priority": "queue priority: served first when over quota",
    "node_affinity": "nodes for training and for interactive work: {training: [...], interactive: [...]}",
    "interactive_time_limit_seconds": "interactive workloads end after this many seconds",
    "users": "users who may submit workloads in the project",
    "groups": "groups whose members may submit workloads in the project",
    "gpu_lending_limit": "Kueue only: the most of the quota the project lends to other projects (all when unset)",
    "cpu_quota": "KAI only: guaranteed CPU cores (in thousandths; unlimited when unset)",
    "cpu_limit": "KAI only: the most CPU cores the project may use (in thousandths; unlimited when unset)",
    "memory_quota": "KAI only: guaranteed memory in GiB (in MiB: multiples of 1/1024; unlimited when unset)",
    "memory_limit": "KAI only: the most memory the project may use, in GiB (in MiB; unlimited when unset)",
    "pod_security": "the project's Pod Security level, instead of the site's: %s"
    % " | ".join(isolation.PROJECT_POD_SECURITY),
    "resource_quota": "the project's ceilings beside its GPUs, changing the site's (a key set to null: none)",
}
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

_DNS_LABEL = names.DNS_LABEL
# Kubernetes' syntax (apimachinery validation), matched whole (fullmatch: no trailing newline slips
# through a "$"); the lengths are checked beside the patterns.
# Bounds of the numbers an inventory declares (docs/inventory.md): what Kubernetes and the
# schedulers accept, and far above any real machine, so that a typo (10**15 GPUs) stops here.
MAX_NODE_GPUS = 256
MAX_GPU_MEMORY_MIB = 1024 * 1024  # 1 TiB per GPU
MAX_NODE_CPU_CORES = 4096
MAX_NODE_MEMORY_GIB = 65536  # 64 TiB
MAX_PROJECT_GPUS = 100_000  # quota, limit and lending limit of one project
MAX_WEIGHT = 1_000_000
# CPU and memory quotas and limits of one project: as much as MAX_PROJECT_GPUS nodes of the largest size.
MAX_PROJECT_CPU_CORES = MAX_PROJECT_GPUS * MAX_NODE_CPU_CORES
MAX_PROJECT_MEMORY_GIB = MAX_PROJECT_GPUS * MAX_NODE_MEMORY_GIB
# The steps CPU (thousandths of a core: millicpus) and memory (MiB: 1/1024 GiB) are declared in.
RESOURCE_STEPS = {"cpu": 1000, "memory": 1024}
# What Ansible's ``bool`` filter reads as a boolean (a -e key=value gives a string).
BOOLEAN_WORDS = ("true", "false", "yes", "no", "on", "off", "1", "0")
# Site settings that are paths or text, and settings that are booleans.
SITE_STRINGS = (
    "clusterproof_reports_dir",
    "clusterproof_sandbox_dir",
    "clusterproof_sandbox_cache",
    "clusterproof_etcd_backup_dir",
)
SITE_BOOLEANS = (
    "clusterproof_monitoring",
    "clusterproof_benchmarks",
    "clusterproof_host_tests",
    "clusterproof_gpu_health",
    "clusterproof_certificates",
    "clusterproof_certificates_force",
    "clusterproof_control_plane_checks",
    "clusterproof_upgrade_validate",
    "clusterproof_upgrade_ignore_validation",
)
# Site settings that are whole numbers, and the least each may be.
SITE_COUNTS = {
    "clusterproof_certificates_renew_days": 0,
    "clusterproof_upgrade_serial": 1,
    "clusterproof_upgrade_work_back_timeout": 0,
    "clusterproof_etcd_backup_keep": 1,
    "clusterproof_etcd_backup_warn_hours": 1,
}
# Site settings that monitoring.settings judges: each function says what was expected, or None when the value is fine.
SITE_JUDGED: dict[str, Callable[[Any], str | None]] = {
    "clusterproof_monitoring_retention": monitoring_settings.retention_problem,
    "clusterproof_monitoring_storage_size": monitoring_settings.storage_size_problem,
    "clusterproof_monitoring_prometheus_url": monitoring_settings.prometheus_url_problem,
    "clusterproof_monitoring_gpu_operator_namespace": monitoring_settings.namespace_problem,
}
OUR_HOST_PREFIXES = ("gpu_", "node_")
# Variables of the roles that run on the GPU hosts (gpu_benchmark_python, gpu_host_tests_sudo, ...):
# set per host or group like any role variable, and checked by those roles' argument_specs.
GPU_HOST_ROLE_PREFIXES = ("gpu_benchmark_", "gpu_host_tests_", "gpu_health_")

DEFAULT_CPU_CORES = 8
DEFAULT_MEMORY_GIB = 32


@dataclasses.dataclass(frozen=True)
class InventoryError:
    where: str
    field: str
    expected: str
    found: str

    def __str__(self) -> str:
        return f"{self.where}: {self.field}: expected {self.expected}, found {self.found}"


@dataclasses.dataclass(frozen=True)
class NodeDeclaration:
    host: str
    name: str
    gpu_count: int
    gpu_product: str | None
    gpu_memory_mib: int | None
    cpu_cores: int
    memory_gib: int
    labels: dict[str, str]
    taints: list[dict[str, str]]
    # A KWOK node attached to a real cluster (group simulated_gpu_nodes): the report says so.
    simulated: bool = False


@dataclasses.dataclass(frozen=True)
class ProjectDeclaration:
    name: str
    gpu_quota: float
    gpu_limit: float | None
    over_quota_weight: float
    priority: int | None = None
    node_affinity: dict[str, list[str]] = dataclasses.field(default_factory=lambda: {"training": [], "interactive": []})
    interactive_time_limit_seconds: int | None = None
    users: list[str] = dataclasses.field(default_factory=list)
    groups: list[str] = dataclasses.field(default_factory=list)
    gpu_lending_limit: float | None = None
    # KAI only: CPU cores and memory GiB beside the GPUs (None: none, unlimited).
    cpu_quota: float | None = None
    cpu_limit: float | None = None
    memory_quota: float | None = None
    memory_limit: float | None = None
    # The boundary, resolved from the project's own level (None until then: not declared), the
    # site's tenancy and its exceptions.
    pod_security: str | None = None
    network_isolation: bool = True
    ingress_namespaces: list[str] = dataclasses.field(default_factory=list)
    ingress_from_all_projects: bool = False
    # The project's own changes to the site's ceilings (None: leave the key out), then, resolved,
    # its ceilings (tenancy/resource_quota.py).
    resource_quota: dict[str, str | None] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class SiteDeclaration:
    site_name: str
    cluster_mode: str
    kubeconfig: str | None
    nodes: list[NodeDeclaration]
    projects: list[ProjectDeclaration]
    warnings: list[str]
    scheduler: str = registry.DEFAULT
    # Mode kubeadm only: what to install.
    kubernetes: kubeadm_config.KubernetesSettings | None = None
    storage_classes: list[storage.StorageClassDeclaration] = dataclasses.field(default_factory=list)
    device_layer: gpu_device_layer.DeviceLayerDeclaration | None = None
    quota_tree: list[quota_tree.TreeNode] = dataclasses.field(default_factory=list)
    tenancy: isolation.TenancySettings = dataclasses.field(default_factory=isolation.TenancySettings)

    @property
    def total_gpus(self) -> int:
        return sum(node.gpu_count for node in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["total_gpus"] = self.total_gpus
        # Where the stages take helm and the charts from: the mirror's (empty: the Go modules').
        data["charts"] = {} if self.kubernetes is None else self.kubernetes.chart_refs
        data["storage_charts"] = {} if self.kubernetes is None else self.kubernetes.storage_chart_refs
        data["helm_binary"] = "" if self.kubernetes is None else self.kubernetes.helm_binary
        # Whether the cluster is the sandbox (the engines and storage as local processes, the GPU nodes
        # simulated, no pod runs): settled here once, so that no role works it out from the mode again.
        data["sandbox"] = self.cluster_mode == "sandbox"
        # What the playbooks and roles ask of the engine, from its backend (never its name).
        data["engine"] = registry.site_engine(self.scheduler)
        if self.kubernetes is not None:
            data["kubernetes"]["sandbox_image"] = self.kubernetes.sandbox_image
        return data


# What an error shows of a value: enough to find it, never a whole file.
SHOWN_MAX = 100


def _show(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        shown = repr(str(value))
        return shown if len(shown) <= SHOWN_MAX else "%s... (%d characters)" % (shown[:SHOWN_MAX], len(value))
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return repr(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _in_steps(value: float, steps: int) -> bool:
    """Whether ``value`` is a whole number of 1/``steps``, decided on the decimal the admin wrote
    (its shortest repr): 0.29 is 29 hundredths, 1e-9 is not a hundredth, however close."""
    return steps_rule.whole_steps(value, steps)


def _in_hundredths(value: float) -> bool:
    return _in_steps(value, 100)


def _node_name_rule(name: Any) -> str:
    """The rule of Kubernetes node names that ``name`` (refused by is_dns_subdomain) breaks."""
    if isinstance(name, str) and len(name) > DNS_SUBDOMAIN_MAX:
        return "a Kubernetes node name of at most %d characters" % DNS_SUBDOMAIN_MAX
    longest = max((len(label) for label in name.split(".")), default=0) if isinstance(name, str) else 0
    if longest > DNS_LABEL_MAX:
        return "a Kubernetes node name whose dot-separated DNS labels have at most %d characters each (one has %d)" % (
            DNS_LABEL_MAX,
            longest,
        )
    return (
        "a Kubernetes node name (a lower-case DNS name: dot-separated labels of a-z, 0-9 and '-', "
        "each starting and ending with a letter or digit)"
    )


class _Checker:
    def __init__(self) -> None:
        self.errors: list[InventoryError] = []

    def error(self, where: str, field: str, expected: str, value: Any) -> None:
        self.errors.append(InventoryError(where, field, expected, _show(value)))

    def unknown_keys(
        self, where: str, keys: Iterable[str], known: Mapping[str, str], prefixes: tuple[str, ...]
    ) -> None:
        for key in sorted(keys):
            if key.startswith(prefixes) and key not in known:
                expected = "one of {}".format(", ".join(sorted(name for name in known if name.startswith(prefixes))))
                self.errors.append(InventoryError(where, key, expected, "an unknown variable"))

    def non_negative_int(self, where: str, field: str, value: Any, most: int = INT32_MAX) -> int | None:
        if _is_int(value) and 0 <= value <= most:
            return int(value)
        self.error(where, field, "a non-negative integer" + _at_most(most, _is_int(value) and value >= 0), value)
        return None

    def positive_int(self, where: str, field: str, value: Any, most: int = INT32_MAX) -> int | None:
        if _is_int(value) and 0 < value <= most:
            return int(value)
        self.error(where, field, "a positive integer" + _at_most(most, _is_int(value) and value > 0), value)
        return None

    def text(self, where: str, field: str, value: Any, pattern: re.Pattern[str] | None, expected: str) -> str | None:
        if isinstance(value, str) and (pattern is None or pattern.fullmatch(value)):
            return str(value)
        self.error(where, field, expected, value)
        return None


def _at_most(most: int, beyond: bool) -> str:
    # The bound is named when it is what the value breaks (an integer of the right sign, too large).
    return ", at most %d" % most if beyond else ""


def _check_labels(check: _Checker, where: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        check.error(where, "node_labels", "a mapping of label keys to string values", value)
        return {}
    labels = {}
    for key, label_value in value.items():
        if not is_label_key(key):
            check.error(where, "node_labels", "label keys of the form [prefix/]name", key)
        elif not is_label_value(label_value):
            check.error(where, f"node_labels.{key}", "a label value (63 characters of [A-Za-z0-9_.-])", label_value)
        else:
            labels[str(key)] = str(label_value)
    return labels


def _check_taints(check: _Checker, where: str, value: Any) -> list[dict[str, str]]:
    if value is None:
        return []
    if not isinstance(value, list):
        check.error(where, "node_taints", "a list of {key, value, effect}", value)
        return []
    taints = []
    for index, taint in enumerate(value):
        field = "node_taints[%d]" % index
        if not isinstance(taint, Mapping):
            check.error(where, field, "a mapping with key, value and effect", taint)
            continue
        unknown = sorted(set(taint) - {"key", "value", "effect"}, key=str)
        if unknown:
            check.error(where, f"{field}.{unknown[0]}", "only key, value and effect", "an unknown key")
        key = taint.get("key")
        if not is_label_key(key):
            check.error(where, field + ".key", "a taint key of the form [prefix/]name", key)
            continue
        effect = taint.get("effect")
        if not isinstance(effect, str) or effect not in TAINT_EFFECTS:
            check.error(where, field + ".effect", "one of {}".format(", ".join(TAINT_EFFECTS)), effect)
            continue
        taint_value = taint.get("value")
        if taint_value is not None and not is_label_value(taint_value):
            check.error(where, field + ".value", "a taint value (63 characters of [A-Za-z0-9_.-])", taint_value)
            continue
        entry = {"key": str(key), "effect": str(effect)}
        if taint_value is not None:
            entry["value"] = str(taint_value)
        taints.append(entry)
    return taints


def _check_node(
    check: _Checker, host: str, variables: Mapping[str, Any], simulated: bool = False
) -> NodeDeclaration | None:
    where = f"host {host}"
    ours = [key for key in variables if not key.startswith(GPU_HOST_ROLE_PREFIXES)]
    check.unknown_keys(where, ours, NODE_VARIABLES, OUR_HOST_PREFIXES)
    errors_before = len(check.errors)
    if "gpu_count" not in variables:
        check.error(where, "gpu_count", "the number of GPUs this node has (a non-negative integer)", None)
        gpu_count = None
    else:
        gpu_count = check.non_negative_int(where, "gpu_count", variables["gpu_count"], MAX_NODE_GPUS)
    name = variables.get("node_name", host)
    node_name = None
    if is_dns_subdomain(name):
        node_name = str(name)
    else:
        check.error(where, "node_name", _node_name_rule(name), name)
    product = variables.get("gpu_product")
    if product is not None and not is_label_value(product):
        check.error(where, "gpu_product", "a GPU product name usable as a label value (63 characters)", product)
    memory = variables.get("gpu_memory_mib")
    if memory is not None:
        memory = check.positive_int(where, "gpu_memory_mib", memory, MAX_GPU_MEMORY_MIB)
    cpu = variables.get("node_cpu_cores", DEFAULT_CPU_CORES)
    cpu = check.positive_int(where, "node_cpu_cores", cpu, MAX_NODE_CPU_CORES)
    mem = variables.get("node_memory_gib", DEFAULT_MEMORY_GIB)
    mem = check.positive_int(where, "node_memory_gib", mem, MAX_NODE_MEMORY_GIB)
    labels = _check_labels(check, where, variables.get("node_labels"))
    taints = _check_taints(check, where, variables.get("node_taints"))
    if len(check.errors) > errors_before:
        return None
    assert gpu_count is not None and node_name is not None and cpu is not None and mem is not None
    return NodeDeclaration(host, node_name, gpu_count, product, memory, cpu, mem, labels, taints, simulated)


def _check_projects(
    check: _Checker, value: Any, node_names: set[str], faulty_nodes: set[str]
) -> list[ProjectDeclaration]:
    if value is None:
        return []
    if not isinstance(value, list):
        check.error("group all", "clusterproof_projects", "a list of projects", value)
        return []
    declared: list[ProjectDeclaration] = []
    seen: set[str] = set()
    for index, project in enumerate(value):
        where = "clusterproof_projects[%d]" % index
        if not isinstance(project, Mapping):
            check.error(where, "project", "a mapping with name and gpu_quota", project)
            continue
        name = project.get("name")
        if isinstance(name, str):
            where = f"project {name}"
        for key in sorted(set(project) - set(PROJECT_FIELDS), key=str):
            expected = "one of %s" % ", ".join(PROJECT_FIELDS)
            check.errors.append(InventoryError(where, str(key), expected, "an unknown field"))
        errors_before = len(check.errors)
        name = check.text(where, "name", name, _DNS_LABEL, "a lower-case DNS label (it becomes the namespace)")
        if name is not None and name in seen:
            check.error(where, "name", "a name used by one project only", name)
        quota = project.get("gpu_quota")
        limit = project.get("gpu_limit")
        # The Run:AI default: spare GPUs are shared in proportion to the quotas.
        weight = project.get("over_quota_weight", quota)
        lending = project.get("gpu_lending_limit")
        time_limit = project.get("interactive_time_limit_seconds")
        fields = {"gpu_quota": quota, "gpu_limit": limit, "gpu_lending_limit": lending}
        fields["interactive_time_limit_seconds"] = time_limit
        resource_amounts = {field: project.get(field) for field in projects.RESOURCE_FIELDS}
        fields.update(resource_amounts)
        if "over_quota_weight" in project:
            fields["over_quota_weight"] = weight
        rule_errors = {problem.field: problem for problem in projects.problems(fields, units=True)}
        for field in ("gpu_quota", "gpu_limit", "over_quota_weight"):
            if field in rule_errors:
                check.error(where, field, rule_errors[field].expected, rule_errors[field].found)
        _check_amounts(check, where, fields, rule_errors)
        priority = project.get("priority")
        if priority is not None and not (_is_int(priority) and -INT32_MAX - 1 <= priority <= INT32_MAX):
            check.error(where, "priority", "an integer from %d to %d" % (-INT32_MAX - 1, INT32_MAX), priority)
        affinity = _check_affinity(check, where, project.get("node_affinity"), node_names, faulty_nodes)
        for field in ("gpu_lending_limit", "interactive_time_limit_seconds", *projects.RESOURCE_FIELDS):
            if field in rule_errors:
                check.error(where, field, rule_errors[field].expected, rule_errors[field].found)
        pod_security = project.get("pod_security")
        if pod_security is not None and pod_security not in isolation.PROJECT_POD_SECURITY:
            expected = "one of %s (privileged only as a declared exception in clusterproof_tenancy)" % ", ".join(
                isolation.PROJECT_POD_SECURITY
            )
            check.error(where, "pod_security", expected, pod_security)
        ceilings: dict[str, str | None] = {}
        if project.get("resource_quota") is not None:
            ceilings, problems = resource_quota.check_hard(project["resource_quota"], "resource_quota", nulls=True)
            for problem in problems:
                check.error(where, problem.field, problem.expected, problem.found)
        members = {}
        for field in ("users", "groups"):
            value = project.get(field) or []
            if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
                check.error(where, field, "a list of names", value)
            members[field] = [str(item) for item in value] if isinstance(value, list) else []
        if len(check.errors) == errors_before and name is not None:
            seen.add(name)
            declared.append(
                ProjectDeclaration(
                    name,
                    float(quota),
                    None if limit is None else float(limit),
                    float(weight),
                    priority,
                    affinity,
                    time_limit,
                    members["users"],
                    members["groups"],
                    gpu_lending_limit=None if lending is None else float(lending),
                    **{field: None if value is None else float(value) for field, value in resource_amounts.items()},
                    pod_security=pod_security,
                    resource_quota=ceilings,
                )
            )
    return declared


def _with_tenancy(project: ProjectDeclaration, tenancy: isolation.TenancySettings) -> ProjectDeclaration:
    """The project with its boundary resolved: its Pod Security level (privileged by exception, its
    own, else the site's), the site's NetworkPolicy settings, a ``shared`` exception, and its
    ceilings (the site's, changed by its own)."""
    return dataclasses.replace(
        project,
        pod_security=tenancy.pod_security_of(project.name, project.pod_security),
        network_isolation=tenancy.network_isolation,
        ingress_namespaces=list(tenancy.ingress_namespaces),
        ingress_from_all_projects=tenancy.allows(project.name, "shared") is not None,
        resource_quota=dict(resource_quota.resolved(tenancy.resource_quota, project.resource_quota)),
    )


def _check_amounts(check: _Checker, where: str, fields: Mapping[str, Any], rule_errors: Mapping[str, Any]) -> None:
    """Bounds beyond the project rules (tenancy/projects.py): GPUs in hundredths up to
    MAX_PROJECT_GPUS, CPU cores in thousandths and memory GiB in MiB up to their bounds, a weight
    up to MAX_WEIGHT, a time limit that fits Kubernetes' int32."""
    for field in ("gpu_quota", "gpu_limit", "gpu_lending_limit"):
        value = fields.get(field)
        if field in rule_errors or not _is_number(value):
            continue
        if value > MAX_PROJECT_GPUS or not _in_hundredths(value):
            check.error(where, field, "a number of GPUs of at most %d, in hundredths" % MAX_PROJECT_GPUS, value)
    for field in projects.RESOURCE_FIELDS:
        value = fields.get(field)
        if field in rule_errors or not _is_number(value):
            continue
        resource = field.split("_")[0]
        steps = RESOURCE_STEPS[resource]
        most = MAX_PROJECT_CPU_CORES if resource == "cpu" else MAX_PROJECT_MEMORY_GIB
        if value > most or not _in_steps(value, steps):
            expected = (
                "a number of CPU cores of at most %d, in thousandths (millicpus)" % most
                if resource == "cpu"
                else "a number of GiB of at most %d, in MiB (multiples of 1/1024)" % most
            )
            check.error(where, field, expected, value)
    weight = fields.get("over_quota_weight")
    if "over_quota_weight" not in rule_errors and _is_number(weight) and weight > MAX_WEIGHT:
        check.error(where, "over_quota_weight", "a non-negative number of at most %d" % MAX_WEIGHT, weight)
    time_limit = fields.get("interactive_time_limit_seconds")
    if "interactive_time_limit_seconds" not in rule_errors and _is_int(time_limit) and time_limit > INT32_MAX:
        check.error(
            where, "interactive_time_limit_seconds", "a whole number of seconds of at most %d" % INT32_MAX, time_limit
        )


def _check_affinity(
    check: _Checker, where: str, value: Any, node_names: set[str], faulty_nodes: set[str]
) -> dict[str, list[str]]:
    affinity: dict[str, list[str]] = {"training": [], "interactive": []}
    if value is None:
        return affinity
    if not isinstance(value, Mapping):
        check.error(where, "node_affinity", "a mapping with training and/or interactive node lists", value)
        return affinity
    for key in sorted(set(value) - set(affinity), key=str):
        check.errors.append(
            InventoryError(where, "node_affinity.%s" % key, "training or interactive", "an unknown key")
        )
    for kind in affinity:
        nodes = value.get(kind) or []
        if not isinstance(nodes, list):
            check.error(where, "node_affinity.%s" % kind, "a list of node names", nodes)
            continue
        for node in nodes:
            if isinstance(node, str) and node in faulty_nodes:
                continue  # its host's own error says what is wrong with it
            if not isinstance(node, str) or node not in node_names:
                declared = sorted(node_names)
                shown = ", ".join(declared[:10]) + (", ..." if len(declared) > 10 else "")
                expected = "a GPU node of this inventory (%s)" % (shown or "none is declared without errors")
                check.error(where, "node_affinity.%s" % kind, expected, node)
        affinity[kind] = [str(node) for node in nodes]
    return affinity


def _bounded(
    check: _Checker, site_host: str, gpu_hosts: list[str], hostvars: Mapping[str, Mapping[str, Any]]
) -> dict[str, Mapping[str, Any]]:
    """``hostvars`` without the variables the schema reads whose value, its shared references
    (YAML aliases) expanded, exceeds ``bounds.MAX_VALUES``; each of those is an error. What is left
    can be walked, shown and templated in time proportional to what the admin wrote."""
    memo: dict[int, int] = {}
    checked = {host: dict(variables) for host, variables in hostvars.items()}
    readers = [(site_host, "group all", ("clusterproof_",))]
    readers += [(host, f"host {host}", OUR_HOST_PREFIXES) for host in gpu_hosts if host in checked]
    for host, where, prefixes in readers:
        variables = checked[host]
        for key in sorted(key for key in variables if isinstance(key, str) and key.startswith(prefixes)):
            if bounds.expanded_size(variables[key], bounds.MAX_VALUES, memo) > bounds.MAX_VALUES:
                expected = "at most %d values (YAML aliases expanded)" % bounds.MAX_VALUES
                check.errors.append(InventoryError(where, key, expected, "more than %d" % bounds.MAX_VALUES))
                del variables[key]
    return checked


def _check_site_settings(check: _Checker, site: Mapping[str, Any]) -> None:
    """The settings the playbooks read beside the declaration: booleans, paths, the port base."""
    for field in SITE_BOOLEANS:
        value = site.get(field)
        if value is not None and not isinstance(value, bool) and str(value).lower() not in BOOLEAN_WORDS:
            check.error("group all", field, "a boolean (true or false)", value)
    for field, least in SITE_COUNTS.items():
        value = site.get(field)
        if value is not None:
            # A -e key=value gives a string: digits are the number they spell.
            number = int(value) if isinstance(value, str) and value.strip().isdigit() else value
            (check.non_negative_int if least == 0 else check.positive_int)("group all", field, number)
    for field in SITE_STRINGS:
        value = site.get(field)
        if value is not None and not isinstance(value, str):
            check.error("group all", field, "a path (a string)", value)
    for field, problem in SITE_JUDGED.items():
        if field in site:
            expected = problem(site[field])
            if expected:
                check.error("group all", field, expected, site[field])
    if "clusterproof_monitoring_rule_labels" in site:
        for field, expected, found in monitoring_settings.label_problems(
            site["clusterproof_monitoring_rule_labels"], "clusterproof_monitoring_rule_labels"
        ):
            check.error("group all", field, expected, found)
    kubeconfig = site.get("clusterproof_kubeconfig")
    if kubeconfig is not None and not isinstance(kubeconfig, str):
        check.error("group all", "clusterproof_kubeconfig", "a path (a string)", kubeconfig)
    if "clusterproof_sandbox_port_base" in site:
        value = site["clusterproof_sandbox_port_base"]
        # -e clusterproof_sandbox_port_base=17000 arrives as a string of digits.
        base = int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else value
        if not (_is_int(base) and PORT_MIN <= base <= PORT_BASE_MAX):
            expected = "an integer from %d to %d (the sandbox takes %d ports from it)" % (
                PORT_MIN,
                PORT_BASE_MAX,
                SANDBOX_PORTS,
            )
            check.error("group all", "clusterproof_sandbox_port_base", expected, value)


def validate_site(
    groups: Mapping[str, Iterable[str]], hostvars: Mapping[str, Mapping[str, Any]]
) -> tuple[SiteDeclaration | None, list[InventoryError]]:
    """Check the inventory and return what it declares, or every error found.

    ``groups`` is Ansible's ``groups`` (group name -> host names), ``hostvars`` maps each host to
    its variables. Site-wide ``clusterproof_*`` variables are read from the first control-plane
    host; every host is checked for unknown variables of the recognised prefixes.
    """
    check = _Checker()
    for group in REQUIRED_GROUPS:
        if group not in groups:
            check.error("inventory", f"group {group}", f"a group named {group}", None)
        elif not list(groups[group]):
            check.errors.append(InventoryError(f"group {group}", "hosts", "at least one host", "an empty group"))
    if check.errors:
        return None, check.errors
    control_plane = list(groups["kube_control_plane"])
    simulated_hosts = list(groups.get(SIMULATED_GROUP, ()))
    hostvars = _bounded(check, control_plane[0], list(groups["gpu_nodes"]) + simulated_hosts, hostvars)
    site = hostvars[control_plane[0]]
    _check_site_settings(check, site)
    for host in sorted(set(hostvars)):
        check.unknown_keys(
            f"host {host}", hostvars[host].keys(), {**SITE_VARIABLES, **NODE_VARIABLES}, ("clusterproof_",)
        )

    site_name = check.text(
        "group all", "clusterproof_site_name", site.get("clusterproof_site_name"), _DNS_LABEL, "a lower-case DNS label"
    )
    mode = site.get("clusterproof_cluster_mode", "sandbox")
    if mode not in CLUSTER_MODES:
        check.error("group all", "clusterproof_cluster_mode", "one of {}".format(", ".join(CLUSTER_MODES)), mode)
    scheduler = site.get("clusterproof_scheduler", registry.DEFAULT)
    if scheduler not in schedulers():
        check.error("group all", "clusterproof_scheduler", "one of %s" % ", ".join(schedulers()), scheduler)
    kubeconfig = site.get("clusterproof_kubeconfig")
    kubernetes = None
    if mode == "kubeadm":
        kubernetes, kubeadm_errors = kubeadm_config.check_settings(site, groups)
        for field, expected, value in kubeadm_errors:
            check.error("group all", field, expected, value)
        addresses = {host: variables.get("ansible_host", host) for host, variables in hostvars.items()}
        for where, field, expected, value in kubeadm_config.check_host_addresses(kubernetes, addresses):
            check.error(where, field, expected, value)
    if mode == "existing" and not isinstance(kubeconfig, str):
        check.error(
            "group all", "clusterproof_kubeconfig", "the path of the cluster's kubeconfig (mode existing)", kubeconfig
        )

    nodes: list[NodeDeclaration] = []
    by_name: dict[str, str] = {}
    # Hosts (and the node names they give) whose declaration has errors: a project's affinity
    # that names one is not reported again.
    faulty: set[str] = set()
    if simulated_hosts and mode not in SIMULATED_MODES:
        check.error(
            "group %s" % SIMULATED_GROUP,
            "hosts",
            "no simulated nodes beside mode %s (only with mode %s)" % (mode, " or ".join(SIMULATED_MODES)),
            ", ".join(simulated_hosts),
        )
    real_hosts = set(groups["gpu_nodes"])
    for host in simulated_hosts:
        if host in real_hosts:
            expected = "a host of gpu_nodes or of %s, not of both" % SIMULATED_GROUP
            check.error(f"host {host}", "groups", expected, "both")
    declared_hosts = list(groups["gpu_nodes"]) + [host for host in simulated_hosts if host not in real_hosts]
    for host in declared_hosts:
        node = _check_node(check, host, hostvars[host], simulated=host not in real_hosts)
        if node is None:
            faulty.add(host)
            name = hostvars[host].get("node_name")
            if isinstance(name, str):
                faulty.add(name)
            continue
        if node.name in by_name:
            check.error(
                f"host {host}",
                "node_name",
                "a node name no other host uses",
                f"{node.name}, also used by host {by_name[node.name]}",
            )
            continue
        by_name[node.name] = host
        nodes.append(node)
    declared_projects = _check_projects(check, site.get("clusterproof_projects"), set(by_name), faulty - set(by_name))
    lends_quota = scheduler in registry.lenders()
    for project in declared_projects:
        lending_only = {"gpu_lending_limit": project.gpu_lending_limit}
        for problem in projects.problems(lending_only, None if lends_quota else registry.lenders()):
            check.error(f"project {project.name}", problem.field, problem.expected, problem.found)
    # CPU and memory quotas are written on KAI's queues only: another engine would ignore them.
    takers = tuple(name for name in registry.names() if registry.backend(name).cpu_memory_quotas)
    if scheduler not in takers:
        for project in declared_projects:
            for field in projects.RESOURCE_FIELDS:
                value = getattr(project, field)
                if value is not None:
                    expected = "no %s with clusterproof_scheduler %s: CPU and memory quotas are for %s only" % (
                        field,
                        scheduler,
                        " or ".join(takers),
                    )
                    check.error(f"project {project.name}", field, expected, value)
    tenancy, tenancy_problems = isolation.check_settings(
        site.get("clusterproof_tenancy"), [project.name for project in declared_projects]
    )
    for where, problem in tenancy_problems:
        check.error(where, problem.field, problem.expected, problem.found)
    declared_projects = [_with_tenancy(project, tenancy) for project in declared_projects]
    storage_classes, storage_problems = storage.check_storage_classes(site.get("clusterproof_storage_classes"), site)
    check.errors.extend(InventoryError(*problem) for problem in storage_problems)
    device_layer, layer_errors = gpu_device_layer.check_declaration(site, str(mode))
    for error in layer_errors:
        check.error("group all", error.field, error.expected, error.found)
    tree, tree_problems = quota_tree.check_tree(site.get("clusterproof_quota_tree"))
    for problem in tree_problems:
        check.error(problem.where, problem.field, problem.expected, problem.found)
    project_names = {project.name for project in declared_projects}
    for node in tree:
        clash = sorted(project_names & ({node.name} | set(node.namespaces)))
        if clash:
            expected = "names no project uses (a project is a queue and a namespace of its own)"
            check.error("quota tree node %s" % node.name, "name/namespaces", expected, ", ".join(clash))
    if tree and scheduler == registry.NONE:
        expected = "a scheduler that enforces it (%s)" % " or ".join(registry.names())
        check.error("group all", "clusterproof_quota_tree", expected, "scheduler none")
    if check.errors:
        return None, check.errors

    warnings = []
    quota_sum = sum(project.gpu_quota for project in declared_projects)
    total = sum(node.gpu_count for node in nodes)
    if quota_sum > total:
        warnings.append(
            "project quotas sum to %g GPUs, more than the %d GPUs the inventory declares; "
            "the documents advise that quotas sum to the cluster's GPUs" % (quota_sum, total)
        )
    assert site_name is not None
    return (
        SiteDeclaration(
            site_name,
            str(mode),
            None if kubeconfig is None else str(kubeconfig),
            nodes,
            declared_projects,
            warnings,
            str(scheduler),
            kubernetes,
            storage_classes=storage_classes,
            device_layer=device_layer,
            quota_tree=tree,
            tenancy=tenancy,
        ),
        [],
    )
