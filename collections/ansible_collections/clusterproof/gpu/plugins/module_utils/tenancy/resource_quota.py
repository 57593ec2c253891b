"""What a project may hold beside its GPUs: a Kubernetes ResourceQuota in its namespace, and the
LimitRange that lets it count CPU and memory. Pure; imports only common.problems.

The quota scheduler holds a project's GPUs (and, on KAI, the CPU and memory of the pods it
schedules). What it does not schedule, a member could still take from every project: pods on the
default scheduler filling the nodes' pod slots, claims filling a shared storage class, objects
without end. Each project namespace gets the ResourceQuota ``NAME`` with the site's ceilings
(``clusterproof_tenancy.resource_quota``, ``DEFAULT_HARD`` unless declared) and the project's own
changes to them (its ``resource_quota``; a key set to null is left out). Kubernetes' ResourceQuota
admission refuses, dry runs included, whatever would pass a ceiling: ``exceeded quota: ...``.

A ceiling on CPU or memory requests (or limits) makes Kubernetes refuse every pod that does not
state them. So where one is declared the namespace also gets the LimitRange ``LIMIT_RANGE_NAME``,
giving each container that states none ``DEFAULT_REQUESTS`` (and ``DEFAULT_LIMITS`` where limits are
held): a member's pod is then counted, not refused for a missing field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.problems import FieldProblem

NAME = "clusterproof-project"
LIMIT_RANGE_NAME = "clusterproof-project-defaults"
# What a site may hold to a ceiling, with what each counts (Kubernetes' names). GPUs are not here:
# the quota scheduler lends and reclaims them, which a ResourceQuota cannot.
KEYS = {
    "pods": "pods that are not done (their number)",
    "requests.cpu": "CPU cores all pods request",
    "requests.memory": "memory all pods request",
    "limits.cpu": "CPU cores of all pods' limits",
    "limits.memory": "memory of all pods' limits",
    "requests.ephemeral-storage": "local ephemeral storage all pods request",
    "persistentvolumeclaims": "PersistentVolumeClaims (their number)",
    "requests.storage": "storage all PersistentVolumeClaims request",
    "services": "Services (their number)",
    "configmaps": "ConfigMaps (their number)",
    "secrets": "Secrets (their number)",
    "count/jobs.batch": "Jobs (their number)",
    "count/cronjobs.batch": "CronJobs (their number)",
    "count/deployments.apps": "Deployments (their number)",
    "count/statefulsets.apps": "StatefulSets (their number)",
}
# Keys that count objects: a whole number.
COUNTS = tuple(key for key in KEYS if key in ("pods", "persistentvolumeclaims", "services", "configmaps", "secrets"))
COUNTS += tuple(key for key in KEYS if key.startswith("count/"))
# Every project's ceilings unless the site declares its own: far above a team's real use, so that
# they stop a runaway (a Deployment of 10,000 replicas, a CronJob every minute, a loop of claims)
# before it fills the nodes' pod slots or the storage, and never an ordinary day's work.
DEFAULT_HARD = {
    "pods": "500",
    "persistentvolumeclaims": "100",
    "requests.storage": "10Ti",
    "services": "100",
    "configmaps": "500",
    "secrets": "500",
}
# What a container that states none is given where CPU or memory is held to a ceiling.
DEFAULT_REQUESTS = {"cpu": "100m", "memory": "128Mi"}
DEFAULT_LIMITS = {"cpu": "1", "memory": "1Gi"}

# Kubernetes' quantity syntax (apimachinery's resource.Quantity), matched whole.
_QUANTITY = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?")
_SUFFIXES = {
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


def quantity(text: Any) -> Decimal | None:
    """A Kubernetes quantity (``"500"``, ``"100m"``, ``"10Ti"``, ``"1e3"``) as a number, or None when
    it is not one."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        return None
    raw = str(text)
    if not _QUANTITY.fullmatch(raw):
        return None
    for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"):
        if raw.endswith(suffix):
            return Decimal(raw[: -len(suffix)]) * _SUFFIXES[suffix]
    try:
        if raw[-1] in _SUFFIXES and not raw[-1].isdigit():
            return Decimal(raw[:-1]) * _SUFFIXES[raw[-1]]
        return Decimal(raw)
    except InvalidOperation:
        return None


def check_hard(value: Any, field: str, nulls: bool = False) -> tuple[dict[str, str | None], list[FieldProblem]]:
    """Ceilings as declared at ``field`` (a mapping of ``KEYS`` to quantities; with ``nulls``, a key
    may be null to leave it out): the ceilings as strings, and every problem naming its key."""
    found: list[FieldProblem] = []
    if not isinstance(value, Mapping):
        return {}, [FieldProblem(field, "a mapping of %s to quantities" % ", ".join(KEYS), value)]
    hard: dict[str, str | None] = {}
    for key, amount in value.items():
        where = "%s.%s" % (field, key)
        if key not in KEYS:
            expected = "one of %s (GPUs are the quota scheduler's)" % ", ".join(KEYS)
            found.append(FieldProblem(where, expected, "an unknown key"))
            continue
        if amount is None and nulls:
            hard[key] = None
            continue
        number = quantity(amount)
        if number is None or number < 0:
            found.append(FieldProblem(where, "a non-negative Kubernetes quantity (such as 500, 100m, 10Ti)", amount))
        elif key in COUNTS and number != number.to_integral_value():
            found.append(FieldProblem(where, "a whole number of objects", amount))
        else:
            hard[key] = str(amount)
    return hard, found


def resolved(site: Mapping[str, str], project: Mapping[str, str | None] | None) -> dict[str, str]:
    """A project's ceilings: the site's, changed by the project's own (null leaves a key out)."""
    merged: dict[str, str | None] = {**site, **(project or {})}
    return {key: value for key, value in sorted(merged.items()) if value is not None}


def holds_cpu_or_memory(hard: Mapping[str, str]) -> bool:
    """Whether the ceilings count CPU or memory, which a pod must then state (or be given)."""
    return any(key.split(".", 1)[0] in ("requests", "limits") and key != "requests.storage" for key in hard)


def manifests(namespace: str, hard: Mapping[str, str], labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The namespace's ResourceQuota (none where nothing is held), and its LimitRange where CPU or
    memory is held."""
    if not hard:
        return []
    metadata = {"namespace": namespace, "labels": dict(labels)}
    found: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": NAME, **metadata},
            "spec": {"hard": dict(hard)},
        }
    ]
    if holds_cpu_or_memory(hard):
        limit: dict[str, Any] = {"type": "Container", "defaultRequest": dict(DEFAULT_REQUESTS)}
        if any(key.startswith("limits.") for key in hard):
            limit["default"] = dict(DEFAULT_LIMITS)
        found.append(
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": LIMIT_RANGE_NAME, **metadata},
                "spec": {"limits": [limit]},
            }
        )
    return found


def objects(namespace: str) -> list[dict[str, Any]]:
    """Each object ``manifests`` may make in ``namespace``, by kind and name (to read or delete)."""
    return [
        {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}}
        for kind, name in (("ResourceQuota", NAME), ("LimitRange", LIMIT_RANGE_NAME))
    ]


def differences(wanted: Mapping[str, str], found: Mapping[str, Any] | None) -> list[str]:
    """How the namespace's ResourceQuota (``found``, None when missing) differs from the ceilings
    ``wanted``: each key missing or at another amount, as 'pods: 500 wanted, 9000 found'."""
    if not wanted:
        return []
    if found is None:
        return ["ResourceQuota/%s missing" % NAME]
    hard = (found.get("spec") or {}).get("hard") or {}
    shown = []
    for key, amount in sorted(wanted.items()):
        if key not in hard:
            shown.append("%s: %s wanted, none found" % (key, amount))
        elif quantity(hard[key]) != quantity(amount):
            shown.append("%s: %s wanted, %s found" % (key, amount, hard[key]))
    return shown
