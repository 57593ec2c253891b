"""Random small fairness scenarios for the differential bench: seeded, reproducible, each a plain
scenario file (docs/scenarios.md) with no written expectation, so that the validator holds the
engine to the fair-share model alone.

Pure: the standard library only; nothing is touched. ``generate(seed, site)`` gives the same
scenario for the same seed and site, always one that ``validate/scenarios.load`` accepts.

What varies, within what the issue asks: 2 to 5 queues, each with a quota (sometimes adding up to
more than the site), sometimes a limit and an over-quota weight; 2 or 3 steps; jobs of 1, 2, 4 or 8
GPUs (no larger than a node) and, for engines that have them, fractions; train and interactive
jobs; arrivals, and from the second step on, deletions of earlier jobs. With ``Site.gangs``, some
jobs are gangs (2 to 4 pods of 1, 2 or 4 GPUs, most often all of them needed to start); those seeds
are other scenarios than the same seeds without gangs. With ``Site.resources``, queues may have CPU
and memory quotas and limits beside their GPUs and every job asks for CPU and memory in proportion
to its GPUs (KAI only; again other scenarios per seed), never more than a node holds. With
``Site.trees``, the queues are leaves of 1 to 3 departments (parent queues with a quota, sometimes
a limit and a weight, their children's quotas sometimes adding up to more than theirs); jobs go to
the leaves (KAI's hierarchical queues; again other scenarios per seed).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

SIZES = (1, 2, 4, 8)
FRACTIONS = (0.5, 0.25)
CPU_PER_GPU = (1, 2, 4, 8)  # cores a job asks per GPU, with Site.resources
MEMORY_PER_GPU = (4, 8, 16, 32)  # GiB a job asks per GPU


@dataclass(frozen=True)
class Site:
    """The sandbox the scenarios run on: ``nodes`` GPU nodes of ``node_gpus`` GPUs each."""

    nodes: int = 2
    node_gpus: int = 8
    fractions: bool = True  # the engine runs fractional GPUs (KAI does, Kueue does not)
    gangs: bool = False  # some jobs are gangs (KAI's PodGroup minMember)
    resources: bool = False  # CPU and memory quotas and requests beside the GPUs (KAI)
    trees: bool = False  # the queues are leaves under departments (KAI's parent queues)
    node_cpus: int = 80  # what a node offers pods, with resources: room for 8 cores per GPU
    node_memory_gib: int = 512

    @property
    def gpus(self) -> int:
        return self.nodes * self.node_gpus

    @property
    def node_names(self) -> list[str]:
        """The sandbox's GPU nodes as the bench's inventory names them (gpu-0000 ...)."""
        return ["gpu-%04d" % index for index in range(self.nodes)]


# The flat sites the scenarios are drawn on to check them (tests/unit/test_scenario_generator.py)
# and to fingerprint the model's predictions (bench/model_hashes.py): the default, smaller nodes,
# whole GPUs only, gangs, CPU and memory, both.
FLAT_SITES = (
    Site(),
    Site(nodes=4, node_gpus=4),
    Site(nodes=3, node_gpus=8, fractions=False),
    Site(gangs=True),
    Site(resources=True),
    Site(gangs=True, resources=True),
)


def _quotas(rng: random.Random, count: int, capacity: int) -> list[int]:
    """Whole-GPU quotas: most often adding up to the capacity or less, sometimes more."""
    over = rng.random() < 0.25
    total = rng.randint(capacity + 1, 2 * capacity) if over else rng.randint(count, capacity)
    cuts = sorted(rng.randint(0, total) for _ in range(count - 1))
    return [high - low for low, high in zip([0, *cuts], [*cuts, total], strict=True)]


def _bounds(rng: random.Random, project: dict[str, Any], gpus: int) -> None:
    """Sometimes a GPU limit above the quota, sometimes an over-quota weight."""
    if rng.random() < 0.2:
        project["gpu_limit"] = project["gpu_quota"] + rng.randint(0, gpus)
    if rng.random() < 0.3:
        project["over_quota_weight"] = rng.choice((1, 2, 4))


def _departments(rng: random.Random, names: list[str], gpus: int) -> list[dict[str, Any]]:
    """1 to 3 departments (no more than the queues), their quotas drawn as the queues' are."""
    count = rng.randint(1, min(3, len(names)))
    departments = []
    for index, quota in enumerate(_quotas(rng, count, gpus)):
        department: dict[str, Any] = {"name": f"d{index + 1}", "gpu_quota": quota}
        _bounds(rng, department, gpus)
        departments.append(department)
    return departments


def _leaf_parents(rng: random.Random, names: list[str], departments: list[str]) -> dict[str, str | None]:
    """Each queue's department (None without departments): every department gets one, the rest at random."""
    if not departments:
        return {name: None for name in names}
    shuffled = rng.sample(names, len(names))
    chosen = {name: departments[index] for index, name in enumerate(shuffled[: len(departments)])}
    chosen.update({name: rng.choice(departments) for name in shuffled[len(departments) :]})
    return {name: chosen[name] for name in names}


def _gang(rng: random.Random, number: int, projects: list[str], sizes: list[int]) -> dict[str, Any]:
    """A gang: 2 to 4 pods of up to 4 GPUs, all needed to start (most often) or some of them."""
    pods = rng.randint(2, 4)
    size = rng.choice([size for size in sizes if size <= 4])
    least = pods if rng.random() < 0.7 else rng.randint(1, pods - 1)
    kind = "interactive" if rng.random() < 0.2 else "train"
    return {
        "name": f"j{number}-{pods}x{size}g",
        "project": rng.choice(projects),
        "kind": kind,
        "gpus": size,
        "replicas": pods,
        "min_replicas": least,
    }


def _resource_bounds(rng: random.Random, project: dict[str, Any]) -> None:
    """CPU (cores) and memory (GiB) quotas and limits for a queue, each drawn or left unlimited."""
    quota = project["gpu_quota"]
    if rng.random() < 0.6:
        project["cpu_quota"] = quota * rng.choice((1, 2, 4))
    if rng.random() < 0.25:
        project["cpu_limit"] = project.get("cpu_quota", 0) + rng.randint(1, 32)
    if rng.random() < 0.3:
        project["memory_quota"] = quota * rng.choice((8, 16, 32))
    if rng.random() < 0.15:
        project["memory_limit"] = project.get("memory_quota", 0) + rng.choice((32, 64, 128))


def _requests(rng: random.Random, job: dict[str, Any]) -> None:
    """CPU and memory per pod in proportion to the job's GPUs (a fraction asks a fraction)."""
    job["cpu"] = job["gpus"] * rng.choice(CPU_PER_GPU)
    job["memory"] = job["gpus"] * rng.choice(MEMORY_PER_GPU)


def generate(seed: int, site: Site = Site()) -> dict[str, Any]:
    """One scenario, as the data of its YAML file."""
    key = f"clusterproof-differential-{seed}-{site.nodes}x{site.node_gpus}-{site.fractions}"
    rng = random.Random(
        key
        + ("-gangs" if site.gangs else "")
        + ("-resources" if site.resources else "")
        + ("-trees" if site.trees else "")
    )
    count = rng.randint(2, 5)
    names = [f"q{index + 1}" for index in range(count)]
    projects = _departments(rng, names, site.gpus) if site.trees else []
    parents = {project["name"]: project for project in projects}
    leaves = _leaf_parents(rng, names, list(parents))
    if site.trees:  # each department's quota divided among its children, as the site's among the queues
        quota_of: dict[str, int] = {}
        for department, project in parents.items():
            children = [name for name in names if leaves[name] == department]
            split = _quotas(rng, len(children), max(project["gpu_quota"], len(children)))
            quota_of.update(zip(children, split, strict=True))
        quotas = [quota_of[name] for name in names]
    else:
        quotas = _quotas(rng, count, site.gpus)
    for name, quota in zip(names, quotas, strict=True):
        project: dict[str, Any] = {"name": name, "gpu_quota": quota}
        if leaves[name] is not None:
            project["parent"] = leaves[name]
        _bounds(rng, project, site.gpus)
        if site.resources:
            _resource_bounds(rng, project)
        projects.append(project)
    sizes = [size for size in SIZES if size <= site.node_gpus]
    steps, alive, number = [], [], 0
    for step_index in range(rng.randint(2, 3)):
        step: dict[str, Any] = {"name": f"step {step_index + 1}"}
        if step_index and alive and rng.random() < 0.6:
            gone = rng.sample(alive, rng.randint(1, min(2, len(alive))))
            step["delete"] = gone
            alive = [name for name in alive if name not in gone]
        submit = []
        for _ in range(rng.randint(2, 6) if step_index == 0 else rng.randint(1, 3)):
            number += 1
            if site.gangs and rng.random() < 0.3:
                submit.append(_gang(rng, number, names, sizes))
                if site.resources:
                    _requests(rng, submit[-1])
                alive.append(submit[-1]["name"])
                continue
            fraction = site.fractions and rng.random() < 0.1
            gpus: float = rng.choice(FRACTIONS) if fraction else rng.choice(sizes)
            kind = "interactive" if rng.random() < 0.2 else "train"
            label = str(gpus).replace(".", "") if fraction else str(gpus)
            name = f"j{number}-{label}g"
            submit.append({"name": name, "project": rng.choice(names), "kind": kind, "gpus": gpus})
            if site.resources:
                _requests(rng, submit[-1])
            alive.append(name)
        step["submit"] = submit
        steps.append(step)
    return {
        "name": f"differential-{seed}",
        "title": f"Random scenario {seed} on {site.nodes} nodes of {site.node_gpus} GPUs",
        "source": "bench/scenario_generator.py, seed %d" % seed,
        "policy": "runai",
        "capacity": {"gpus": site.gpus, "node_gpus": site.node_gpus},
        "projects": projects,
        "steps": steps,
    }
