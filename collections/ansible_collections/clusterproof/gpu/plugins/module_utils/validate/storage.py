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
    storage/cleanup          everything the probe created is gone

Pure: plain data in, report checks out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
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


@dataclasses.dataclass
class Cleanup:
    """What of the probe's objects was still there when the validator gave up waiting."""

    namespace_left: bool = False
    volumes_left: list[str] = dataclasses.field(default_factory=list)
    error: str = ""


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
        why = probe.error or "the reader did not finish within %.0f s" % timeout
        return Check(
            check_id, title, "fail", expected, None, "nothing was read back: %s; %s" % (why, _where_to_look(probe))
        )
    lines = probe.read_back.split()
    if not writers or any(writer not in lines for writer in writers):
        message = (
            "the reader found %r in %s, expected the line each writer wrote (%s): the volume a second pod "
            % (
                probe.read_back.strip(),
                storage.PROBE_FILE,
                ", ".join(writers),
            )
            + "mounts is not the one the first wrote to; look at the provisioner's volume paths on the node"
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


def cleanup_check(namespace: str, cleanup: Cleanup) -> Check:
    check_id, title = "storage/cleanup", "The probe's namespace, claims and volumes are removed"
    observed = {"namespace_left": cleanup.namespace_left, "volumes_left": list(cleanup.volumes_left)}
    expected = {"namespace_left": False, "volumes_left": []}
    if cleanup.error or cleanup.namespace_left or cleanup.volumes_left:
        left = ([namespace] if cleanup.namespace_left else []) + list(cleanup.volumes_left)
        message = "left behind: %s%s; delete them by hand" % (
            ", ".join(left) or "nothing known",
            " (%s)" % cleanup.error if cleanup.error else "",
        )
        return Check(check_id, title, "fail", expected, observed, message)
    return Check(check_id, title, "pass", expected, observed)


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
