"""Fairness scenarios as data, and how an observed state is judged against them. Pure.

A scenario file (``scenarios/*.yml``, documented in docs/scenarios.md) names the projects it
needs with their quotas, and steps: workloads to submit, workloads to delete, and what to expect
once the scheduler has settled (GPUs allocated per project, the cluster total, which workloads
run and which wait, which fractions share a GPU). Expectations written in the file hold for the
capacity the scenario was written for; the fair-share model (fairshare.py) predicts every step
for the installed engine's policy as well, at any capacity the scenario scales to.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common import steps
from ansible_collections.clusterproof.gpu.plugins.module_utils.model import fairshare
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import names as tenant_names

KINDS = ("train", "interactive")
# The resource a scenario divides, and how its capacity and its workloads' sizes are spelled.
RESOURCES = {"gpu": ("gpus", "node_gpus"), "cpu": ("cpus", "node_cpus")}
# How error messages name the resource's amounts: (plural, one).
UNIT_WORDS = {"gpu": ("GPUs", "GPU"), "cpu": ("CPU cores", "core")}
SCENARIO_FIELDS = ("name", "title", "source", "policy", "resource", "capacity", "projects", "steps")
STEP_FIELDS = ("name", "submit", "delete", "expect")
EXPECT_FIELDS = ("allocated", "total", "running", "pending", "shared_gpus", "replicas")
# Allocations are compared to a hundredth of a GPU (fractions are given in hundredths).
TOLERANCE = 0.005
# Bounds of what a scenario may ask (docs/scenarios.md), so that no file makes the model or the
# cluster do unbounded work: capacity and quotas in GPUs (or cores), an over-quota weight, counts.
MAX_CAPACITY = 10_000
MAX_WEIGHT = 1_000_000
MAX_PROJECTS = 100
MAX_STEPS = 100
MAX_WORKLOADS = 1_000
MAX_REPLICAS = 1_000
TITLE_MAX = 200  # characters of a scenario's name (it names report sections and check ids)
# CPU and memory beside the GPUs (KAI's queues; the model's policy runai, flat projects, resource
# gpu only): a project's quotas and limits, a workload's requests per pod, in CPU cores and GiB.
PROJECT_RESOURCE_FIELDS = ("cpu_quota", "cpu_limit", "memory_quota", "memory_limit")
JOB_RESOURCE_FIELDS = ("cpu", "memory")
# The steps they are given in (thousandths of a core: millicores; MiB: 1/1024 GiB), their bounds,
# and how errors word them.
RESOURCE_STEPS = {"cpu": 1000, "memory": 1024}
RESOURCE_MAX = {"cpu": 1_000_000, "memory": 10_000_000}
RESOURCE_RULES = {
    "cpu": ("a non-negative number of CPU cores", ", at most %d, in thousandths (0.5, not 0.0005)"),
    "memory": ("a non-negative number of GiB", ", at most %d, in MiB (multiples of 1/1024 GiB: 0.5, not 0.0001)"),
}


class ScenarioError(ValueError):
    """A scenario file that is not as documented; the message lists every problem found."""


@dataclasses.dataclass(frozen=True)
class ScenarioJob:
    """A workload: a Job (``replicas`` None), or a Deployment of ``replicas`` pods, or with
    ``min_replicas`` a gang of ``replicas`` pods of which that many start together (KAI's PodGroup
    ``minMember``). ``gpus`` is its size (each pod's) in the scenario's resource: GPUs, or CPU cores."""

    name: str
    project: str
    kind: str
    gpus: float
    replicas: int | None = None
    min_replicas: int | None = None
    # What each pod asks beside its GPUs: CPU cores and GiB of memory (policy runai).
    cpu: float = 0.0
    memory: float = 0.0

    def model_job(self) -> fairshare.Job:
        return fairshare.Job(
            self.name,
            self.project,
            self.gpus,
            interactive=self.kind == "interactive",
            cpu=self.cpu,
            memory=self.memory,
        )

    def model_jobs(self) -> tuple[fairshare.Job, ...]:
        """The model's jobs: this one, or one per replica (``name-0`` ...)."""
        if self.replicas is None:
            return (self.model_job(),)
        return fairshare.replicas(
            self.name,
            self.project,
            self.replicas,
            self.gpus,
            self.kind == "interactive",
            self.min_replicas,
            cpu=self.cpu,
            memory=self.memory,
        )


@dataclasses.dataclass(frozen=True)
class Expectation:
    allocated: dict[str, float] | None = None
    total: float | None = None
    running: str | tuple[str, ...] | None = None  # "all", or the names that must run
    pending: tuple[str, ...] | None = None
    shared_gpus: tuple[tuple[str, ...], ...] | None = None
    replicas: dict[str, int] | None = None  # running replicas per Deployment


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    submit: tuple[ScenarioJob, ...]
    delete: tuple[str, ...]
    expect: Expectation


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    source: str
    policy: str
    # Capacity written for, and per node, in the scenario's resource (GPUs, or CPU cores).
    reference_gpus: int
    node_gpus: int
    projects: tuple[fairshare.Project, ...]
    steps: tuple[Step, ...]
    resource: str = "gpu"

    @property
    def unit(self) -> str:
        return "GPUs" if self.resource == "gpu" else "CPU cores"

    @property
    def cpu_memory_quotas(self) -> bool:
        """Whether a project declares a CPU or memory quota or limit (only KAI's queues take them)."""
        return any(
            getattr(project, field) is not None for project in self.projects for field in PROJECT_RESOURCE_FIELDS
        )

    @property
    def parents(self) -> set[str]:
        """Projects that are inner nodes of a quota tree (workloads go to the others)."""
        return {project.parent for project in self.projects if project.parent is not None}

    def jobs_after(self, index: int) -> list[ScenarioJob]:
        """Every workload that exists after step ``index``, in submission order."""
        alive: dict[str, ScenarioJob] = {}
        for step in self.steps[: index + 1]:
            for name in step.delete:
                alive.pop(name, None)
            for job in step.submit:
                alive[job.name] = job
        return list(alive.values())


@dataclasses.dataclass(frozen=True)
class Observation:
    """What the scheduler did, read from the cluster: never from the model."""

    allocated: dict[str, float]
    running: tuple[str, ...]
    pending: tuple[str, ...]
    # Groups of workloads that share one GPU (KAI's GPU group), each sorted.
    shared_gpus: tuple[tuple[str, ...], ...] = ()
    replicas: dict[str, int] = dataclasses.field(default_factory=dict)  # running pods per Deployment
    # Quota tree: each sub-project's parent; a parent's allocation is the sum of its children's.
    parents: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def total(self) -> float:
        inner = set(self.parents.values())
        return round(sum(amount for name, amount in self.allocated.items() if name not in inner), 3)


def roll_up(allocated: Mapping[str, float], parents: Mapping[str, str]) -> dict[str, float]:
    """Leaf allocations summed up a quota tree: every inner node holds what its subtree holds."""
    totals = {name: float(amount) for name, amount in allocated.items()}
    for leaf, amount in allocated.items():
        node = parents.get(leaf)
        while node is not None:
            totals[node] = totals.get(node, 0.0) + amount
            node = parents.get(node)
    return {name: round(amount, 3) for name, amount in totals.items()}


class _Errors:
    def __init__(self, where: str) -> None:
        self.where = where
        self.items: list[str] = []

    def add(self, field: str, expected: str, found: Any) -> None:
        shown = found if found == "an unknown field" or isinstance(found, Said) else _brief(found)
        self.items.append("%s: %s: expected %s, found %s" % (self.where, field, expected, shown))


class Said(str):
    """A finding already in words (``101 steps``), shown as it is rather than quoted."""


# What an error shows of a value: enough to find it, never a whole file.
SHOWN_MAX = 200


def _brief(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= SHOWN_MAX else shown[: SHOWN_MAX - 5] + " ...)"


def _number(value: Any) -> bool:
    """A finite number: NaN and infinity are refused here, before they reach the model."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# What an amount breaks when it keeps its rule but not the bounds.
_IN_BOUNDS = ", at most %d, in hundredths (0.25, not 0.001)" % MAX_CAPACITY


def _hundredths(value: Any, most: float = MAX_CAPACITY) -> bool:
    """A finite number from 0 to ``most`` in hundredths (0.25, not 0.001, nor 1e-9): what the model
    counts, decided on the decimal written (common.steps), not within a float tolerance."""
    return _number(value) and 0 <= value <= most and steps.whole_steps(value, 100)


def _in_steps(value: Any, resource: str) -> bool:
    """A CPU (cores) or memory (GiB) amount from 0 to its bound in its steps (RESOURCE_STEPS)."""
    per = RESOURCE_STEPS[resource]
    return _number(value) and 0 <= value <= RESOURCE_MAX[resource] and steps.whole_steps(value, per)


def _cpu_memory_rule(resource: str, policy: Any, flat: bool) -> str | None:
    """Why a scenario may not give CPU or memory beside the GPUs (words for an error), or None when
    it may: only with resource gpu, policy runai, and flat projects (the model and KAI's queues)."""
    if resource != "gpu":
        return "resource gpu, not %s" % resource
    if policy != "runai":
        return "policy runai, not %s" % policy
    if not flat:
        return "flat projects, not a quota tree (a project with parent)"
    return None


def _cpu_memory(
    errors: _Errors, where: str, data: Mapping[str, Any], fields: Sequence[str], rule: str | None
) -> dict[str, float] | None:
    """The CPU and memory amounts of ``fields`` that ``data`` gives, checked (each a non-negative
    number in its steps, a limit at least its quota); None when one is wrong. ``rule``: why the
    scenario may give none (``_cpu_memory_rule``)."""
    amounts: dict[str, float] = {}
    wrong = False
    for key in fields:
        value = data.get(key)
        if value is None:
            continue
        if rule is not None:
            errors.add("%s.%s" % (where, key), "no %s: CPU and memory beside the GPUs take %s" % (key, rule), value)
            wrong = True
            continue
        resource = key.split("_")[0]
        if not _in_steps(value, resource):
            text, bound = RESOURCE_RULES[resource]
            kept = _number(value) and value >= 0
            errors.add("%s.%s" % (where, key), _expected(text, kept, bound % RESOURCE_MAX[resource]), value)
            wrong = True
            continue
        amounts[key] = float(value)
    for resource in RESOURCE_STEPS:
        quota, limit = amounts.get(resource + "_quota"), amounts.get(resource + "_limit")
        if quota is not None and limit is not None and limit < quota:
            expected = "a number at least %s_quota (%s)" % (resource, _fmt(quota))
            errors.add("%s.%s_limit" % (where, resource), expected, limit)
            wrong = True
    return None if wrong else amounts


def _count(value: Any, most: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= most


def _expected(rule: str, kept: bool, bound: str) -> str:
    """The rule a value breaks: ``rule`` itself, or, when it keeps the rule (``kept``) but not the
    bound beside it (a size, hundredths), the rule with ``bound`` added."""
    return rule + bound if kept else rule


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) and item for item in value)


def load(data: Any, where: str = "scenario") -> Scenario:
    """Check a scenario's data (parsed YAML) and return it; raise ScenarioError listing every problem."""
    errors = _Errors(where)
    if not isinstance(data, Mapping):
        raise ScenarioError("%s: expected a mapping with %s, found %r" % (where, ", ".join(SCENARIO_FIELDS), data))
    for key in sorted(set(data) - set(SCENARIO_FIELDS), key=str):
        errors.add(str(key), "one of %s" % ", ".join(SCENARIO_FIELDS), "an unknown field")
    name = data.get("name")
    if not isinstance(name, str) or not name or len(name) > TITLE_MAX:
        errors.add("name", "a name of 1 to %d characters" % TITLE_MAX, name)
    for field in ("title", "source"):
        if data.get(field) is not None and not isinstance(data.get(field), str):
            errors.add(field, "a string", data.get(field))
    policy = data.get("policy", "runai")
    if policy not in fairshare.POLICIES:
        errors.add("policy", "one of %s" % ", ".join(fairshare.POLICIES), policy)
    resource = data.get("resource", "gpu")
    if not isinstance(resource, str) or resource not in RESOURCES:
        errors.add("resource", "one of %s" % ", ".join(RESOURCES), resource)
        resource = "gpu"
    amount_field, node_field = RESOURCES[resource]
    capacity = data.get("capacity") or {}
    reference = capacity.get(amount_field) if isinstance(capacity, Mapping) else None
    node_gpus = capacity.get(node_field) if isinstance(capacity, Mapping) else None
    if not isinstance(capacity, Mapping):
        errors.add("capacity", "a mapping with %s and %s" % (amount_field, node_field), capacity)
    for field, value in (("capacity." + amount_field, reference), ("capacity." + node_field, node_gpus)):
        if not _count(value, MAX_CAPACITY):
            rule = "a positive whole number of %s" % UNIT_WORDS[resource][0]
            errors.add(field, _expected(rule, _count(value, math.inf), ", at most %d" % MAX_CAPACITY), value)
    if _count(reference, MAX_CAPACITY) and _count(node_gpus, MAX_CAPACITY) and node_gpus > reference:
        errors.add("capacity." + node_field, "at most capacity.%s (%d)" % (amount_field, reference), node_gpus)
    node_size = node_gpus if _count(node_gpus, MAX_CAPACITY) else MAX_CAPACITY
    raw_projects = data.get("projects")
    tree = isinstance(raw_projects, list) and any(
        isinstance(project, Mapping) and project.get("parent") is not None for project in raw_projects
    )
    cpu_memory = _cpu_memory_rule(resource, policy, not tree)
    projects = _load_projects(errors, raw_projects, resource, cpu_memory)
    known_projects = {project.name for project in projects}
    leaves = known_projects - {project.parent for project in projects if project.parent}
    steps = []
    submitted: set[str] = set()
    raw_steps = data.get("steps") or []
    if not isinstance(raw_steps, list) or len(raw_steps) > MAX_STEPS:
        shown = Said("%d steps" % len(raw_steps)) if isinstance(raw_steps, list) else raw_steps
        errors.add("steps", "a list of 1 to %d steps" % MAX_STEPS, shown)
        raw_steps = []
    for index, step in enumerate(raw_steps):
        parsed = _load_step(errors, index, step, leaves, submitted, resource, known_projects, node_size, cpu_memory)
        if parsed is not None:
            steps.append(parsed)
    if not steps and isinstance(data.get("steps") or [], list):
        errors.add("steps", "at least one step", data.get("steps"))
    workloads = sum(len(step.submit) for step in steps)
    if workloads > MAX_WORKLOADS:
        errors.add("steps", "at most %d workloads in all" % MAX_WORKLOADS, Said("%d workloads" % workloads))
    if errors.items:
        raise ScenarioError("; ".join(errors.items))
    return Scenario(
        name=str(name),
        title=str(data.get("title") or name),
        source=str(data.get("source") or ""),
        policy=str(policy),
        reference_gpus=int(reference),
        node_gpus=int(node_gpus),
        projects=tuple(projects),
        steps=tuple(steps),
        resource=str(resource),
    )


# Project fields: Run:AI's names for GPU scenarios, the elastic quota tree's (min, max) for any.
PROJECT_FIELDS = ("name", "parent", "gpu_quota", "gpu_limit", "min", "max", "over_quota_weight")


def _load_projects(errors: _Errors, data: Any, resource: str, cpu_memory: str | None = None) -> list[fairshare.Project]:
    """The scenario's projects; ``cpu_memory``: why they may declare no CPU or memory quotas (None: they may)."""
    projects: list[fairshare.Project] = []
    names: set[str] = set()
    if data is not None and (not isinstance(data, list) or len(data) > MAX_PROJECTS):
        shown = Said("%d projects" % len(data)) if isinstance(data, list) else data
        errors.add("projects", "a list of 1 to %d projects" % MAX_PROJECTS, shown)
        return projects
    for index, project in enumerate(data or []):
        field = "projects[%d]" % index
        if not isinstance(project, Mapping) or not isinstance(project.get("name"), str):
            errors.add(field, "a mapping with name and gpu_quota (or min)", project)
            continue
        allowed = PROJECT_FIELDS if resource == "gpu" else tuple(f for f in PROJECT_FIELDS if not f.startswith("gpu_"))
        if cpu_memory is None:
            allowed += PROJECT_RESOURCE_FIELDS
        # CPU and memory fields where they may not be are named by _cpu_memory, not as unknown.
        for key in sorted(set(project) - set(allowed) - set(PROJECT_RESOURCE_FIELDS), key=str):
            errors.add("%s.%s" % (field, key), "one of %s" % ", ".join(allowed), "an unknown field")
        name = project["name"]
        if not _dns_label(name) or name in names:
            errors.add(field + ".name", "a DNS label (it names a namespace and a queue) not used before", name)
        quota = project.get("min", project.get("gpu_quota"))
        limit = project.get("max", project.get("gpu_limit"))
        if not _hundredths(quota):
            errors.add(
                field + (".min" if "min" in project or resource != "gpu" else ".gpu_quota"),
                _expected("a non-negative number", _number(quota) and quota >= 0, _IN_BOUNDS),
                quota,
            )
            continue
        if limit is not None and (not _hundredths(limit) or limit < quota):
            errors.add(
                field + (".max" if "max" in project else ".gpu_limit"),
                _expected("a number at least the quota (%s)" % quota, _number(limit) and limit >= quota, _IN_BOUNDS),
                limit,
            )
            continue
        weight = project.get("over_quota_weight")
        if weight is not None and not (_number(weight) and 0 <= weight <= MAX_WEIGHT):
            errors.add(field + ".over_quota_weight", "a number from 0 to %d" % MAX_WEIGHT, weight)
            continue
        parent = project.get("parent")
        if parent is not None and (not isinstance(parent, str) or parent not in names):
            declared = ", ".join(sorted(names)) or "none yet"
            errors.add(field + ".parent", "a project declared before it (%s)" % declared, parent)
            continue
        amounts = _cpu_memory(errors, field, project, PROJECT_RESOURCE_FIELDS, cpu_memory)
        if amounts is None:
            continue
        names.add(name)
        projects.append(
            fairshare.Project(
                name,
                float(quota),
                None if limit is None else float(limit),
                None if weight is None else float(weight),
                parent,
                **amounts,
            )
        )
    if not projects:
        errors.add("projects", "at least one project", data)
    return projects


# Scenario names become namespaces and queues behind a prefix (``scn-`` by default): room is kept for it.
NAME_MAX = 52


def _dns_label(name: str) -> bool:
    return tenant_names.is_dns_label(name, NAME_MAX)


def _load_step(
    errors: _Errors,
    index: int,
    step: Any,
    projects: set[str],
    submitted: set[str],
    resource: str,
    all_projects: set[str],
    node_size: int = MAX_CAPACITY,
    cpu_memory: str | None = None,
) -> Step | None:
    amount_field = RESOURCES[resource][0]
    plural, one = UNIT_WORDS[resource]
    field = "steps[%d]" % index
    if not isinstance(step, Mapping):
        errors.add(field, "a mapping with name, submit, delete and expect", step)
        return None
    for key in sorted(set(step) - set(STEP_FIELDS), key=str):
        errors.add("%s.%s" % (field, key), "one of %s" % ", ".join(STEP_FIELDS), "an unknown field")
    jobs = []
    job_fields = ("name", "project", "kind", amount_field, "replicas", "min_replicas")
    allowed = job_fields + (JOB_RESOURCE_FIELDS if cpu_memory is None else ())
    submit = step.get("submit") or []
    if not isinstance(submit, list):
        errors.add(field + ".submit", "a list of workloads", submit)
        submit = []
    for number, job in enumerate(submit):
        where = "%s.submit[%d]" % (field, number)
        if not isinstance(job, Mapping):
            errors.add(where, "a mapping with %s" % ", ".join(job_fields), job)
            continue
        for key in sorted(set(job) - set(allowed) - set(JOB_RESOURCE_FIELDS), key=str):
            errors.add("%s.%s" % (where, key), "one of %s" % ", ".join(allowed), "an unknown field")
        name, project, kind, gpus, replicas, min_replicas = (job.get(key) for key in job_fields)
        if not isinstance(name, str) or not _dns_label(name) or name in submitted:
            errors.add(where + ".name", "a workload name (a DNS label) not used before in the scenario", name)
        if not isinstance(project, str) or project not in projects:
            errors.add(
                where + ".project",
                "one of the scenario's projects without sub-projects (%s)" % ", ".join(sorted(projects)),
                project,
            )
        if kind not in KINDS:
            errors.add(where + ".kind", "one of %s" % ", ".join(KINDS), kind)
        if replicas is not None and not _count(replicas, MAX_REPLICAS):
            errors.add(
                where + ".replicas",
                _expected(
                    "a positive whole number of pods (a Deployment)",
                    _count(replicas, math.inf),
                    ", at most %d" % MAX_REPLICAS,
                ),
                replicas,
            )
            continue
        if min_replicas is not None and (replicas is None or not _count(min_replicas, replicas)):
            errors.add(
                where + ".min_replicas",
                "a positive whole number of pods that start together, at most replicas (%s)"
                % ("not given" if replicas is None else replicas),
                min_replicas,
            )
            continue
        if min_replicas is not None and not (_number(gpus) and gpus >= 1):
            errors.add(where + "." + amount_field, "whole %s for each pod of a gang (min_replicas)" % plural, gpus)
            continue
        whole_or_fraction = _number(gpus) and gpus > 0 and (gpus < 1 or gpus == int(gpus))
        if not whole_or_fraction or not _hundredths(gpus):
            rule = "whole %s, or a fraction of one %s below 1" % (plural, one)
            errors.add(where + "." + amount_field, _expected(rule, whole_or_fraction, _IN_BOUNDS), gpus)
            continue
        if gpus > node_size:
            node_field = RESOURCES[resource][1]
            errors.add(
                where + "." + amount_field,
                "at most capacity.%s (%d): one node holds a pod" % (node_field, node_size),
                gpus,
            )
            continue
        amounts = _cpu_memory(errors, where, job, JOB_RESOURCE_FIELDS, cpu_memory)
        if amounts is None:
            continue
        if isinstance(name, str):
            submitted.add(name)
        jobs.append(ScenarioJob(str(name), str(project), str(kind), float(gpus), replicas, min_replicas, **amounts))
    delete = step.get("delete") or []
    if not _names(delete):
        errors.add(field + ".delete", "a list of workload names", delete)
        delete = []
    for name in delete:
        if name not in submitted:
            errors.add(field + ".delete", "workloads submitted in an earlier step", name)
    expect = _load_expectation(errors, field + ".expect", step.get("expect") or {}, all_projects, submitted)
    return Step(str(step.get("name") or "step %d" % (index + 1)), tuple(jobs), tuple(delete), expect)


def _unknown_workloads(errors: _Errors, field: str, names: Any, submitted: set[str]) -> None:
    """Expectations name workloads submitted by this step or before (a typo would expect nothing)."""
    for name in sorted(set(names) - submitted, key=str):
        errors.add(field, "workloads submitted by this step or before", name)


def _load_expectation(
    errors: _Errors, field: str, data: Any, projects: set[str], submitted: set[str] = frozenset()
) -> Expectation:
    if not isinstance(data, Mapping):
        errors.add(field, "a mapping with %s" % ", ".join(EXPECT_FIELDS), data)
        return Expectation()
    for key in sorted(set(data) - set(EXPECT_FIELDS), key=str):
        errors.add("%s.%s" % (field, key), "one of %s" % ", ".join(EXPECT_FIELDS), "an unknown field")
    allocated = data.get("allocated")
    if allocated is not None:
        if not isinstance(allocated, Mapping) or not all(_hundredths(v) for v in allocated.values()):
            errors.add(
                field + ".allocated", "a mapping of project to GPUs (0 to %d, in hundredths)" % MAX_CAPACITY, allocated
            )
            allocated = None
        else:
            for project in set(allocated) - projects:
                errors.add(field + ".allocated", "the scenario's projects", project)
            allocated = {str(k): float(v) for k, v in allocated.items()}
    total = data.get("total")
    if total is not None and not _hundredths(total):
        errors.add(field + ".total", "a number of GPUs from 0 to %d in hundredths" % MAX_CAPACITY, total)
        total = None
    running = data.get("running")
    if running is not None and running != "all" and not _names(running):
        errors.add(field + ".running", "'all' or a list of workload names", running)
        running = None
    elif running not in (None, "all"):
        _unknown_workloads(errors, field + ".running", running, submitted)
    pending = data.get("pending")
    if pending is not None and not _names(pending):
        errors.add(field + ".pending", "a list of workload names", pending)
        pending = None
    elif pending is not None:
        _unknown_workloads(errors, field + ".pending", pending, submitted)
    shared = data.get("shared_gpus")
    if shared is not None and not (isinstance(shared, list) and all(_names(group) for group in shared)):
        errors.add(field + ".shared_gpus", "a list of lists of workload names", shared)
        shared = None
    elif shared is not None:
        _unknown_workloads(errors, field + ".shared_gpus", [name for group in shared for name in group], submitted)
    replicas = data.get("replicas")
    if replicas is not None and not (
        isinstance(replicas, Mapping)
        and all(
            isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= MAX_REPLICAS
            for count in replicas.values()
        )
    ):
        errors.add(
            field + ".replicas", "a mapping of Deployment name to running replicas (0 to %d)" % MAX_REPLICAS, replicas
        )
        replicas = None
    return Expectation(
        replicas=None if replicas is None else {str(k): int(v) for k, v in replicas.items()},
        allocated=allocated,
        total=None if total is None else float(total),
        running=running if running in (None, "all") else tuple(running),
        pending=None if pending is None else tuple(pending),
        shared_gpus=None if shared is None else tuple(tuple(sorted(group)) for group in shared),
    )


@dataclasses.dataclass(frozen=True)
class SitePlan:
    """How a scenario runs on one site: sized to it, on which of its nodes."""

    written: Scenario  # as the file has it
    scenario: Scenario  # as it runs here: quotas, jobs and written expectations scaled
    nodes: tuple[tuple[str, int], ...]  # the GPU nodes it runs on
    unused_nodes: tuple[str, ...]  # GPU nodes it stays off (the scenario's workloads are pinned)
    scale: Fraction  # site GPUs used / GPUs the scenario was written for

    @property
    def gpus(self) -> int:
        return sum(gpus for _, gpus in self.nodes)

    @property
    def exact(self) -> bool:
        """The site is the capacity the scenario was written for: its tables hold as written."""
        return self.scale == 1 and not self.unused_nodes and self.scenario.node_gpus == self.written.node_gpus

    def describe(self) -> str:
        """One line for the report: at what size the scenario ran."""
        unit = self.scenario.unit
        written = "%d %s on nodes of %d" % (self.written.reference_gpus, unit, self.written.node_gpus)
        if self.exact:
            return "as written, on %s" % written
        text = "on %d %s (nodes of %d: %s), scaled %s× from the %s it was written for" % (
            self.gpus,
            unit,
            self.scenario.node_gpus,
            ", ".join(name for name, _ in self.nodes),
            _fmt(float(self.scale)),
            written,
        )
        if self.unused_nodes:
            text += "; its workloads are kept off %s" % ", ".join(self.unused_nodes)
        return text


def written_holds(scenario: Scenario, index: int, prediction: fairshare.Prediction) -> bool:
    """Whether step ``index``'s (scaled) written expectation carries over to this site: the model of
    the scenario's policy, sized to the site, reaches the same allocation, the same waiting workloads
    and the same running replicas. Where it does not (nodes of another size fragment differently),
    the model's prediction is what the scheduler is held to."""
    expect = scenario.steps[index].expect
    allocated = all(
        _close(prediction.allocated.get(project, 0.0), gpus) for project, gpus in (expect.allocated or {}).items()
    )
    pending = expect.pending is None or sorted(expect.pending) == sorted(prediction.pending)
    replicas = predicted_replicas(scenario, index, prediction)
    running = all(replicas.get(name) == count for name, count in (expect.replicas or {}).items())
    return allocated and pending and running


def without_fractions(scenario: Scenario) -> tuple[Scenario, dict[int, tuple[str, ...]]]:
    """The scenario for an engine without fractional GPUs (Kueue): its fractional workloads left
    out, and per step index the fractional workloads that would have been alive there (the steps
    whose written tables cannot apply)."""
    fractions = {job.name for step in scenario.steps for job in step.submit if job.gpus < 1}
    affected = {}
    for index in range(len(scenario.steps)):
        alive = tuple(job.name for job in scenario.jobs_after(index) if job.name in fractions)
        if alive:
            affected[index] = alive

    def kept(names: Sequence[str] | None) -> tuple[str, ...] | None:
        return None if names is None else tuple(name for name in names if name not in fractions)

    steps = []
    for step in scenario.steps:
        expect = step.expect
        steps.append(
            Step(
                step.name,
                tuple(job for job in step.submit if job.name not in fractions),
                kept(step.delete) or (),
                dataclasses.replace(
                    expect,
                    running=expect.running if expect.running in (None, "all") else kept(expect.running),
                    pending=kept(expect.pending),
                    shared_gpus=None,
                ),
            )
        )
    return dataclasses.replace(scenario, steps=tuple(steps)), affected


def fit_to_site(scenario: Scenario, nodes: Sequence[tuple[str, int]]) -> SitePlan | str:
    """Size ``scenario`` (read as shares of the capacity it was written for) to a site's GPU nodes.

    The scenario runs on nodes of one size (the size that holds the largest scaled copy); quotas,
    whole-GPU jobs and written allocations scale with the capacity, fractions are repeated
    (``name``, ``name-x2``, ...) or resized (fairshare.scale_scenario says how). Written shared-GPU
    groups are repeated with their fractions, and dropped when fractions are resized (the model
    still predicts them). CPU and memory beside the GPUs scale as the GPUs do: quotas and limits,
    and the requests of whole-GPU and resized workloads (a repeated fraction keeps its own), to a
    millicore and a MiB. Returns the reason, as a sentence, when the site cannot hold the scenario.
    """
    by_size: dict[int, list[str]] = {}
    for name, gpus in nodes:
        if gpus > 0:
            by_size.setdefault(gpus, []).append(name)
    if not by_size:
        return "the site declares no GPU nodes"
    written_jobs = [job.model_job() for step in scenario.steps for job in step.submit]
    best: tuple[int, int, fairshare.ScaledScenario] | None = None
    reasons = []
    for size, names in sorted(by_size.items(), reverse=True):
        scaled = fairshare.scale_scenario(
            scenario.projects, written_jobs, scenario.reference_gpus, size * len(names), size
        )
        if isinstance(scaled, str):
            reasons.append("%d-GPU nodes: %s" % (size, scaled) if len(by_size) > 1 else scaled)
        elif best is None or scaled.gpus > best[2].gpus:
            best = (size, len(names), scaled)
    if best is None:
        return "; ".join(reasons)
    size, _, scaled = best
    used = by_size[size][: scaled.nodes]
    unused = tuple(name for name, gpus in nodes if gpus > 0 and name not in used)
    scale = Fraction(scaled.gpus, scenario.reference_gpus)
    written_projects = {project.name: project for project in scenario.projects}
    scaled_projects = tuple(
        dataclasses.replace(
            project,
            **{
                field: _scaled_amount(getattr(written_projects[project.name], field), scale, field)
                for field in PROJECT_RESOURCE_FIELDS
            },
        )
        for project in scaled.projects
    )
    scaled_scenario = dataclasses.replace(
        scenario,
        reference_gpus=scaled.gpus,
        node_gpus=size,
        projects=scaled_projects,
        steps=_scaled_steps(scenario, scale),
    )
    return SitePlan(scenario, scaled_scenario, tuple((name, size) for name in used), unused, scale)


def _scaled_amount(value: float | None, scale: Fraction, field: str) -> float | None:
    """A CPU (cores) or memory (GiB) amount times ``scale``, to its step (a millicore, a MiB)."""
    if value is None:
        return None
    per = RESOURCE_STEPS[field.split("_")[0]]
    return round(value * scale * per) / per


def _copies(job: ScenarioJob, scale: Fraction) -> list[ScenarioJob]:
    scaled = fairshare.scaled_jobs_for([job.model_job()], scale)
    if scaled is None:  # fit_to_site picked a scale at which every job scales
        raise ValueError("workload %s does not scale by %s" % (job.name, scale))
    # A fraction repeated keeps its size, and its CPU and memory; a resized job scales them too.
    same = len(scaled) > 1 or (scaled and scaled[0].gpus == job.gpus and job.gpus < 1 and scale.denominator == 1)
    factor = Fraction(1) if same else scale
    cpu = _scaled_amount(job.cpu, factor, "cpu") or 0.0
    memory = _scaled_amount(job.memory, factor, "memory") or 0.0
    return [
        ScenarioJob(copy.name, job.project, job.kind, copy.gpus, job.replicas, job.min_replicas, cpu, memory)
        for copy in scaled
    ]


def _scaled_steps(scenario: Scenario, scale: Fraction) -> tuple[Step, ...]:
    written = {job.name: job.gpus for step in scenario.steps for job in step.submit}
    copies = {job.name: _copies(job, scale) for step in scenario.steps for job in step.submit}

    def names(original: Sequence[str]) -> tuple[str, ...]:
        return tuple(copy.name for name in original for copy in copies[name])

    def groups(shared: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...] | None:
        members = [name for group in shared for name in group]
        if any(copy.gpus != written[name] for name in members for copy in copies[name]):
            return None  # fractions were resized: how they pair up is the model's to predict
        count = len(copies[members[0]]) if members else 1
        return tuple(
            sorted(tuple(sorted(copies[name][k].name for name in group)) for group in shared for k in range(count))
        )

    steps = []
    for step in scenario.steps:
        expect = step.expect
        steps.append(
            Step(
                name=step.name,
                submit=tuple(copy for job in step.submit for copy in copies[job.name]),
                delete=names(step.delete),
                expect=Expectation(
                    allocated=None
                    if expect.allocated is None
                    else {project: _times(gpus, scale) for project, gpus in expect.allocated.items()},
                    total=None if expect.total is None else _times(expect.total, scale),
                    running=expect.running if expect.running in (None, "all") else names(expect.running),
                    pending=None if expect.pending is None else names(expect.pending),
                    shared_gpus=None if expect.shared_gpus is None else groups(expect.shared_gpus),
                    replicas=expect.replicas,
                ),
            )
        )
    return tuple(steps)


def _times(gpus: float, scale: Fraction) -> float:
    return float(Fraction(gpus).limit_denominator(1000) * scale)


def predictions(
    scenario: Scenario, nodes: Sequence[fairshare.Node | tuple[str, int]], policy: str | None = None
) -> list[fairshare.Prediction]:
    """The fair-share model's stable state after each step, for ``policy`` (the installed
    engine's; by default the one the scenario's tables were written for), chained as the runner
    runs a step: the step's deletions settle first, then its workloads arrive one at a time, each
    settled before the next (the runner waits for the engine's decision about each,
    ``scenario_runner._placed_or_waiting``), so that an
    early arrival takes idle GPUs before a later one is known (a differential scenario showed KAI
    lending a whole node to the first arrival of a queue with no share). ``nodes``: (name, GPUs),
    or fairshare.Node with the CPU cores and memory the node offers, whose fair shares CPU and
    memory quotas divide (``scenario_runner.model_nodes``)."""
    model_policy = policy or scenario.policy
    results = []
    running: Mapping[str, fairshare.Placement] = {}
    waiting: Sequence[str] = ()
    for index, step in enumerate(scenario.steps):
        at_start = set(running)
        before = scenario.jobs_after(index - 1) if index else []
        alive = {job.name: job for job in before if job.name not in step.delete}
        # The deletions settle first (where there are any, or nothing arrives), then each arrival.
        arrivals: list[ScenarioJob | None] = [None] if step.delete or not step.submit else []
        for arrival in arrivals + list(step.submit):
            if arrival is not None:
                alive[arrival.name] = arrival
            jobs = [model for job in alive.values() for model in job.model_jobs()]
            prediction = fairshare.predict(model_policy, nodes, scenario.projects, jobs, running, waiting)
            running, waiting = prediction.placements, prediction.waiting
        # What the step evicted: jobs that ran when it began and wait at its end (any arrival's doing).
        evicted = tuple(name for name in prediction.pending if name in at_start)
        results.append(dataclasses.replace(prediction, preempted=evicted))
    return results


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE


def _fmt(value: float) -> str:
    return ("%.2f" % value).rstrip("0").rstrip(".")


def judge(
    scenario: Scenario,
    index: int,
    observed: Observation,
    prediction: fairshare.Prediction | None,
    written_applies: bool,
    duration_s: float,
    engine_policy: str | None = None,
) -> list[Check]:
    """Checks for one step: the observed state against the written expectation (when it applies
    at this site's capacity) and against the model's prediction for the engine's policy.

    When the engine implements another policy than the one the scenario's tables were written for
    (``engine_policy``), a difference from the tables is a warning, not a failure: the engine is
    held to the model of its own policy, and the report says where it departs from the document.
    """
    step = scenario.steps[index]
    prefix = "scenario/%s/%d" % (scenario.name, index + 1)
    checks: list[Check] = []
    names = [job.name for job in scenario.jobs_after(index)]
    expect = step.expect
    unit = scenario.unit
    other_policy = engine_policy is not None and engine_policy != scenario.policy
    miss = "warn" if other_policy else "fail"
    why = (
        "the document describes the %s policy; the engine implements %s" % (scenario.policy, engine_policy)
        if other_policy
        else ""
    )

    def written(check_id, title, ok, expected, seen, message=""):
        detail = "; ".join(part for part in (message, "" if ok else why) if part)
        checks.append(Check(check_id, title, "pass" if ok else miss, expected, seen, detail, duration_s))

    if written_applies:
        for project, gpus in sorted((expect.allocated or {}).items()):
            seen = observed.allocated.get(project, 0.0)
            ok = _close(seen, gpus)
            written(
                "%s/allocated/%s" % (prefix, project),
                "%s: %s holds %s %s" % (step.name, project, _fmt(gpus), unit),
                ok,
                _fmt(gpus),
                _fmt(seen),
                "" if ok else _involved(project, observed, scenario, index),
            )
        if expect.total is not None:
            ok = _close(observed.total, expect.total)
            written(
                "%s/total" % prefix,
                "%s: %s %s allocated in all" % (step.name, _fmt(expect.total), unit),
                ok,
                _fmt(expect.total),
                _fmt(observed.total),
            )
        wanted_running = names if expect.running == "all" else list(expect.running or [])
        if wanted_running:
            missing = sorted(set(wanted_running) - set(observed.running))
            written(
                "%s/running" % prefix,
                "%s: %s run" % (step.name, "all workloads" if expect.running == "all" else ", ".join(wanted_running)),
                not missing,
                ", ".join(sorted(wanted_running)),
                ", ".join(sorted(set(observed.running))),
                "not running: %s" % ", ".join(missing) if missing else "",
            )
        if expect.pending is not None:
            written(
                "%s/pending" % prefix,
                "%s: pending are %s" % (step.name, ", ".join(sorted(expect.pending)) or "none"),
                sorted(expect.pending) == sorted(set(observed.pending)),
                ", ".join(sorted(expect.pending)) or "(none)",
                ", ".join(sorted(set(observed.pending))) or "(none)",
            )
        if expect.shared_gpus is not None:
            wanted = sorted(expect.shared_gpus)
            seen_groups = sorted(observed.shared_gpus)
            written(
                "%s/shared-gpus" % prefix,
                "%s: fractions share GPUs as expected" % step.name,
                wanted == seen_groups,
                _groups(wanted),
                _groups(seen_groups),
            )
        for deployment, count in sorted((expect.replicas or {}).items()):
            seen_count = observed.replicas.get(deployment, 0)
            written(
                "%s/replicas/%s" % (prefix, deployment),
                "%s: %s runs %d replica(s)" % (step.name, deployment, count),
                seen_count == count,
                str(count),
                str(seen_count),
            )
    if prediction is not None:
        policy = prediction.policy
        for project in sorted(p.name for p in scenario.projects):
            predicted = prediction.allocated.get(project, 0.0)
            seen = observed.allocated.get(project, 0.0)
            checks.append(
                Check(
                    id="%s/model/%s" % (prefix, project),
                    title="%s: %s as the %s model predicts" % (step.name, project, policy),
                    status="pass" if _close(seen, predicted) else "fail",
                    expected=_fmt(predicted),
                    observed=_fmt(seen),
                    message="" if _close(seen, predicted) else _involved(project, observed, scenario, index),
                    duration_s=duration_s,
                )
            )
        for deployment, count in sorted(predicted_replicas(scenario, index, prediction).items()):
            seen_count = observed.replicas.get(deployment, 0)
            checks.append(
                Check(
                    id="%s/model/replicas/%s" % (prefix, deployment),
                    title="%s: %s replicas as the %s model predicts" % (step.name, deployment, policy),
                    status="pass" if seen_count == count else "fail",
                    expected=str(count),
                    observed=str(seen_count),
                    message="",
                    duration_s=duration_s,
                )
            )
    return checks


def predicted_replicas(scenario: Scenario, index: int, prediction: fairshare.Prediction) -> dict[str, int]:
    """Running replicas per Deployment in the model's stable state after step ``index``."""
    return {
        job.name: sum(1 for model in job.model_jobs() if model.name in prediction.placements)
        for job in scenario.jobs_after(index)
        if job.replicas is not None
    }


def reproduction(scenario: Scenario, checks: Sequence[Check], engine: str, engine_policy: str) -> Check:
    """Whether the engine reproduced the document's tables: one check for the report's summary."""
    written = [
        check
        for check in checks
        if check.id.startswith("scenario/%s/" % scenario.name)
        and "/model/" not in check.id
        and check.status in ("pass", "warn", "fail")
    ]
    differing = sorted({check.title.split(":")[0] for check in written if check.status != "pass"})
    same = scenario.policy == engine_policy
    return Check(
        "scenario/%s/reproduces-document" % scenario.name,
        "%s reproduces the document's tables (%s policy; %s implements %s)"
        % (engine, scenario.policy, engine, engine_policy),
        "pass" if written and not differing else ("skip" if not written else ("fail" if same else "warn")),
        "the document's tables",
        "as written"
        if written and not differing
        else ("not checked" if not written else "differs at " + "; ".join(differing)),
        "",
        0.0,
    )


def _groups(groups: Sequence[Sequence[str]]) -> str:
    return "; ".join("+".join(group) for group in groups) or "(none)"


def _involved(project: str, observed: Observation, scenario: Scenario, index: int) -> str:
    jobs = [job.name for job in scenario.jobs_after(index) if job.project == project]
    running = [name for name in jobs if name in observed.running]
    waiting = [name for name in jobs if name in observed.pending]
    return "%s running: %s; pending: %s" % (project, ", ".join(running) or "none", ", ".join(waiting) or "none")


@dataclasses.dataclass(frozen=True)
class Disruption:
    """What a step cost the work that was running: ``evicted`` workloads (with the pods each lost),
    their GPUs, against the GPUs the step's new workloads asked for."""

    requested: float
    evicted: tuple[tuple[str, float], ...]  # (workload, GPUs it lost), in submission order

    @property
    def evicted_gpus(self) -> float:
        return round(sum(amount for _, amount in self.evicted), 3)

    @property
    def per_requested(self) -> float | None:
        """GPUs evicted per GPU requested (None when the step asked for none)."""
        return round(self.evicted_gpus / self.requested, 3) if self.requested else None


def _held(job: ScenarioJob, observed: Observation) -> float:
    """What a workload holds in a state: a Job its size when it runs, a Deployment its running pods'."""
    if job.replicas is not None:
        return job.gpus * observed.replicas.get(job.name, 0)
    return job.gpus if job.name in observed.running else 0.0


def disruption(scenario: Scenario, index: int, before: Observation | None, after: Observation) -> Disruption:
    """The evictions of step ``index``: workloads that ran before it (and that it did not delete)
    holding less after it. ``before`` is the previous step's state (None for the first step)."""
    step = scenario.steps[index]
    requested = sum(job.gpus * (job.replicas or 1) for job in step.submit)
    evicted: list[tuple[str, float]] = []
    if before is not None and index > 0:
        for job in scenario.jobs_after(index - 1):
            if job.name in step.delete:
                continue
            lost = _held(job, before) - _held(job, after)
            if lost > TOLERANCE:
                evicted.append((job.name, round(lost, 3)))
    return Disruption(round(requested, 3), tuple(evicted))


def workload_of(scenario: Scenario) -> dict[str, str]:
    """Each model job's workload (a replica ``name-0`` is ``name``'s): the names the observed side
    of a table uses."""
    return {model.name: job.name for step in scenario.steps for job in step.submit for model in job.model_jobs()}


def disruption_table(
    scenario: Scenario,
    observed: Sequence[Observation],
    predictions: Sequence[fairshare.Prediction | None],
) -> dict[str, Any]:
    """Per step: GPUs requested, GPUs evicted (observed and as the model predicts), evicted per
    requested, and which workloads were evicted (a report table's data). A step that evicts more
    than it asks for (KAI's history has a 48-GPU request that evicted 376) is marked warn."""
    unit = scenario.unit
    owner = workload_of(scenario)
    rows, status = [], []
    for index, after in enumerate(observed):
        seen = disruption(scenario, index, observed[index - 1] if index else None, after)
        prediction = predictions[index] if index < len(predictions) else None
        names = dict.fromkeys(owner.get(name, name) for name in prediction.preempted) if prediction else {}
        predicted = "—" if prediction is None else ", ".join(names) or "none"
        rows.append(
            [
                scenario.steps[index].name,
                _fmt(seen.requested),
                _fmt(seen.evicted_gpus),
                "—" if seen.per_requested is None else _fmt(seen.per_requested),
                ", ".join("%s (%s)" % (name, _fmt(amount)) for name, amount in seen.evicted) or "none",
                predicted,
            ]
        )
        status.append("warn" if seen.evicted_gpus > seen.requested + TOLERANCE else "pass")
    return {
        "id": "scenario-%s-disruption" % scenario.name,
        "title": "Disruption per step: %s evicted per %s requested" % (unit, unit),
        "columns": [
            "Step",
            "Requested (%s)" % unit,
            "Evicted (%s)" % unit,
            "Evicted per requested",
            "Evicted workloads (observed)",
            "Evicted workloads (model)",
        ],
        "rows": rows,
        "row_status": status,
    }


def step_table(
    scenario: Scenario,
    index: int,
    observed: Observation,
    prediction: fairshare.Prediction | None,
    written_applies: bool,
) -> dict[str, Any]:
    """Per project: quota, written expectation, model prediction, observed (a report table's data)."""
    step = scenario.steps[index]
    rows, status = [], []
    for project in scenario.projects:
        expected = (step.expect.allocated or {}).get(project.name) if written_applies else None
        predicted = prediction.allocated.get(project.name, 0.0) if prediction is not None else None
        seen = observed.allocated.get(project.name, 0.0)
        rows.append(
            [
                project.name,
                _fmt(project.quota),
                "—" if expected is None else _fmt(expected),
                "—" if predicted is None else _fmt(predicted),
                _fmt(seen),
            ]
        )
        ok = (expected is None or _close(seen, expected)) and (predicted is None or _close(seen, predicted))
        status.append("pass" if ok else "fail")
    return {
        "id": "scenario-%s-step-%d" % (scenario.name, index + 1),
        "title": "%s: %s per project (quota, written, model, observed)" % (step.name, scenario.unit),
        "columns": ["Project", "Quota", "Expected (written)", "Predicted (model)", "Observed"],
        "rows": rows,
        "row_status": status,
    }
