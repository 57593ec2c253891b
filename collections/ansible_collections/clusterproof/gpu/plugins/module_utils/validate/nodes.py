"""Compare the GPU nodes a site declares with the Nodes its Kubernetes cluster reports.

Pure logic: the declared nodes come from the inventory, the observed ones are Node objects as the
API's JSON (``metadata.name``, ``metadata.labels``, ``status.allocatable``, ``status.conditions``).
Nothing here talks to a cluster; ``kube.list_nodes`` supplies the input and the report renders the
output.

The checks are the NetApp validation's "the GPU total the cluster reports equals the expected
number, and every GPU node is listed", made per node so that a failure names the node:

* ``<node>/present``: a Node of that name exists;
* ``<node>/ready``: its ``Ready`` condition is ``True``;
* ``<node>/gpu-count``: allocatable ``nvidia.com/gpu`` equals the declared ``gpu_count``;
* ``<node>/gpu-product``: label ``nvidia.com/gpu.product`` equals ``gpu_product`` (when declared);
* ``<node>/gpu-memory``: label ``nvidia.com/gpu.memory`` equals ``gpu_memory_mib`` (when declared);
* ``<node>/labels``: every declared label has the declared value (when any are declared);
* ``cluster/gpu-total``: the cluster's total allocatable GPUs equal the sum declared;
* ``cluster/undeclared-gpu-nodes``: a warning (never a failure) for GPU nodes nobody declared.

With time-slicing (the device layer's ``time_slicing`` for ``nvidia.com/gpu``) each GPU is
advertised ``replicas`` times, so the expected allocatable count is ``gpu_count`` × ``replicas``.

``cpu_cores`` and ``memory_gib`` are accepted but not compared: a Node's capacity is what the
kernel leaves after firmware reservations, so it never equals the nominal figure exactly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check

GPU_RESOURCE = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"
SECTION_ID = "gpu-nodes"
SECTION_TITLE = "GPU nodes"

# How many names a message lists before it says "and N more": a 1,000-node site stays readable.
_NAMES_IN_MESSAGE = 20


@dataclasses.dataclass(frozen=True)
class DeclaredNode:
    """One GPU node as the inventory declares it."""

    name: str
    gpu_count: int
    gpu_product: str | None = None
    gpu_memory_mib: int | None = None
    cpu_cores: int | None = None
    memory_gib: int | None = None
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeclaredNode:
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"a declared GPU node has no name: {dict(data)!r}")
        gpu_count = data.get("gpu_count")
        if isinstance(gpu_count, bool) or not isinstance(gpu_count, int) or gpu_count < 0:
            raise ValueError(f"declared GPU node {name}: gpu_count must be a whole number >= 0, got {gpu_count!r}")
        memory = data.get("gpu_memory_mib")
        if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int)):
            raise ValueError(f"declared GPU node {name}: gpu_memory_mib must be a whole number, got {memory!r}")
        labels = data.get("labels") or {}
        if not isinstance(labels, Mapping):
            raise ValueError(f"declared GPU node {name}: labels must be a mapping, got {labels!r}")
        return cls(
            name=name,
            gpu_count=gpu_count,
            gpu_product=data.get("gpu_product") or None,
            gpu_memory_mib=memory,
            cpu_cores=data.get("cpu_cores"),
            memory_gib=data.get("memory_gib"),
            labels={str(key): str(value) for key, value in labels.items()},
        )


@dataclasses.dataclass(frozen=True)
class ObservedNode:
    """What the cluster says about one Node, reduced to what the checks need."""

    name: str
    labels: Mapping[str, str]
    allocatable_gpus: int
    allocatable_raw: str | None  # the API's string, kept for messages when it is not a whole number
    ready: bool
    ready_detail: str

    @classmethod
    def from_api(cls, node: Mapping[str, Any]) -> ObservedNode:
        metadata = node.get("metadata") or {}
        status = node.get("status") or {}
        raw = (status.get("allocatable") or {}).get(GPU_RESOURCE)
        ready, ready_detail = _ready(status.get("conditions") or ())
        return cls(
            name=str(metadata.get("name", "")),
            labels=metadata.get("labels") or {},
            allocatable_gpus=_whole_gpus(raw),
            allocatable_raw=None if raw is None else str(raw),
            ready=ready,
            ready_detail=ready_detail,
        )


@dataclasses.dataclass(frozen=True)
class NodeRow:
    """One row of the per-node table: declared against found."""

    name: str
    declared: bool
    present: bool
    declared_gpus: int | None
    found_gpus: int | None
    declared_product: str | None
    found_product: str | None
    ready: bool | None
    status: str  # "pass", "fail" (a check on this node failed) or "warn" (the node is not declared)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class NodeValidation:
    """The outcome: every check, in a stable order, and the table rows."""

    checks: list[Check]
    node_table: list[NodeRow]

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if check.status == "fail"]

    def section_dict(self) -> dict[str, Any]:
        """The report section as data, the shape ``site_report`` accepts."""
        return {
            "id": SECTION_ID,
            "title": SECTION_TITLE,
            "checks": [check.to_dict() for check in self.checks],
            "node_table": [row.to_dict() for row in self.node_table],
        }


def advertised_per_gpu(device_layer: Mapping[str, Any] | None) -> int:
    """How many allocatable ``nvidia.com/gpu`` each physical GPU shows: its time-slicing replicas
    when the device layer (the checked inventory's ``device_layer``) time-slices whole GPUs, else 1."""
    sharing = (device_layer or {}).get("time_slicing") or {}
    if GPU_RESOURCE in (sharing.get("resources") or ()):
        return int(sharing.get("replicas") or 1)
    return 1


def validate_gpu_nodes(
    declared: Iterable[Mapping[str, Any] | DeclaredNode],
    observed: Iterable[Mapping[str, Any]],
    replicas_per_gpu: int = 1,
) -> NodeValidation:
    """Check every declared GPU node against the cluster's Nodes, and the cluster's GPU total.
    ``replicas_per_gpu``: how many times the device layer advertises each GPU (time-slicing)."""
    declared_nodes = [item if isinstance(item, DeclaredNode) else DeclaredNode.from_dict(item) for item in declared]
    if replicas_per_gpu != 1:
        declared_nodes = [
            dataclasses.replace(node, gpu_count=node.gpu_count * replicas_per_gpu) for node in declared_nodes
        ]
    _refuse_duplicates(declared_nodes)
    observed_nodes = [ObservedNode.from_api(node) for node in observed]
    by_name = {node.name: node for node in observed_nodes}

    checks: list[Check] = []
    rows: list[NodeRow] = []
    for want in declared_nodes:
        node_checks = _node_checks(want, by_name.get(want.name))
        checks.extend(node_checks)
        found = by_name.get(want.name)
        rows.append(
            NodeRow(
                name=want.name,
                declared=True,
                present=found is not None,
                declared_gpus=want.gpu_count,
                found_gpus=None if found is None else found.allocatable_gpus,
                declared_product=want.gpu_product,
                found_product=None if found is None else found.labels.get(PRODUCT_LABEL),
                ready=None if found is None else found.ready,
                status="fail" if any(check.status == "fail" for check in node_checks) else "pass",
            )
        )

    declared_names = {node.name for node in declared_nodes}
    undeclared = [node for node in observed_nodes if node.name not in declared_names and _is_gpu_node(node)]
    for node in undeclared:
        rows.append(
            NodeRow(
                name=node.name,
                declared=False,
                present=True,
                declared_gpus=None,
                found_gpus=node.allocatable_gpus,
                declared_product=None,
                found_product=node.labels.get(PRODUCT_LABEL),
                ready=node.ready,
                status="warn",
            )
        )
    checks.append(_total_check(declared_nodes, observed_nodes, by_name))
    checks.append(_undeclared_check(undeclared))
    return NodeValidation(checks=checks, node_table=rows)


def _node_checks(want: DeclaredNode, found: ObservedNode | None) -> list[Check]:
    prefix = f"{SECTION_ID}/{want.name}"
    wanted = [("ready", f"{want.name} is Ready")]
    wanted.append(("gpu-count", f"{want.name} has {want.gpu_count} allocatable GPUs"))
    if want.gpu_product:
        wanted.append(("gpu-product", f"{want.name} GPU product is {want.gpu_product}"))
    if want.gpu_memory_mib is not None:
        wanted.append(("gpu-memory", f"{want.name} GPU memory is {want.gpu_memory_mib} MiB"))
    if want.labels:
        wanted.append(("labels", f"{want.name} carries its declared labels"))

    # The one check that says whether the node is there at all; every other check needs it.
    present = {
        "id": prefix + "/present",
        "title": f"{want.name} is in the cluster",
        "expected": f"a Node named {want.name}",
    }
    if found is None:
        checks = [
            Check(
                **present,
                status="fail",
                observed="no Node of that name",
                message=(
                    f"declared GPU node {want.name} is not in the cluster: expected a Node named {want.name}, "
                    "found none. Look at `kubectl get nodes` (is the inventory name the Kubernetes node name?) and at "
                    "the kubelet log on the host (journalctl -u kubelet)."
                ),
            )
        ]
        for suffix, title in wanted:
            checks.append(
                Check(
                    id=f"{prefix}/{suffix}",
                    title=title,
                    status="skip",
                    message=f"skipped: node {want.name} is not in the cluster",
                )
            )
        return checks

    checks = [
        Check(**present, status="pass", observed="found"),
        _ready_check(prefix, wanted[0][1], want, found),
        _count_check(prefix, wanted[1][1], want, found),
    ]
    titles = dict(wanted)
    if want.gpu_product:
        checks.append(_product_check(prefix, titles["gpu-product"], want, found))
    if want.gpu_memory_mib is not None:
        checks.append(_memory_check(prefix, titles["gpu-memory"], want, found))
    if want.labels:
        checks.append(_labels_check(prefix, titles["labels"], want, found))
    return checks


def _ready_check(prefix: str, title: str, want: DeclaredNode, found: ObservedNode) -> Check:
    if found.ready:
        return Check(id=prefix + "/ready", title=title, status="pass", expected="Ready=True", observed="Ready=True")
    return Check(
        id=prefix + "/ready",
        title=title,
        status="fail",
        expected="Ready=True",
        observed=found.ready_detail,
        message=(
            f"node {want.name} is not Ready: expected condition Ready=True, found {found.ready_detail}. "
            f"Look at the Conditions in `kubectl describe node {want.name}` and at the kubelet log on the host."
        ),
    )


def _count_check(prefix: str, title: str, want: DeclaredNode, found: ObservedNode) -> Check:
    observed: int | str = found.allocatable_gpus
    if found.allocatable_raw is None:
        shown = f"no {GPU_RESOURCE} in allocatable"
    elif str(found.allocatable_gpus) != found.allocatable_raw.strip():
        observed = found.allocatable_raw
        shown = f"{found.allocatable_raw!r} (not a whole number of GPUs)"
    else:
        shown = str(found.allocatable_gpus)
    if observed == want.gpu_count:
        return Check(id=prefix + "/gpu-count", title=title, status="pass", expected=want.gpu_count, observed=observed)
    return Check(
        id=prefix + "/gpu-count",
        title=title,
        status="fail",
        expected=want.gpu_count,
        observed=observed,
        message=(
            f"node {want.name}: expected {want.gpu_count} allocatable {GPU_RESOURCE}, found {shown}. Allocatable "
            f"GPUs come from the NVIDIA device plugin: look at the device plugin / GPU operator pod on {want.name} "
            f"(`kubectl get pods -A -o wide --field-selector spec.nodeName={want.name}`) and at `nvidia-smi` on "
            "the host."
        ),
    )


def _product_check(prefix: str, title: str, want: DeclaredNode, found: ObservedNode) -> Check:
    value = found.labels.get(PRODUCT_LABEL)
    return _label_check(prefix + "/gpu-product", title, want.name, PRODUCT_LABEL, want.gpu_product, value)


def _memory_check(prefix: str, title: str, want: DeclaredNode, found: ObservedNode) -> Check:
    value = found.labels.get(MEMORY_LABEL)
    expected = str(want.gpu_memory_mib)
    # Compare as numbers, so that "032768" or " 32768" are not reported as a mismatch.
    if value is not None and _as_int(value) == want.gpu_memory_mib:
        value = expected
    return _label_check(prefix + "/gpu-memory", title, want.name, MEMORY_LABEL, expected, value)


def _label_check(check_id: str, title: str, node: str, label: str, expected: Any, value: str | None) -> Check:
    if value == expected:
        return Check(id=check_id, title=title, status="pass", expected=expected, observed=value)
    shown = "no such label" if value is None else repr(value)
    return Check(
        id=check_id,
        title=title,
        status="fail",
        expected=expected,
        observed=value,
        message=(
            f"node {node}: expected label {label}={expected}, found {shown}. GPU labels are set by GPU feature "
            f"discovery: look at `kubectl get node {node} --show-labels` and at the gpu-feature-discovery pod on "
            "that node."
        ),
    )


def _labels_check(prefix: str, title: str, want: DeclaredNode, found: ObservedNode) -> Check:
    wrong = {key: found.labels.get(key) for key, value in sorted(want.labels.items()) if found.labels.get(key) != value}
    expected = dict(sorted(want.labels.items()))
    observed = {key: found.labels.get(key) for key in expected}
    if not wrong:
        return Check(id=prefix + "/labels", title=title, status="pass", expected=expected, observed=observed)
    details = ", ".join(
        f"{key} expected {want.labels[key]!r} found {'no such label' if value is None else repr(value)}"
        for key, value in wrong.items()
    )
    return Check(
        id=prefix + "/labels",
        title=title,
        status="fail",
        expected=expected,
        observed=observed,
        message=(
            f"node {want.name}: labels differ from the inventory: {details}. Look at "
            f"`kubectl get node {want.name} --show-labels` and at the inventory's labels for this node."
        ),
    )


def _total_check(
    declared: list[DeclaredNode], observed: list[ObservedNode], by_name: Mapping[str, ObservedNode]
) -> Check:
    expected = sum(node.gpu_count for node in declared)
    found = sum(node.allocatable_gpus for node in observed)
    title = f"cluster reports {expected} allocatable GPUs in all"
    if found == expected:
        return Check(id="cluster/gpu-total", title=title, status="pass", expected=expected, observed=found)
    differences = []
    for want in declared:
        node = by_name.get(want.name)
        have = 0 if node is None else node.allocatable_gpus
        if have != want.gpu_count:
            differences.append(f"{want.name} {have} of {want.gpu_count}")
    declared_names = {node.name for node in declared}
    for node in observed:
        if node.name not in declared_names and node.allocatable_gpus:
            differences.append(f"{node.name} {node.allocatable_gpus} undeclared")
    return Check(
        id="cluster/gpu-total",
        title=title,
        status="fail",
        expected=expected,
        observed=found,
        message=(
            f"expected {expected} allocatable {GPU_RESOURCE} in the cluster (the sum the inventory declares), "
            f"found {found}. Nodes that differ: {_some(differences) or 'none'}. Look at the per-node checks above "
            "and at `kubectl describe nodes`."
        ),
    )


def _undeclared_check(undeclared: list[ObservedNode]) -> Check:
    title = "no GPU nodes outside the inventory"
    if not undeclared:
        return Check(id="cluster/undeclared-gpu-nodes", title=title, status="pass", expected=[], observed=[])
    names = [node.name for node in undeclared]
    return Check(
        id="cluster/undeclared-gpu-nodes",
        title=title,
        status="warn",
        expected=[],
        observed=names,
        message=(
            f"{len(names)} GPU node(s) are in the cluster but not in the inventory: {_some(names)}. They are not "
            "validated; add them to the inventory's gpu_nodes group if they belong to this site."
        ),
    )


def _refuse_duplicates(nodes: list[DeclaredNode]) -> None:
    seen: set[str] = set()
    duplicates: set[str] = set()
    for node in nodes:
        if node.name in seen:
            duplicates.add(node.name)
        seen.add(node.name)
    if duplicates:
        raise ValueError("GPU nodes declared more than once: " + ", ".join(sorted(duplicates)))


def _is_gpu_node(node: ObservedNode) -> bool:
    return node.allocatable_gpus > 0 or (node.allocatable_raw not in (None, "0")) or PRODUCT_LABEL in node.labels


def _ready(conditions: Iterable[Mapping[str, Any]]) -> tuple[bool, str]:
    for condition in conditions:
        if condition.get("type") == "Ready":
            status = condition.get("status")
            if status == "True":
                return True, "Ready=True"
            detail = f"Ready={status}"
            extra = "; ".join(str(condition[key]) for key in ("reason", "message") if condition.get(key))
            return False, detail + (f" ({extra})" if extra else "")
    return False, "no Ready condition"


def _whole_gpus(raw: Any) -> int:
    """Allocatable GPUs as a whole number; anything unreadable counts as none."""
    value = _as_int(raw)
    return value if value is not None and value > 0 else 0


def _as_int(raw: Any) -> int | None:
    if raw is None or isinstance(raw, bool):
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        return None


def _some(names: list[str]) -> str:
    if len(names) <= _NAMES_IN_MESSAGE:
        return ", ".join(names)
    return f"{', '.join(names[:_NAMES_IN_MESSAGE])} and {len(names) - _NAMES_IN_MESSAGE} more"
