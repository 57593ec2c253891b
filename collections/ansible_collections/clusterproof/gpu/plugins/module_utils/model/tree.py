"""The projects as the model indexes them: declaration order, parents, paths to the top, children,
and per project its quota, limit and over-quota weight in units (GPU thousandths; CPU and memory
beside them, ``ResourceBounds``).

May import the standard library and ``model.data``. Touches nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import (
    CPU_UNITS,
    INF,
    MEMORY_UNITS,
    RESOURCES,
    UNITS_PER_GPU,
    Project,
)


@dataclass(frozen=True)
class ResourceBounds:
    """One resource's quota and limit per project, in its units (INF: none)."""

    quota: list[float]
    limit: list[float]


def resource_units(value: float | None, per: int, what: str) -> float:
    """A CPU (cores) or memory (GiB) amount in the model's units; None (none declared) is INF."""
    if value is None:
        return INF
    if value < 0:
        raise ValueError(f"{what} is {value}: must not be negative")
    return round(value * per)


class Tree:
    """Projects by index: declaration order, parents, paths to the top, children."""

    def __init__(self, projects: Sequence[Project]) -> None:
        self.projects = list(projects)
        self.index: dict[str, int] = {}
        for i, project in enumerate(self.projects):
            if project.name in self.index:
                raise ValueError(f"project {project.name!r} is declared twice")
            if project.quota < 0 or (project.limit is not None and project.limit < 0):
                raise ValueError(f"project {project.name!r}: quota and limit must not be negative")
            if project.weight is not None and project.weight < 0:
                raise ValueError(f"project {project.name!r}: weight must not be negative")
            self.index[project.name] = i
        count = len(self.projects)
        self.parent = [-1] * count
        self.children: list[list[int]] = [[] for _ in range(count)]
        self.top: list[int] = []
        for i, project in enumerate(self.projects):
            if project.parent is None:
                self.top.append(i)
                continue
            if project.parent not in self.index:
                raise ValueError(f"project {project.name!r}: parent {project.parent!r} is not declared")
            self.parent[i] = self.index[project.parent]
            self.children[self.parent[i]].append(i)
        self.path: list[tuple[int, ...]] = []
        for i in range(count):
            chain = [i]
            while self.parent[chain[-1]] >= 0:
                chain.append(self.parent[chain[-1]])
                if len(chain) > count:
                    raise ValueError(f"project {self.projects[i].name!r} is its own ancestor")
            self.path.append(tuple(chain))
        self.quota = [p.quota * UNITS_PER_GPU for p in self.projects]
        self.limit = [INF if p.limit is None else p.limit * UNITS_PER_GPU for p in self.projects]
        self.weight = [p.quota if p.weight is None else p.weight for p in self.projects]
        self.grain = UNITS_PER_GPU
        # CPU (millicores) and memory (MiB) quotas and limits, INF where none is declared.
        self.resources = [
            ResourceBounds(
                *(
                    [resource_units(getattr(p, field), per, f"project {p.name!r}: {field}") for p in projects]
                    for field in (f"{resource}_quota", f"{resource}_limit")
                )
            )
            for resource, per in zip(RESOURCES, (CPU_UNITS, MEMORY_UNITS), strict=True)
        ]
        self.multi_resource = any(bound < INF for bounds in self.resources for bound in bounds.quota + bounds.limit)

    def for_resource(self, r: int) -> Tree:
        """This tree with CPU's (``r`` 0) or memory's (1) quotas and limits in place of the GPUs',
        for dividing that resource's fair shares (weights stay: the KAI adapter writes a queue's
        GPU over-quota weight for its CPU and memory too)."""
        other = copy.copy(self)
        other.quota = self.resources[r].quota
        other.limit = self.resources[r].limit
        other.grain = 1
        return other

    def bottom_up(self) -> list[int]:
        order: list[int] = []
        stack = list(self.top)
        while stack:
            i = stack.pop()
            order.append(i)
            stack.extend(self.children[i])
        return order[::-1]
