"""Quota lint: settings that an engine accepts but that do not mean what they seem to. Pure.

Before scenarios run (and when the projects are checked), the validator warns about quotas that
add up to more than the capacity they divide, a limit below its quota, a tree child guaranteed more
than its parent, and over-quota weights of zero. None of them is an error: every engine accepts
them, and a site may want them (over-subscribed quotas are common). Each finding says what the
installed engine does with the setting, so that an admin is not surprised by the fairness results.

May import the standard library only (it reads projects as ``fairshare.Project`` has them, by
their attributes). Touches nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class Project(Protocol):
    """What the lint reads of a project (``fairshare.Project`` has it)."""

    @property
    def name(self) -> str: ...
    @property
    def quota(self) -> float: ...
    @property
    def limit(self) -> float | None: ...
    @property
    def weight(self) -> float | None: ...
    @property
    def parent(self) -> str | None: ...


CODES = ("quotas-above-capacity", "limit-below-quota", "child-above-parent", "zero-weight")
# Quotas are compared to a hundredth of a GPU, as scenarios give them.
_EPSILON = 0.005


@dataclass(frozen=True)
class Finding:
    """One setting worth a warning. ``field`` names it as the inventory and scenario files spell it
    (a scenario's ``min`` and ``max`` are its ``gpu_quota`` and ``gpu_limit``)."""

    code: str
    field: str
    expected: str
    found: str
    what_the_engine_does: str


def _number(value: float) -> str:
    return f"{value:g}"


def _over_subscribed(policy: str, parent: str | None) -> str:
    where = "the cluster" if parent is None else f"{parent}'s share"
    if policy == "kueue":
        return (
            "Kueue admits by quota, not by free nodes: it admits workloads up to the nominal quotas, and pods "
            f"beyond {where} stay Pending on the nodes; a queue reclaims its nominal quota from borrowers first"
        )
    if policy == "elastic":
        return (
            f"the guaranteed minimums cannot all be met at once: a quota node below its min reclaims from nodes "
            f"above theirs until {where} is used up; the rest of its min waits"
        )
    return (
        "KAI still gives each queue min(quota, demand) as its deserved share and lets it reclaim up to it, "
        f"so queues reclaim from one another: not every quota can be met at once within {where}"
    )


def _zero_weight(policy: str) -> str:
    if policy == "kueue":
        return (
            "Kueue's fair sharing gives a queue of weight 0 no share of borrowed capacity while a weighted queue "
            "wants it; queues that both weigh 0 are compared by their unweighted share"
        )
    if policy == "elastic":
        return "the elastic quota tree has no over-quota weight: the setting is not used"
    return (
        "KAI divides over-quota GPUs in proportion to the weights: a queue of weight 0 gets none while others want them"
    )


def lint(projects: Sequence[Project], capacity: float | None, policy: str = "runai") -> list[Finding]:
    """What is worth a warning in these projects (a flat list or a tree) sharing ``capacity``
    GPUs under ``policy`` (``fairshare``'s policy names), in declaration order. ``capacity`` None:
    not known (the top-level quotas are not compared with it)."""
    findings: list[Finding] = []
    by_name = {project.name: project for project in projects}
    children: dict[str | None, list[Project]] = {}
    for project in projects:
        children.setdefault(project.parent, []).append(project)

    # Siblings' quotas against what they divide: the cluster at the top, their parent's quota below.
    for parent, siblings in children.items():
        total = sum(project.quota for project in siblings)
        if parent is None:
            if capacity is None:
                continue
            room, field = capacity, "projects[*].gpu_quota"
        elif parent in by_name:
            room, field = by_name[parent].quota, f"projects[parent={parent}].gpu_quota"
        else:
            continue
        if total > room + _EPSILON:
            findings.append(
                Finding(
                    "quotas-above-capacity",
                    field,
                    f"quotas adding up to at most {_number(room)} GPUs "
                    + ("(the cluster)" if parent is None else f"({parent}'s quota)"),
                    f"{_number(total)} ({', '.join(f'{p.name} {_number(p.quota)}' for p in siblings)})",
                    _over_subscribed(policy, parent),
                )
            )

    for project in projects:
        if project.limit is not None and project.limit + _EPSILON < project.quota:
            findings.append(
                Finding(
                    "limit-below-quota",
                    f"projects[{project.name}].gpu_limit",
                    f"a limit of at least the quota ({_number(project.quota)})",
                    _number(project.limit),
                    f"the limit wins: {project.name} never holds more than {_number(project.limit)} GPUs, so "
                    f"{_number(project.quota - project.limit)} of its quota can never be used",
                )
            )
        parent = by_name.get(project.parent) if project.parent else None
        if parent is not None and project.quota > parent.quota + _EPSILON:
            findings.append(
                Finding(
                    "child-above-parent",
                    f"projects[{project.name}].gpu_quota",
                    f"at most its parent {parent.name}'s quota ({_number(parent.quota)})",
                    _number(project.quota),
                    f"{project.name} is guaranteed only what {parent.name} gets: its quota above "
                    f"{_number(parent.quota)} is not guaranteed"
                    + ("; Koordinator refuses it when EnableCheckParentQuota is on" if policy == "elastic" else ""),
                )
            )
        if project.weight is not None and project.weight == 0 and not children.get(project.name):
            findings.append(
                Finding(
                    "zero-weight",
                    f"projects[{project.name}].over_quota_weight",
                    "an over-quota weight above 0",
                    "0",
                    _zero_weight(policy),
                )
            )
    return findings
