"""The storage checks of the site report: judged from what the validator observed.

``validate_storage`` (the module) creates a probe namespace, claims, pods, waits, observes and
cleans up; this file only judges what it saw, so every verdict is unit-tested without a cluster.

Checks, in order (ids are stable)::

    storage/classes/<name>   the declared class exists with the declared provisioner, reclaim
                             policy and binding mode
    storage/default-class    exactly one class of the cluster is the default, the declared one
    storage/default-binds    a claim on the default class becomes Bound (with a consuming pod
                             for a WaitForFirstConsumer class)
    storage/default-readback where pods really run (not the sandbox): a second pod reads back
                             what the first wrote to the default class's claim
    storage/rwx-shared       two pods mount one ReadWriteMany claim and run (skipped, with the
                             reason, when no class offers ReadWriteMany); where pods really run,
                             each sees the other's line in the shared file
    storage/cleanup          everything the probe created is gone (what a node that went away holds:
                             a warning naming the node, removed by the next run)
    storage/earlier-leftovers nothing an earlier run left (a namespace, a volume) is still there:
                             the run removes such leftovers before it probes, and says which

The probe's pods go only to nodes that are Ready and schedulable when the run starts
(:func:`probe_nodes`); a node that goes away while the probe waits is named (``node_lost``) and the
probe stops waiting for it. ``validate.storage_probe`` makes and removes the objects.

Pure: plain data in, report checks out.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check

SECTION_ID = "storage"
SECTION_TITLE = "Storage classes"
TABLE_COLUMNS = ["Class", "Provisioner", "Default (declared)", "Default (found)", "Access modes", "Found"]


@dataclasses.dataclass
class ClaimProbe:
    """What became of one probe claim and the pods that mount it."""

    storage_class: str
    access_mode: str
    phase: str = ""
    volume: str = ""
    # Seconds from creation to Bound, or None if it never bound.
    bound_after_s: float | None = None
    # Pod name -> (phase, node).
    pods: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    # Why the probe could not go on (an API error), if it could not.
    error: str = ""
    # Recent events of the claim, to say where to look when it did not bind.
    events: list[str] = dataclasses.field(default_factory=list)
    # Where pods really run: what a pod that mounts the claim last read from it (None: not read).
    read_back: str | None = None
    # A node the probe's pods were placed on that stopped being Ready while the probe waited, and why.
    node_lost: str = ""
    node_lost_why: str = ""
    # The node the scheduler chose for a WaitForFirstConsumer claim's volume, once it has.
    selected_node: str = ""


@dataclasses.dataclass
class Cleanup:
    """What of the probe's objects was still there when the validator gave up waiting."""

    namespace_left: bool = False
    volumes_left: list[str] = dataclasses.field(default_factory=list)
    error: str = ""
    # Volumes left only because the node holding them is not Ready (volume -> node): their
    # provisioner removes them there once the node is back, or the next run does.
    stranded: dict[str, str] = dataclasses.field(default_factory=dict)
    # Pods bound to a node that is not Ready, deleted at once (grace period 0) so that the
    # namespace and claims could go: pod -> node.
    forced_pods: dict[str, str] = dataclasses.field(default_factory=dict)
    # Helper pods of the volumes' provisioner found on a node that is not Ready, where they never
    # run, and deleted so that the provisioner placed them anew: pod -> node.
    helpers_moved: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Leftovers:
    """What earlier probes left: their namespaces, and volumes whose claims were in them."""

    namespaces: list[str] = dataclasses.field(default_factory=list)
    volumes: list[str] = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.namespaces or self.volumes)

    def names(self) -> list[str]:
        return ["namespace %s" % name for name in self.namespaces] + ["volume %s" % name for name in self.volumes]


# --- where the probe may go, and what it left ----------------------------------------------------

PROBE_NAMESPACE_PREFIX = "clusterproof-storage-probe-"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def ready_condition(node: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether a node (as JSON) is Ready, and else what its Ready condition says."""
    for condition in (node.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            if condition.get("status") == "True":
                return True, ""
            why = condition.get("message") or condition.get("reason") or ""
            return False, "Ready=%s%s" % (condition.get("status"), ": %s" % why if why else "")
    return False, "no Ready condition"


def probe_nodes(nodes: Iterable[Mapping[str, Any]], real_only: bool) -> tuple[list[str], dict[str, str]]:
    """The nodes the probe's pods may go to (Ready, schedulable and, where pods really run, not
    simulated), and those left out with the reason: name -> why."""
    chosen, left_out = [], {}
    for node in nodes:
        metadata = node.get("metadata") or {}
        name = metadata.get("name") or ""
        if real_only and storage.SIMULATED_NODE_LABEL in (metadata.get("labels") or {}):
            continue
        ready, why = ready_condition(node)
        if not ready:
            left_out[name] = "not Ready (%s)" % why
        elif (node.get("spec") or {}).get("unschedulable"):
            left_out[name] = "cordoned"
        else:
            chosen.append(name)
    return sorted(chosen), left_out


def no_node_message(left_out: Mapping[str, str]) -> str:
    found = "; ".join("%s: %s" % item for item in sorted(left_out.items())) or "the cluster has none"
    return "no node is Ready and schedulable to run the probe's pods (%s)" % found


def volume_node(volume: Mapping[str, Any]) -> str:
    """The node a node-local volume (local-path's, a local PV) is pinned to, or "" for one any node
    mounts (NFS, a shared path)."""
    required = (((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}).get(
        "nodeSelectorTerms"
    ) or ()
    for term in required:
        for expression in term.get("matchExpressions") or ():
            values = expression.get("values") or ()
            if expression.get("key") == HOSTNAME_LABEL and expression.get("operator") == "In" and len(values) == 1:
                return values[0]
    return ""


def helper_stuck_on(pod: Mapping[str, Any], ready: Sequence[str]) -> str:
    """The node, not Ready, that a provisioner's helper pod (as JSON) is bound to and still waits on,
    where it never runs; "" for a pod not yet placed, placed on a Ready node, or ended."""
    node = (pod.get("spec") or {}).get("nodeName") or ""
    phase = (pod.get("status") or {}).get("phase") or ""
    if not node or node in ready or phase in ("Succeeded", "Failed"):
        return ""
    return node


# The projected volume the API server adds to every pod for its service account's token: a pod made
# again from another's spec leaves it out, and is given its own.
_TOKEN_VOLUME_PREFIX = "kube-api-access-"


def helper_placed_anew(pod: Mapping[str, Any], avoid: Sequence[str]) -> dict[str, Any]:
    """A provisioner's helper pod (as JSON) made again under its name, with its spec, kept off the
    nodes ``avoid`` (a required node affinity on the Node's name, ``matchFields``, in every term it had)."""
    metadata = pod.get("metadata") or {}
    spec = copy.deepcopy(dict(pod.get("spec") or {}))
    spec.pop("nodeName", None)
    spec["volumes"] = [
        volume for volume in spec.get("volumes") or () if not volume.get("name", "").startswith(_TOKEN_VOLUME_PREFIX)
    ]
    for container in spec.get("containers") or ():
        container["volumeMounts"] = [
            mount
            for mount in container.get("volumeMounts") or ()
            if not mount.get("name", "").startswith(_TOKEN_VOLUME_PREFIX)
        ]
    keep_off = {"key": "metadata.name", "operator": "NotIn", "values": sorted(avoid)}
    required = (
        spec.setdefault("affinity", {})
        .setdefault("nodeAffinity", {})
        .setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    )
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchFields"] = list(term.get("matchFields") or ()) + [keep_off]
    required["nodeSelectorTerms"] = terms
    kept = {key: metadata[key] for key in ("name", "namespace", "labels", "annotations") if metadata.get(key)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": kept, "spec": spec}


def find_leftovers(
    namespaces: Iterable[Mapping[str, Any]], volumes: Iterable[Mapping[str, Any]], current: str = ""
) -> Leftovers:
    """The probe namespaces (by name and label) other than ``current``, and the volumes whose claim
    was in a probe namespace other than ``current``."""
    found = Leftovers()
    for namespace in namespaces:
        metadata = namespace.get("metadata") or {}
        name = metadata.get("name") or ""
        labelled = (metadata.get("labels") or {}).get(storage.PROBE_LABEL) == storage.PROBE_LABEL_VALUE
        if name != current and name.startswith(PROBE_NAMESPACE_PREFIX) and labelled:
            found.namespaces.append(name)
    for volume in volumes:
        claim = ((volume.get("spec") or {}).get("claimRef") or {}).get("namespace") or ""
        if claim != current and claim.startswith(PROBE_NAMESPACE_PREFIX):
            found.volumes.append((volume.get("metadata") or {}).get("name") or "")
    found.namespaces.sort()
    found.volumes.sort()
    return found


def stranded_pods(pods: Iterable[Mapping[str, Any]], ready: Iterable[str]) -> dict[str, str]:
    """Pods bound to a node that is not among ``ready``: pod -> node. Their kubelet cannot confirm
    that they stopped, so they are deleted with grace period 0 (the namespace waits for them)."""
    names = set(ready)
    found = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName") or ""
        if node and node not in names:
            found[(pod.get("metadata") or {}).get("name") or ""] = node
    return found


def class_checks(
    declared: Iterable[storage.StorageClassDeclaration], observed: Iterable[Mapping[str, Any]]
) -> list[Check]:
    found = {item["metadata"]["name"]: item for item in observed}
    checks = []
    for cls in declared:
        want = storage.storage_class_manifest(cls)
        expected = {
            "provisioner": want["provisioner"],
            "reclaimPolicy": want["reclaimPolicy"],
            "volumeBindingMode": want["volumeBindingMode"],
        }
        check_id = "storage/classes/%s" % cls.name
        title = "StorageClass %s exists (%s)" % (cls.name, cls.provisioner)
        item = found.get(cls.name)
        if item is None:
            checks.append(
                Check(
                    check_id,
                    title,
                    "fail",
                    expected,
                    None,
                    "StorageClass %s is not in the cluster; run playbooks/storage.yml" % cls.name,
                )
            )
            continue
        seen = {key: item.get(key) for key in expected}
        differs = sorted(key for key in expected if seen[key] != expected[key])
        message = ""
        if differs:
            message = (
                "StorageClass %s differs from the inventory in %s; these fields cannot change in place: "
                % (
                    cls.name,
                    ", ".join(differs),
                )
                + "delete the class and run playbooks/storage.yml"
            )
        checks.append(Check(check_id, title, "fail" if differs else "pass", expected, seen, message))
    return checks


def default_class_check(
    declared: Iterable[storage.StorageClassDeclaration], observed: Iterable[Mapping[str, Any]]
) -> Check:
    check_id, title = "storage/default-class", "Exactly one default StorageClass, the declared one"
    want = storage.default_class(declared)
    defaults = sorted(
        item["metadata"]["name"]
        for item in observed
        if ((item["metadata"].get("annotations") or {}).get(storage.DEFAULT_CLASS_ANNOTATION)) == "true"
    )
    if want is None:
        return Check(check_id, title, "skip", None, defaults, "the inventory declares no storage classes")
    if defaults == [want.name]:
        return Check(check_id, title, "pass", want.name, defaults)
    found = "none" if not defaults else ", ".join(defaults)
    return Check(
        check_id,
        title,
        "fail",
        want.name,
        defaults,
        "expected %s to be the only default StorageClass, found %s (annotation %s); run playbooks/storage.yml"
        % (want.name, found, storage.DEFAULT_CLASS_ANNOTATION),
    )


def _where_to_look(probe: ClaimProbe) -> str:
    events = "; ".join(probe.events[-3:]) or "no events"
    return "claim events: %s. Look at the provisioner of class %s (its pods or, on the sandbox, logs/%s.log)" % (
        events,
        probe.storage_class,
        "local-path-provisioner",
    )


def _lost(probe: ClaimProbe) -> str:
    if not probe.node_lost:
        return ""
    pods = sorted(name for name, (_, node) in probe.pods.items() if node == probe.node_lost)
    if pods:
        where = "; its pods: %s" % ", ".join(pods)
    elif probe.selected_node == probe.node_lost:
        where = "; the claim's volume was to be made there"
    else:
        where = ""
    return (
        "node %s went away while the probe waited on it (%s)%s: the probe stopped waiting; "
        "the node's own check says why"
        % (
            probe.node_lost,
            probe.node_lost_why or "not Ready",
            where,
        )
    )


def bind_check(default: storage.StorageClassDeclaration | None, probe: ClaimProbe | None, timeout: float) -> Check:
    check_id = "storage/default-binds"
    if default is None or probe is None:
        title = "A claim on the default class becomes Bound"
        return Check(check_id, title, "skip", None, None, "the inventory declares no default storage class")
    consumer = default.volume_binding_mode == "WaitForFirstConsumer"
    title = "A %s claim on %s becomes Bound%s" % (
        probe.access_mode,
        default.name,
        " once a pod consumes it" if consumer else "",
    )
    observed: dict[str, Any] = {"phase": probe.phase or None, "volume": probe.volume or None}
    if probe.pods:
        observed["pods"] = {name: {"phase": phase, "node": node} for name, (phase, node) in probe.pods.items()}
    if probe.error:
        return Check(check_id, title, "fail", "Bound", observed, "the probe failed: %s" % probe.error)
    if probe.node_lost and probe.phase != "Bound":
        return Check(check_id, title, "fail", "Bound", observed, _lost(probe))
    if probe.phase != "Bound":
        message = "the claim is %s after %.0f s, expected Bound; %s" % (
            probe.phase or "missing",
            timeout,
            _where_to_look(probe),
        )
        return Check(check_id, title, "fail", "Bound", observed, message)
    return Check(check_id, title, "pass", "Bound", observed, duration_s=probe.bound_after_s)


def readback_check(
    default: storage.StorageClassDeclaration | None, probe: ClaimProbe | None, pods_run: bool, timeout: float
) -> Check:
    """A second pod reads back, through the default class's claim, the line the first wrote."""
    check_id = "storage/default-readback"
    title = "A pod reads back what another wrote to a claim on the default class"
    if not pods_run:
        return Check(check_id, title, "skip", message="pods do not run on this site's nodes (KWOK simulates them)")
    if default is None or probe is None:
        return Check(check_id, title, "skip", message="the inventory declares no default storage class")
    writers = [name for name in probe.pods if not name.endswith("-reader")]
    expected = "the writer's line (%s)" % ", ".join(writers)
    if probe.error or probe.read_back is None:
        why = probe.error or _lost(probe) or "the reader did not finish within %.0f s" % timeout
        return Check(
            check_id, title, "fail", expected, None, "nothing was read back: %s; %s" % (why, _where_to_look(probe))
        )
    lines = probe.read_back.split()
    if not writers or any(writer not in lines for writer in writers):
        placed = ", ".join(
            "%s %s on %s" % (name, phase, node or "no node") for name, (phase, node) in probe.pods.items()
        )
        message = (
            "the reader found %r in %s, expected the line each writer wrote (%s): the volume a second pod "
            % (
                probe.read_back.strip(),
                storage.PROBE_FILE,
                ", ".join(writers),
            )
            + "mounts is not the one the first wrote to; look at the provisioner's volume paths on the node"
            + " (volume %s; %s)" % (probe.volume or "none", placed)
        )
        return Check(check_id, title, "fail", expected, probe.read_back.strip(), message)
    return Check(check_id, title, "pass", expected, probe.read_back.strip())


def rwx_check(rwx: storage.StorageClassDeclaration | None, probe: ClaimProbe | None, timeout: float) -> Check:
    check_id = "storage/rwx-shared"
    if rwx is None or probe is None:
        return Check(
            check_id,
            "Two pods share one ReadWriteMany claim",
            "skip",
            None,
            None,
            "no declared storage class offers ReadWriteMany (access_modes); declare one (nfs, trident with a "
            "file driver, or local-path with shared_path) for jobs that share a volume",
        )
    title = "Two pods share one ReadWriteMany claim on %s" % rwx.name
    observed = {
        "phase": probe.phase or None,
        "pods": {name: {"phase": phase, "node": node} for name, (phase, node) in probe.pods.items()},
    }
    expected = {"phase": "Bound", "pods running": 2}
    if probe.error:
        return Check(check_id, title, "fail", expected, observed, "the probe failed: %s" % probe.error)
    running = [name for name, (phase, _) in probe.pods.items() if phase in ("Running", "Succeeded")]
    if probe.node_lost and (probe.phase != "Bound" or len(running) < 2 or probe.read_back is None):
        return Check(check_id, title, "fail", expected, observed, _lost(probe))
    if probe.phase != "Bound" or len(running) < 2:
        message = "after %.0f s the claim is %s and %d of 2 pods run, expected Bound and 2; %s" % (
            timeout,
            probe.phase or "missing",
            len(running),
            _where_to_look(probe),
        )
        return Check(check_id, title, "fail", expected, observed, message)
    writers = sorted(name for name in probe.pods if not name.endswith("-reader"))
    if probe.read_back is not None:
        observed["read back"] = probe.read_back.strip()
        if any(writer not in probe.read_back.split() for writer in writers):
            message = (
                "the shared file holds %r, expected a line from each pod (%s): the pods do not see one "
                % (
                    probe.read_back.strip(),
                    ", ".join(writers),
                )
                + "volume; look at how the class's volumes are mounted on each node"
            )
            return Check(check_id, title, "fail", expected, observed, message)
    nodes = sorted({node for _, node in probe.pods.values()})
    message = "" if len(nodes) > 1 else "both pods ran on node %s: the cluster offered no second node" % nodes[0]
    return Check(check_id, title, "pass", expected, observed, message, probe.bound_after_s)


def _forced(cleanup: Cleanup) -> str:
    said = ""
    if cleanup.forced_pods:
        said += "; removed at once the pods of nodes that are not Ready (%s)" % ", ".join(
            "%s on %s" % item for item in sorted(cleanup.forced_pods.items())
        )
    if cleanup.helpers_moved:
        said += (
            "; removed the provisioner's helper pods placed on nodes that are not Ready, so that it placed "
            "them again (%s)" % ", ".join("%s on %s" % item for item in sorted(cleanup.helpers_moved.items()))
        )
    return said


def cleanup_check(namespace: str, cleanup: Cleanup) -> Check:
    """Everything the probe made is gone; what a node that went away still holds is a warning naming
    the node (its provisioner removes it there once the node is back, or the next run does)."""
    check_id, title = "storage/cleanup", "The probe's namespace, claims and volumes are removed"
    observed: dict[str, Any] = {"namespace_left": cleanup.namespace_left, "volumes_left": list(cleanup.volumes_left)}
    if cleanup.stranded:
        observed["on nodes not Ready"] = dict(sorted(cleanup.stranded.items()))
    if cleanup.helpers_moved:
        observed["helper pods moved"] = dict(sorted(cleanup.helpers_moved.items()))
    expected = {"namespace_left": False, "volumes_left": []}
    unexplained = [volume for volume in cleanup.volumes_left if volume not in cleanup.stranded]
    if cleanup.error or cleanup.namespace_left or unexplained:
        left = ([namespace] if cleanup.namespace_left else []) + list(cleanup.volumes_left)
        message = (
            "left behind: %s%s%s; the next validation run removes them before it probes (it finds the "
            "namespace by its label %s=%s, the volumes by their claims' namespace)"
            % (
                ", ".join(left) or "nothing known",
                " (%s)" % cleanup.error if cleanup.error else "",
                _forced(cleanup),
                storage.PROBE_LABEL,
                storage.PROBE_LABEL_VALUE,
            )
        )
        return Check(check_id, title, "fail", expected, observed, message)
    if cleanup.stranded:
        message = (
            "%s stays until %s is Ready again: the volume's directory is on that node, where its provisioner "
            "removes it once the node is back; the next validation run removes what is still left%s"
            % (
                ", ".join("volume %s" % volume for volume in sorted(cleanup.stranded)),
                ", ".join(sorted(set(cleanup.stranded.values()))),
                _forced(cleanup),
            )
        )
        return Check(check_id, title, "warn", expected, observed, message)
    return Check(check_id, title, "pass", expected, observed, _forced(cleanup).lstrip("; "))


def leftovers_check(found: Leftovers, remaining: Leftovers, stranded: Mapping[str, str]) -> Check:
    """What earlier runs left (a run cut off, a node that went away) is removed before the probe:
    said when there was some, a warning for what a node that is not Ready still holds, a failure
    for anything else that would not go."""
    check_id, title = "storage/earlier-leftovers", "Nothing an earlier storage probe left is still there"
    expected: list[str] = []
    if not found:
        return Check(check_id, title, "pass", expected, [])
    removed = [name for name in found.names() if name not in remaining.names()]
    if not remaining:
        return Check(check_id, title, "pass", expected, [], "removed what an earlier run left: %s" % ", ".join(removed))
    waiting = [volume for volume in remaining.volumes if volume in stranded]
    stuck = [name for name in remaining.names() if name.split(" ", 1)[1] not in stranded]
    said = "removed: %s; " % ", ".join(removed) if removed else ""
    if stuck:
        message = (
            "%san earlier run left %s, still there after this run deleted them and waited: look at the "
            "namespace's remaining objects and finalizers (kubectl get all,pvc -n NAME) and the volumes' "
            "provisioner; the next run tries again" % (said, ", ".join(stuck))
        )
        return Check(check_id, title, "fail", expected, remaining.names(), message)
    message = "%s%s stays until %s is Ready again (the volume's directory is on that node)" % (
        said,
        ", ".join("volume %s" % volume for volume in waiting),
        ", ".join(sorted({stranded[volume] for volume in waiting})),
    )
    return Check(check_id, title, "warn", expected, remaining.names(), message)


def class_table(
    declared: Iterable[storage.StorageClassDeclaration], observed: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    found = {item["metadata"]["name"]: item for item in observed}
    rows, statuses = [], []
    for cls in declared:
        item = found.get(cls.name)
        annotations = ((item or {}).get("metadata") or {}).get("annotations") or {}
        found_default = annotations.get(storage.DEFAULT_CLASS_ANNOTATION) == "true"
        rows.append(
            [
                cls.name,
                cls.provisioner,
                "yes" if cls.default else "no",
                None if item is None else ("yes" if found_default else "no"),
                ", ".join(cls.access_modes),
                "yes" if item is not None else "no",
            ]
        )
        statuses.append("pass" if item is not None and found_default == cls.default else "fail")
    return {
        "id": "storage-classes",
        "title": "Storage classes: declared and found",
        "columns": list(TABLE_COLUMNS),
        "rows": rows,
        "row_status": statuses,
    }


def section(checks: list[Check], table: Mapping[str, Any]) -> dict[str, Any]:
    """The report section as data, the shape ``site_report`` accepts."""
    return {
        "id": SECTION_ID,
        "title": SECTION_TITLE,
        "checks": [check.to_dict() for check in checks],
        "tables": [dict(table)] if table["rows"] else [],
    }
