"""Compare the GPU nodes a site declares with the Nodes its Kubernetes cluster reports.

Pure logic: the declared nodes come from the inventory, the observed ones are Node objects as the
API's JSON (``metadata.name``, ``metadata.labels``, ``status.allocatable``, ``status.conditions``),
and the ResourceSlices of NVIDIA's DRA driver as the API's JSON. Nothing here talks to a cluster;
``kube.list_nodes`` and ``kube.list_resource_slices`` supply the input and the report renders the
output.

The checks are the NetApp validation's "the GPU total the cluster reports equals the expected
number, and every GPU node is listed", made per node so that a failure names the node:

* ``<node>/present``: a Node of that name exists;
* ``<node>/ready``: its ``Ready`` condition is ``True``;
* ``<node>/gpu-count``: the node's GPUs equal the declared ``gpu_count``, counted from the device
  plugin (allocatable ``nvidia.com/gpu``) or from dynamic resource allocation (see below), and the
  message says which;
* ``<node>/gpu-product``: label ``nvidia.com/gpu.product`` equals ``gpu_product`` (when declared);
* ``<node>/gpu-memory``: label ``nvidia.com/gpu.memory`` equals ``gpu_memory_mib`` (when declared);
* ``<node>/labels``: every declared label has the declared value (when any are declared);
* ``cluster/gpu-total``: the cluster's total allocatable GPUs equal the sum declared;
* ``cluster/undeclared-gpu-nodes``: a warning (never a failure) for GPU nodes nobody declared;
* ``cluster/node-pressure``: no Node of the cluster, GPU node or not, reports memory, disk or process
  pressure: while it lasts its kubelet evicts pods and the scheduler keeps new ones off it, so
  what the other checks prove does not hold for long.

With time-slicing (the device layer's ``time_slicing`` for ``nvidia.com/gpu``) each GPU is
advertised ``replicas`` times, so the expected allocatable count is ``gpu_count`` × ``replicas``.

**Two sources of a node's GPU count.** Kubernetes 1.34+ allocates GPUs through dynamic resource
allocation (DRA) when NVIDIA's DRA driver is installed instead of the device plugin: the node's
allocatable then has no ``nvidia.com/gpu``, and its GPUs are devices in ResourceSlices of the
driver ``gpu.nvidia.com`` whose ``spec.nodeName`` is the node (:func:`dra_gpus_by_node`). Each
node's count comes from one source, named in the check's message and the table's ``gpu_source``:

* preference ``device_plugin`` (the default): the device plugin's count when it reports any GPUs,
  else DRA's; preference ``dra``: DRA's when it reports any whole GPUs, else the device plugin's.
  A node that reports neither has source ``none`` and count 0.
* a node where both report GPUs is judged by the preferred source, and the message says that both
  do (the two would hand out the same GPUs twice; NVIDIA supports one or the other per cluster).
* DRA publishes each whole GPU once (its sharing is per claim), so time-slicing replicas multiply
  only the device plugin's expected count.

``cpu_cores`` and ``memory_gib`` are accepted but not compared: a Node's capacity is what the
kernel leaves after firmware reservations, so it never equals the nominal figure exactly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check

GPU_RESOURCE = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"
SECTION_ID = "gpu-nodes"
# NVIDIA's DRA driver for GPUs: the ResourceSlice ``spec.driver`` it publishes under, and the value
# of its ``type`` device attribute for a whole GPU ("mig" for a MIG device, "vfio" for a GPU bound
# for passthrough: neither is a GPU the node's pods can have whole).
DRA_GPU_DRIVER = "gpu.nvidia.com"
DRA_WHOLE_GPU_TYPE = "gpu"
# The kubelet's conditions that say it is short of something and evicting (True is the bad value).
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")
# Where a node's GPU count came from (the node table's ``gpu_source``).
SOURCE_DEVICE_PLUGIN = "device-plugin"
SOURCE_DRA = "dra"
SOURCE_NONE = "none"
# Which source judges a node that reports GPUs through both (the module's gpu_count_preference).
PREFERENCES = {"device_plugin": SOURCE_DEVICE_PLUGIN, "dra": SOURCE_DRA}
SOURCE_WORDS = {
    SOURCE_DEVICE_PLUGIN: f"the device plugin (allocatable {GPU_RESOURCE})",
    SOURCE_DRA: "dynamic resource allocation (ResourceSlices)",
    SOURCE_NONE: "neither the device plugin nor dynamic resource allocation",
}
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
    # A KWOK node a test bed without GPUs attaches (inventory group simulated_gpu_nodes): every
    # check of it says so, so no reader takes its GPUs for hardware.
    simulated: bool = False

    @property
    def shown(self) -> str:
        """The node as the report's titles name it."""
        return f"{self.name} (simulated)" if self.simulated else self.name

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
            simulated=bool(data.get("simulated", False)),
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
    kubelet: str = ""  # the kubelet's version (status.nodeInfo), which an upgrade moves
    pressures: tuple[str, ...] = ()  # each pressure condition that is True, with the kubelet's message

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
            kubelet=str((status.get("nodeInfo") or {}).get("kubeletVersion") or ""),
            pressures=_pressures(status.get("conditions") or ()),
        )


@dataclasses.dataclass
class DraPool:
    """One pool of the GPU driver's ResourceSlices on one node, at the pool's newest generation."""

    name: str
    generation: int
    slices_expected: int  # the pool's resourceSliceCount at that generation
    slices_seen: int = 0
    whole_gpus: int = 0
    other_devices: dict[str, int] = dataclasses.field(default_factory=dict)  # by device type: mig, vfio...
    products: set[str] = dataclasses.field(default_factory=set)

    @property
    def complete(self) -> bool:
        return self.slices_seen >= self.slices_expected

    def describe(self) -> str:
        parts = [f"pool {self.name} generation {self.generation}: {self.whole_gpus} whole GPUs"]
        if self.products:
            parts[0] += " (" + ", ".join(sorted(self.products)) + ")"
        parts += [f"{count} {kind} devices" for kind, count in sorted(self.other_devices.items())]
        shown = ", ".join(parts)
        if not self.complete:
            shown += (
                f"; incomplete: {self.slices_seen} of {self.slices_expected} ResourceSlices (the driver is still "
                "publishing the pool, or a slice was lost; the API tells consumers to wait for a complete pool)"
            )
        return shown


@dataclasses.dataclass(frozen=True)
class DraGpus:
    """What dynamic resource allocation says about one node's GPUs: its pools of the GPU driver."""

    pools: tuple[DraPool, ...]

    @property
    def whole_gpus(self) -> int:
        return sum(pool.whole_gpus for pool in self.pools)

    @property
    def products(self) -> list[str]:
        return sorted(set().union(*(pool.products for pool in self.pools)))

    def describe(self) -> str:
        return "; ".join(pool.describe() for pool in self.pools)


def dra_gpus_by_node(slices: Iterable[Mapping[str, Any]], driver: str = DRA_GPU_DRIVER) -> dict[str, DraGpus]:
    """The whole GPUs each node has in the ResourceSlices (``resource.k8s.io/v1``, as the API's JSON)
    of the DRA ``driver``, by node name. Pure; linear in the slices and their devices.

    Read as the API defines a pool (ResourcePool: "Consumers of ResourceSlices should only consider
    resources from the pool with the highest generation number"; ``resourceSliceCount`` "is the total
    number of ResourceSlices in the pool at this generation", so fewer slices seen means the pool is
    incomplete), and as NVIDIA's driver publishes (kubernetes-sigs/dra-driver-nvidia-gpu,
    cmd/gpu-kubelet-plugin: ``driver.go`` names the pool after the node and, with dynamic MIG,
    publishes one slice per GPU (the whole GPU and its MIG partitions), plus one slice of shared
    counters alone on Kubernetes 1.35+; ``deviceinfo.go``
    gives each device the attributes ``type`` ("gpu" for a whole GPU; "mig" and "vfio" for the
    others), ``uuid`` and ``productName``, unqualified, so in the driver's own domain):

    * only slices of ``driver`` with a ``spec.nodeName`` count (a pool published for a node
      selector or all nodes is no one node's);
    * per pool, only the slices of its newest ``spec.pool.generation``; a pool with fewer of them
      than its ``resourceSliceCount`` is counted as seen and marked incomplete;
    * a device counts once per pool by its name, and as a GPU when its ``type`` attribute (or
      ``<driver>/type``) is the string ``gpu``; ``v1beta1``'s ``basic`` wrapper is read too.
    """
    newest: dict[str, tuple[int, list[Mapping[str, Any]]]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != driver or not spec.get("nodeName"):
            continue
        pool = spec.get("pool") or {}
        name = str(pool.get("name") or spec["nodeName"])
        generation = _as_int(pool.get("generation")) or 0
        current = newest.get(name)
        if current is None or generation > current[0]:
            newest[name] = (generation, [spec])
        elif generation == current[0]:
            current[1].append(spec)

    qualified_type = f"{driver}/type"
    pools: dict[tuple[str, str], DraPool] = {}
    seen_devices: dict[str, set[str]] = {}
    for name, (generation, specs) in newest.items():
        expected = max((_as_int((spec.get("pool") or {}).get("resourceSliceCount")) or 1) for spec in specs)
        devices_seen = seen_devices.setdefault(name, set())
        for spec in specs:
            node = str(spec["nodeName"])
            pool = pools.get((node, name))
            if pool is None:
                # Slices seen: the pool's, wherever they are (a pool is one node's, in NVIDIA's driver).
                pool = pools[(node, name)] = DraPool(name, generation, slices_expected=expected, slices_seen=len(specs))
            for device in spec.get("devices") or ():
                device_name = device.get("name")
                if device_name in devices_seen:
                    continue
                devices_seen.add(device_name)
                attributes = device.get("attributes") or (device.get("basic") or {}).get("attributes") or {}
                kind = (attributes.get("type") or attributes.get(qualified_type) or {}).get("string")
                if kind == DRA_WHOLE_GPU_TYPE:
                    pool.whole_gpus += 1
                    product = (attributes.get("productName") or attributes.get(f"{driver}/productName") or {}).get(
                        "string"
                    )
                    if product:
                        pool.products.add(str(product))
                else:
                    key = str(kind or "untyped")
                    pool.other_devices[key] = pool.other_devices.get(key, 0) + 1
    by_node: dict[str, list[DraPool]] = {}
    for (node, _), pool in sorted(pools.items()):
        by_node.setdefault(node, []).append(pool)
    return {node: DraGpus(tuple(node_pools)) for node, node_pools in by_node.items()}


@dataclasses.dataclass(frozen=True)
class GpuCount:
    """A node's GPUs as judged: the count, the source it came from, and what the other one says."""

    gpus: int
    source: str  # SOURCE_DEVICE_PLUGIN, SOURCE_DRA or SOURCE_NONE
    device_plugin_gpus: int | None  # None: no nvidia.com/gpu in allocatable
    dra: DraGpus | None  # None: no pool of the GPU driver on this node

    @property
    def both(self) -> bool:
        """Whether the device plugin and DRA both report GPUs on this node."""
        return bool(self.device_plugin_gpus) and self.dra is not None and self.dra.whole_gpus > 0

    def describe(self) -> str:
        """Where the count came from, in words, for a check's message."""
        shown = f"counted from {SOURCE_WORDS[self.source]}"
        if self.dra is not None and (self.source == SOURCE_DRA or self.both):
            shown += f"; DRA driver {DRA_GPU_DRIVER}: {self.dra.describe()}"
        if self.both:
            shown += (
                f"; both sources report GPUs on this node ({self.device_plugin_gpus} {GPU_RESOURCE} from the device "
                f"plugin, {self.dra.whole_gpus if self.dra else 0} from DRA): they would hand out the same GPUs "
                "twice, run one or the other (judged by the preferred source, gpu_count_preference)"
            )
        return shown


def count_gpus(node: ObservedNode, dra: DraGpus | None, prefer: str = SOURCE_DEVICE_PLUGIN) -> GpuCount:
    """Which source a node's GPU count comes from: the preferred one when it reports any GPUs, else
    the other when that does, else the preferred one if the node has it at all (a device plugin
    that reports 0, an empty pool), else none."""
    plugin = node.allocatable_gpus if node.allocatable_raw is not None else None
    counts = {SOURCE_DEVICE_PLUGIN: plugin, SOURCE_DRA: None if dra is None else dra.whole_gpus}
    other = SOURCE_DRA if prefer == SOURCE_DEVICE_PLUGIN else SOURCE_DEVICE_PLUGIN
    order = (prefer, other)
    source = next((name for name in order if counts[name]), None)
    if source is None:
        source = next((name for name in order if counts[name] is not None), SOURCE_NONE)
    return GpuCount(gpus=counts.get(source) or 0, source=source, device_plugin_gpus=plugin, dra=dra)


@dataclasses.dataclass(frozen=True)
class NodeRow:
    """One row of the per-node table: declared against found."""

    name: str
    declared: bool
    present: bool
    declared_gpus: int | None  # as the source judged advertises them (time-slicing replicas for the device plugin)
    found_gpus: int | None
    declared_product: str | None
    found_product: str | None
    ready: bool | None
    status: str  # "pass", "fail" (a check on this node failed) or "warn" (the node is not declared)
    gpu_source: str | None = None  # SOURCE_DEVICE_PLUGIN, SOURCE_DRA or SOURCE_NONE; None: not in the cluster
    both_sources: bool = False  # the device plugin and DRA both report GPUs on this node
    simulated: bool = False  # a KWOK node of a test bed (DeclaredNode.simulated)
    kubelet: str | None = None  # the kubelet's version; None: not in the cluster

    def to_dict(self) -> dict[str, Any]:
        # Every field is a scalar: the instance's dict, not dataclasses.asdict's deep copy (which
        # took 2 of the 3 seconds the checks of 10,000 nodes cost).
        return dict(vars(self))


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
    resource_slices: Iterable[Mapping[str, Any]] = (),
    gpu_count_preference: str = "device_plugin",
) -> NodeValidation:
    """Check every declared GPU node against the cluster's Nodes, and the cluster's GPU total.
    ``replicas_per_gpu``: how many times the device plugin advertises each GPU (time-slicing);
    ``resource_slices``: the cluster's ResourceSlices of the GPU driver (none without DRA);
    ``gpu_count_preference``: which source judges a node that reports GPUs through both."""
    if gpu_count_preference not in PREFERENCES:
        raise ValueError(f"gpu_count_preference must be one of {', '.join(PREFERENCES)}, got {gpu_count_preference!r}")
    prefer = PREFERENCES[gpu_count_preference]
    declared_nodes = [item if isinstance(item, DeclaredNode) else DeclaredNode.from_dict(item) for item in declared]
    _refuse_duplicates(declared_nodes)
    observed_nodes = [ObservedNode.from_api(node) for node in observed]
    by_name = {node.name: node for node in observed_nodes}
    dra = dra_gpus_by_node(resource_slices)
    counts = {node.name: count_gpus(node, dra.get(node.name), prefer) for node in observed_nodes}

    def advertised(want: DeclaredNode) -> int:
        # A node not in the cluster is expected as the configured device layer advertises it.
        count = counts.get(want.name)
        return want.gpu_count if count is not None and count.source == SOURCE_DRA else want.gpu_count * replicas_per_gpu

    checks: list[Check] = []
    rows: list[NodeRow] = []
    expected_total = 0
    for want in declared_nodes:
        found = by_name.get(want.name)
        count = counts.get(want.name)
        expected = advertised(want)
        expected_total += expected
        node_checks = _node_checks(want, expected, found, count)
        checks.extend(node_checks)
        rows.append(
            NodeRow(
                name=want.name,
                declared=True,
                present=found is not None,
                declared_gpus=expected,
                found_gpus=None if count is None else count.gpus,
                declared_product=want.gpu_product,
                found_product=None if found is None else _found_product(found, count),
                ready=None if found is None else found.ready,
                status="fail" if any(check.status == "fail" for check in node_checks) else "pass",
                gpu_source=None if count is None else count.source,
                both_sources=count is not None and count.both,
                simulated=want.simulated,
                kubelet=None if found is None else found.kubelet or None,
            )
        )

    declared_names = {node.name for node in declared_nodes}
    undeclared = [
        node for node in observed_nodes if node.name not in declared_names and _is_gpu_node(node, counts[node.name])
    ]
    for node in undeclared:
        count = counts[node.name]
        rows.append(
            NodeRow(
                name=node.name,
                declared=False,
                present=True,
                declared_gpus=None,
                found_gpus=count.gpus,
                declared_product=None,
                found_product=_found_product(node, count),
                ready=node.ready,
                status="warn",
                gpu_source=count.source,
                both_sources=count.both,
                kubelet=node.kubelet or None,
            )
        )
    checks.append(_total_check(declared_nodes, expected_total, advertised, observed_nodes, counts))
    checks.append(_undeclared_check(undeclared))
    checks.append(_pressure_check(observed_nodes))
    return NodeValidation(checks=checks, node_table=rows)


def _found_product(node: ObservedNode, count: GpuCount | None) -> str | None:
    """The GPU product label, else (a DRA node without GPU feature discovery) the productName DRA publishes."""
    label = node.labels.get(PRODUCT_LABEL)
    if label is None and count is not None and count.source == SOURCE_DRA and count.dra is not None:
        return ", ".join(count.dra.products) or None
    return label


def _node_checks(want: DeclaredNode, expected: int, found: ObservedNode | None, count: GpuCount | None) -> list[Check]:
    prefix = f"{SECTION_ID}/{want.name}"
    shown = want.shown
    wanted = [("ready", f"{shown} is Ready")]
    wanted.append(("gpu-count", f"{shown} has {expected} allocatable GPUs"))
    if want.gpu_product:
        wanted.append(("gpu-product", f"{shown} GPU product is {want.gpu_product}"))
    if want.gpu_memory_mib is not None:
        wanted.append(("gpu-memory", f"{shown} GPU memory is {want.gpu_memory_mib} MiB"))
    if want.labels:
        wanted.append(("labels", f"{shown} carries its declared labels"))

    # The one check that says whether the node is there at all; every other check needs it.
    present = {
        "id": prefix + "/present",
        "title": f"{shown} is in the cluster",
        "expected": f"a Node named {want.name}",
    }
    if found is None or count is None:
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
        Check(**present, status="pass", observed="found, simulated by KWOK" if want.simulated else "found"),
        _ready_check(prefix, wanted[0][1], want, found),
        _count_check(prefix, wanted[1][1], want.name, expected, found, count),
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


def _count_check(prefix: str, title: str, name: str, expected: int, found: ObservedNode, count: GpuCount) -> Check:
    observed: int | str = count.gpus
    if count.source == SOURCE_NONE:
        shown = f"no {GPU_RESOURCE} in allocatable and no ResourceSlice of the DRA driver {DRA_GPU_DRIVER}"
    elif (
        count.source == SOURCE_DEVICE_PLUGIN
        and found.allocatable_raw is not None
        and str(found.allocatable_gpus) != found.allocatable_raw.strip()
    ):
        observed = found.allocatable_raw
        shown = f"{found.allocatable_raw!r} (not a whole number of GPUs)"
    else:
        shown = str(count.gpus)
    source = count.describe()
    passed = observed == expected
    return Check(
        id=prefix + "/gpu-count",
        title=title,
        status="pass" if passed else "fail",
        expected=expected,
        observed=observed,
        message=(
            f"node {name}: {expected} GPUs, {source}"
            if passed
            else f"node {name}: expected {expected} allocatable GPUs, found {shown}, {source}. "
            + _where_gpus_come_from(name, count)
        ),
    )


def _where_gpus_come_from(name: str, count: GpuCount) -> str:
    pods = f"(`kubectl get pods -A -o wide --field-selector spec.nodeName={name}`)"
    plugin = f"the NVIDIA device plugin / GPU operator pod on {name} {pods}"
    dra = (
        f"NVIDIA's DRA driver's kubelet plugin pod on {name} and its ResourceSlices "
        f"(`kubectl get resourceslices --field-selector spec.nodeName={name},spec.driver={DRA_GPU_DRIVER} -o yaml`)"
    )
    where = {SOURCE_DEVICE_PLUGIN: plugin, SOURCE_DRA: dra}.get(count.source, f"{plugin}, or {dra}")
    return f"Look at {where}, and at `nvidia-smi` on the host."


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
    declared: list[DeclaredNode],
    expected: int,
    advertised: Callable[[DeclaredNode], int],
    observed: list[ObservedNode],
    counts: Mapping[str, GpuCount],
) -> Check:
    found = sum(count.gpus for count in counts.values())
    by_source: dict[str, list[int]] = {}
    for count in counts.values():
        if count.gpus:
            tally = by_source.setdefault(count.source, [0, 0])
            tally[0] += count.gpus
            tally[1] += 1
    sources = (
        "; ".join(
            f"{gpus} from {SOURCE_WORDS[source]} on {nodes} nodes"
            for source, (gpus, nodes) in sorted(by_source.items())
        )
        or "no GPUs from either source"
    )
    title = f"cluster reports {expected} allocatable GPUs in all"
    if found == expected:
        return Check(
            id="cluster/gpu-total", title=title, status="pass", expected=expected, observed=found, message=sources
        )
    differences = []
    for want in declared:
        count = counts.get(want.name)
        have = 0 if count is None else count.gpus
        if have != advertised(want):
            differences.append(f"{want.name} {have} of {advertised(want)}")
    declared_names = {node.name for node in declared}
    for node in observed:
        if node.name not in declared_names and counts[node.name].gpus:
            differences.append(f"{node.name} {counts[node.name].gpus} undeclared")
    return Check(
        id="cluster/gpu-total",
        title=title,
        status="fail",
        expected=expected,
        observed=found,
        message=(
            f"expected {expected} allocatable GPUs in the cluster (the sum the inventory declares), found {found} "
            f"({sources}). Nodes that differ: {_some(differences) or 'none'}. Look at the per-node checks above "
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


def _pressure_check(observed: list[ObservedNode]) -> Check:
    title = "no node reports memory, disk or process pressure"
    pressed = [f"{node.name}: {', '.join(node.pressures)}" for node in observed if node.pressures]
    if not pressed:
        return Check(id="cluster/node-pressure", title=title, status="pass", expected=[], observed=[])
    return Check(
        id="cluster/node-pressure",
        title=title,
        status="fail",
        expected=[],
        observed=pressed,
        message=(
            f"{len(pressed)} node(s) report pressure: {_some(pressed)}. Their kubelets evict pods and the scheduler "
            "keeps new ones off them until it passes; free what the condition names (`kubectl describe node`), "
            "or set the kubelet's eviction thresholds (clusterproof_kubelet_config.evictionHard) to what the "
            "hosts really have."
        ),
    )


def _pressures(conditions: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(
        f"{condition['type']} ({condition.get('message') or condition.get('reason') or 'no message'})"
        for condition in conditions
        if condition.get("type") in PRESSURE_CONDITIONS and condition.get("status") == "True"
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


def _is_gpu_node(node: ObservedNode, count: GpuCount) -> bool:
    return (
        count.gpus > 0
        or (node.allocatable_raw not in (None, "0"))
        or PRODUCT_LABEL in node.labels
        or (count.dra is not None and count.dra.whole_gpus > 0)
    )


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
