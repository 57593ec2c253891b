"""The fairness scenario runner: a scenario's projects and workloads on the live cluster, judged.

``run`` does what modules/validate_scenario.py documents: fit the scenario to the site, refuse a
busy cluster, make the scenario's projects exist (prefixed namespaces and the engine's objects for
them), run its steps (submit and delete workloads, wait until the allocation has settled), judge
every step (``validate/scenarios.py``), and always remove what it created, also on an error or a
signal. It talks to the engine only through its :class:`~scheduler.base.Backend` and to the
cluster only through ``kube.client``.

Unlike the rest of ``validate/`` this touches the cluster: the objects it creates are its own,
prefixed, labelled with the run (``RUN_LABEL``), and gone when it returns. What stops a run (an API
error, the API server gone, a signal, a node not Ready, the engine's process stopped) becomes the
scenario's failed check ``scenario/<name>/stopped`` naming the cause; what a run could not remove
(the API server gone) a later run finds by its label and removes before it starts. On the sandbox it
reads the engine's process records (``sandbox.control_plane.running_pid``) to tell a stopped
scheduler from a slow one.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common import yaml_file
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import base as kube_base
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.model import fairshare, quota_lint
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import model as report
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler.base import Backend
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects, quota_tree, workloads
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import projects as project_validation
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import scenarios

# The group (KAI's department queue, Kueue's cohort) a flat scenario's projects hang under, after the prefix.
GROUP_SUFFIX = "scenarios"
# Every object a run creates carries its run's id under this label, so that what an interrupted or
# cut-off run left behind is found (and removed) by the next one.
RUN_LABEL = "clusterproof.io/scenario-run"
# Seconds to wait for a run's namespaces to be gone, when cleaning up after it or before one.
CLEANUP_SECONDS = 90


class ScenarioRefused(Exception):
    """The scenario was not started, and nothing was changed; the message says why."""


class Interrupted(Exception):
    pass


class Unhealthy(Exception):
    """A step cannot settle: a node it uses is not Ready, or the engine cannot place workloads."""


@dataclasses.dataclass(frozen=True)
class RunOptions:
    settle_seconds: float = 6
    # After submitting a workload, how long to wait for the engine's decision about it before the
    # next arrives (``_placed_or_waiting``): where a waiting workload has pods, until each runs or
    # the engine has marked it unschedulable for now, at most ``decision_seconds``; where it has
    # none (Kueue's suspended Jobs), until it runs, at most ``arrival_seconds``.
    arrival_seconds: float = 3
    decision_seconds: float = 60
    step_timeout: int = 180
    namespace_prefix: str = "scn-"
    force: bool = False
    # The sandbox's state directory, where the engine's processes are recorded; None off the sandbox.
    sandbox_state_dir: str | None = None
    # Called after each step is judged, with the scenario's name, the step's index and the run's project
    # namespaces, while the step's state holds; the checks it returns go into the scenario's section
    # (the module's check of Prometheus's allocation against the pods'). None: nothing more is checked.
    after_step: Callable[[str, int, Sequence[str]], list[dict[str, Any]]] | None = dataclasses.field(
        default=None, compare=False
    )


@dataclasses.dataclass
class ScenarioResult:
    section: dict[str, Any]
    duration_s: float = 0.0
    skip_reason: str | None = None
    # Why the run stopped (also its failed check ``scenario/<name>/stopped``), or None.
    error: str | None = None
    # When the run was on the cluster (wall clock, seconds since the epoch) and its projects' names
    # there (scenario project -> namespace and queue), for what Prometheus recorded of it; None when
    # it did not run.
    window: dict[str, Any] | None = None

    @property
    def failed_checks(self) -> int:
        return sum(1 for check in self.section["checks"] if check["status"] == "fail")

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {"section": self.section, "duration_s": self.duration_s}
        result["failed_checks"] = self.failed_checks
        if self.skip_reason is not None:
            result["skip_reason"] = self.skip_reason
        if self.error is not None:
            result["stopped"] = self.error
        if self.window is not None:
            result["window"] = self.window
        return result


def load(path: Path, content: bytes | None = None) -> scenarios.Scenario:
    """The scenario file at ``path`` (or its ``content``, the bytes read where the file is, on the
    controller), read by the project's one YAML loader (UTF-8, no aliases, bounded size) and
    checked; ScenarioRefused names the file and every problem found."""
    try:
        data = yaml_file.load(path) if content is None else yaml_file.loads(content, str(path))
        return scenarios.load(data, where=str(path))
    except OSError as error:
        raise ScenarioRefused("scenario %s: %s; nothing was changed" % (path, error.strerror or error)) from None
    except (yaml_file.YamlFileError, scenarios.ScenarioError) as error:
        raise ScenarioRefused("scenario %s: %s; nothing was changed" % (path, error)) from None


def _brief(error: BaseException) -> str:
    """Why a run stopped, in a line: an API error as the API server's message (its status and
    reason), an unreachable API server as its address and the socket's error, not the client's dump."""
    if isinstance(error, kube.ApiException):
        return kube.api_error_message(error)
    if isinstance(error, (Interrupted, Unhealthy, kube.KubeError)):
        return str(error)
    return kube_base.unreachable_message(error) or "%s: %s" % (type(error).__name__, error)


def leftovers(objects: Iterable[Mapping[str, Any]], prefix: str) -> list[str]:
    """The names, among ``objects`` (API objects as dicts), of those an earlier scenario run left:
    labelled with ``RUN_LABEL`` (whatever run) and named with the scenario ``prefix``. Pure."""
    found = []
    for item in objects:
        metadata = item.get("metadata") or {}
        name = str(metadata.get("name") or "")
        if RUN_LABEL in (metadata.get("labels") or {}) and name.startswith(prefix):
            found.append(name)
    return sorted(found)


def node_problem(nodes: Iterable[Mapping[str, Any]], wanted: Iterable[str]) -> str | None:
    """Why the nodes ``wanted`` cannot hold the scenario's workloads, from the cluster's ``nodes``
    (API objects as dicts): the first that is missing or not Ready, with its condition. Pure."""
    by_name = {(node.get("metadata") or {}).get("name"): node for node in nodes}
    for name in wanted:
        node = by_name.get(name)
        if node is None:
            return "node %s is not in the cluster" % name
        ready = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
        if not ready or ready[0].get("status") != "True":
            condition = ready[0] if ready else {}
            said = ": ".join(str(part) for part in (condition.get("reason"), condition.get("message")) if part)
            return "node %s is NotReady (Ready=%s%s)" % (
                name,
                condition.get("status", "missing"),
                "; %s" % said if said else "",
            )
    return None


def refused_pods(events: Iterable[Mapping[str, Any]], prefix: str) -> str | None:
    """Why a workload of the scenario gets no pod, from the cluster's events (as dicts): the first
    FailedCreate of an object in a namespace of the run (an admission refusal, a missing
    RuntimeClass). Such a step would only wait out its timeout. Pure."""
    for event in events:
        involved = event.get("involvedObject") or event.get("involved_object") or {}
        namespace = str(involved.get("namespace") or "")
        if event.get("reason") == "FailedCreate" and namespace.startswith(prefix):
            return "the pods of %s %s/%s are refused: %s" % (
                str(involved.get("kind") or "object").lower(),
                namespace,
                involved.get("name"),
                event.get("message"),
            )
    return None


def process_state(pid: int | None) -> tuple[int, str] | None:
    """(pid, state letter of ``/proc/<pid>/stat``) of a live process, None when there is none."""
    if pid is None:
        return None
    try:
        stat = Path("/proc/%d/stat" % pid).read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; the state follows its closing parenthesis.
    return pid, stat[stat.rindex(")") + 2 :].split()[0]


def _skipped(section: dict[str, Any], scenario: scenarios.Scenario, reason: str) -> ScenarioResult:
    section["checks"].append(
        {"id": "scenario/%s" % scenario.name, "title": scenario.title, "status": "skip", "message": reason}
    )
    return ScenarioResult(section, skip_reason=reason)


def run(
    path: Path,
    nodes: Sequence[Mapping[str, Any]],
    backend: Backend,
    options: RunOptions,
    connect: Callable[[], Any],
    check_mode: bool = False,
    content: bytes | None = None,
) -> ScenarioResult:
    """Run the scenario at ``path`` on the site's ``nodes`` (as the inventory declares them) with
    the engine ``backend``; ``connect`` gives the API client. Raises ScenarioRefused when the
    scenario is not started; a run that stops on the way returns with ``error`` set, and its
    failed check ``scenario/<name>/stopped``."""
    scenario = load(path, content)
    section: dict[str, Any] = {
        "id": "scenario-%s" % scenario.name,
        "title": "Scenario: %s" % scenario.title,
        "checks": [],
        "tables": [],
        "charts": [],
    }
    try:
        return _run_loaded(scenario, section, nodes, backend, options, connect, check_mode)
    except ScenarioRefused:
        raise
    except Exception as error:  # what the runner did not foresee: the scenario's failed check, not a traceback
        cause = _brief(error)
        section["checks"].append(stopped_check(scenario, "preparing its run", "%s; nothing was changed" % cause))
        return ScenarioResult(section, error=cause)


def stopped_check(scenario: scenarios.Scenario, where: str, message: str) -> dict[str, Any]:
    """The failed check of a scenario run that stopped: where it was and why."""
    return {
        "id": "scenario/%s/stopped" % scenario.name,
        "title": "%s: the scenario ran to its end" % scenario.title,
        "status": "fail",
        "expected": "every step settled",
        "observed": "stopped while %s" % where,
        "message": "scenario %s stopped: %s" % (scenario.name, message),
    }


def change_between(before: scenarios.Observation | None, after: scenarios.Observation) -> str:
    """What differs from ``before`` to ``after``, in words ("j1 running -> waiting; q4 8 -> 0 GPUs"),
    so that a step that never settles says what kept moving."""
    if before is None:
        return "the first observation"
    parts = []
    for name in sorted(set(before.running) | set(before.pending) | set(after.running) | set(after.pending)):
        was, now = _where(name, before), _where(name, after)
        if was != now:
            parts.append("%s %s -> %s" % (name, was, now))
    for project in sorted(set(before.allocated) | set(after.allocated)):
        was_amount, now_amount = before.allocated.get(project, 0.0), after.allocated.get(project, 0.0)
        if was_amount != now_amount:
            parts.append("%s %g -> %g" % (project, was_amount, now_amount))
    if before.shared_gpus != after.shared_gpus:
        parts.append("shared GPUs %s -> %s" % (list(before.shared_gpus), list(after.shared_gpus)))
    if before.replicas != after.replicas:
        parts.append("replicas %s -> %s" % (before.replicas, after.replicas))
    return "; ".join(parts) or "no change"


def _state(observed: scenarios.Observation) -> tuple[Any, ...]:
    """What a step waits on to stop changing (what ``change_between`` describes)."""
    return (observed.allocated, observed.running, observed.pending, observed.shared_gpus, observed.replicas)


def _where(name: str, observed: scenarios.Observation) -> str:
    if name in observed.running:
        return "running"
    return "waiting" if name in observed.pending else "absent"


def unsettled_check(
    scenario: scenarios.Scenario, index: int, options: RunOptions, last_change: str = ""
) -> dict[str, Any]:
    """The failed check of a step whose allocation still changed when ``step_timeout`` ran out: the
    engine moves workloads back and forth (or more slowly than the timeout allows), so what the
    step's other checks saw is a passing moment, not a settled state. ``last_change``: the last
    change seen, at what second of the step (from ``change_between``)."""
    step = scenario.steps[index].name
    return {
        "id": "scenario/%s/%d/settled" % (scenario.name, index + 1),
        "title": "%s: the allocation settles" % step,
        "status": "fail",
        "expected": "no change for %g s" % options.settle_seconds,
        "observed": "still changing after %d s" % options.step_timeout
        + ("; the last change %s" % last_change if last_change else ""),
        "message": "%s of scenario %s did not settle within step_timeout (%d s): the engine still placed or "
        "evicted workloads; the step's timeline in the report shows how" % (step, scenario.name, options.step_timeout),
    }


def _run_loaded(
    scenario: scenarios.Scenario,
    section: dict[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    backend: Backend,
    options: RunOptions,
    connect: Callable[[], Any],
    check_mode: bool,
) -> ScenarioResult:
    capacity_key = "cpu_cores" if scenario.resource == "cpu" else "gpu_count"
    if check_mode:
        return _skipped(section, scenario, "check mode: the scenario was not run")
    sizes = [(str(node["name"]), int(node.get(capacity_key) or 0)) for node in nodes]
    reached: tuple[Any, list[Any]] | None = None
    if scenario.resource == "cpu":
        # A real cluster's DaemonSets (its CNI, kube-proxy) run on every node and request CPU there:
        # the scenario is sized to the whole cores they leave (on the sandbox, all of them).
        reached = _reach(connect, scenario.name)
        overhead = daemonset_requests(reached[1], backend.pod_cpus)
        sizes = [(name, math.floor(size - overhead.get(name, 0.0))) for name, size in sizes]
    plan = scenarios.fit_to_site(scenario, sizes)
    if isinstance(plan, str):
        reason = "written for %d %s on nodes of %d; this site cannot hold it: %s" % (
            scenario.reference_gpus,
            scenario.unit,
            scenario.node_gpus,
            plan,
        )
        return _skipped(section, scenario, reason)
    section["title"] += " (%s)" % plan.describe()
    scenario = plan.scenario
    # Quota lint before the run: settings the engine accepts but treats in its own way are warned of.
    findings = quota_lint.lint(scenario.projects, float(sum(size for _, size in plan.nodes)), backend.policy)
    section["checks"] += [
        check.to_dict() for check in project_validation.quota_lint_checks(findings, "scenario/%s" % scenario.name)
    ]
    # Steps whose written tables cannot apply on this engine, with the reason.
    not_applicable = {}
    if not backend.fractions and any(job.gpus < 1 for step in scenario.steps for job in step.submit):
        scenario, affected = scenarios.without_fractions(scenario)
        if not any(step.submit for step in scenario.steps):
            reason = "%s has no fractional GPUs, and every workload of this scenario is a fraction of a GPU" % (
                backend.display_name
            )
            return _skipped(section, scenario, reason)
        for index, names in affected.items():
            not_applicable[index] = (
                "%s has no fractional GPUs: %s left out, so the document's table does not apply to this step; "
                "the model, without them, is checked" % (backend.display_name, ", ".join(names))
            )
    if scenario.cpu_memory_quotas and not backend.cpu_memory_quotas:
        reason = (
            "%s takes no CPU or memory quotas, and this scenario's projects declare them (KAI scheduler's queues do)"
            % (backend.display_name)
        )
        return _skipped(section, scenario, reason)
    gangs = sorted(job.name for step in scenario.steps for job in step.submit if job.min_replicas is not None)
    if gangs and not backend.gangs:
        reason = "%s is not given gangs by clusterproof, and this scenario has gangs (min_replicas: %s)" % (
            backend.display_name,
            ", ".join(gangs),
        )
        return _skipped(section, scenario, reason)
    prefix = options.namespace_prefix
    own = {prefix + project.name for project in scenario.projects}
    api, pods = reached or _reach(connect, scenario.name)
    amount = backend.pod_cpus if scenario.resource == "cpu" else backend.pod_gpus
    skipped = own | set(registry.own_namespaces())
    busy = foreign_pods(pods, skipped, {name for name, _ in plan.nodes}, amount)
    if busy and not options.force:
        raise ScenarioRefused(
            "scenario %s not started: %d workload pod(s) outside it hold or wait for %s (%s); "
            "nothing was changed; set force to run anyway"
            % (scenario.name, len(busy), scenario.unit, ", ".join(busy[:5]))
        )
    return _Run(api, backend, options, scenario, plan, section, not_applicable).run()


class _Run:
    """One run of a fitted scenario on the cluster: its objects, its steps, its timeline."""

    def __init__(
        self,
        api: Any,
        backend: Backend,
        options: RunOptions,
        scenario: scenarios.Scenario,
        plan: scenarios.SitePlan,
        section: dict[str, Any],
        not_applicable: Mapping[int, str],
    ) -> None:
        self.backend, self.options, self.scenario, self.plan = backend, options, scenario, plan
        self.section, self.not_applicable = section, not_applicable
        self.prefix = options.namespace_prefix
        self.core, self.batch, self.apps = kube.core_v1(api), kube.batch_v1(api), kube.apps_v1(api)
        self.applier = kube.Applier(api)
        self.api = api
        self.timeline: list[Any] = []
        self.last_change = ""  # the last change a step's polls saw (said when a step does not settle)
        self.started = time.monotonic()
        self.started_wall = time.time()
        self.created: dict[str, tuple[scenarios.ScenarioJob, list[dict[str, Any]]]] = {}
        # The pods of each gang not deleted: recreated when the scheduler evicts them.
        self.gangs: dict[str, list[dict[str, Any]]] = {}
        # Every pod the last observation listed, by name (finished and terminating ones too).
        self.listed_pods: set[str] = set()
        # This run's id, on every object it creates (RUN_LABEL): unique per process and time.
        self.run_id = "%s-%d" % (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), os.getpid())
        state_dir = options.sandbox_state_dir
        self.layout = None if state_dir is None else control_plane.Layout(Path(state_dir))
        # Where the run is, for the check that says where it stopped.
        self.where = "preparing its projects"

    def _labelled(self, manifest: dict[str, Any]) -> dict[str, Any]:
        manifest.setdefault("metadata", {}).setdefault("labels", {})[RUN_LABEL] = self.run_id
        return manifest

    def run(self) -> ScenarioResult:
        def interrupt(signum: int, frame: Any) -> None:
            raise Interrupted("interrupted by %s" % signal.Signals(signum).name)

        def let_cleanup_finish(signum: int, frame: Any) -> None:
            pass  # the cleanup under way is what a further signal asks for: it must not be cut short

        previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        objects: list[dict[str, Any]] = []
        error = None
        try:
            objects = [
                self._labelled(manifest)
                for manifest in project_objects(self.scenario, self.prefix, self.plan.gpus, self.backend)
            ]
            self._remove_leftovers(objects)
            self._check_health()
            # What the scenario's workloads refer to of the site (the engine's install makes it; kept after).
            for manifest in self.backend.site_objects():
                self.applier.apply(manifest)
            for manifest in objects:
                self.applier.apply(manifest)
            # A Deployment's pods made before its namespace's default ServiceAccount are refused
            # (a FailedCreate, which fails the step): the run waits for it in each namespace.
            for manifest in objects:
                if manifest["kind"] == "Namespace":
                    kube.wait_for_default_service_account(self.api, manifest["metadata"]["name"])
            self._steps()
        except Exception as stopped:  # the run's boundary: whatever stops it becomes its failed check
            error = _brief(stopped)
        finally:
            for sig in previous:
                signal.signal(sig, let_cleanup_finish)
            left = self._cleanup(objects)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if error is not None:
            self.section["checks"].append(self._stopped_check(error, left))
        self.section["charts"].append(
            {
                "id": "scenario-%s-timeline" % self.scenario.name,
                "title": "%s allocated per project over time (%s)" % (self.scenario.unit, self.scenario.name),
                "timeline": self.timeline,
            }
        )
        duration = round(time.monotonic() - self.started, 1)
        window = {
            "start": self.started_wall,
            "end": self.started_wall + duration,
            "projects": {
                project.name: self.prefix + project.name
                for project in self.scenario.projects
                if project.name not in self.scenario.parents
            },
            "resource": self.scenario.resource,
        }
        return ScenarioResult(self.section, duration, error=error, window=window)

    def _stopped_check(self, cause: str, left: str | None) -> dict[str, Any]:
        """The failed check of a run that stopped: where, why, and whether its objects are gone."""
        if left is None:
            after = "everything it created was removed"
        else:
            after = "what it created could not all be removed (%s); the next run removes it first (label %s=%s)" % (
                left,
                RUN_LABEL,
                self.run_id,
            )
        return stopped_check(self.scenario, self.where, "%s; %s" % (cause, after))

    def _check_health(self) -> None:
        """Fail the step now, naming the cause, when it cannot settle: a node the scenario uses is
        not Ready, a workload's pods are refused, or (on the sandbox) a process of the engine is
        gone or stopped."""
        problem = node_problem(kube.list_nodes(self.api), [name for name, _ in self.plan.nodes])
        if problem is None:
            events = self.core.list_event_for_all_namespaces(field_selector="reason=FailedCreate").items
            problem = refused_pods((self.api.sanitize_for_serialization(e) for e in events), self.prefix)
        if problem is None and self.layout is not None:
            layout = self.layout
            states = {
                name: process_state(control_plane.running_pid(layout, name)) for name in self.backend.health_processes
            }
            problem = self.backend.health_problem(states)
        elif problem is None:
            # Off the sandbox the engine runs as pods: one that crashed or is not ready names the cause.
            pods = self.core.list_namespaced_pod(self.backend.system_namespace).items
            problem = self.backend.cluster_health_problem(self.api.sanitize_for_serialization(pod) for pod in pods)
        if problem is not None:
            raise Unhealthy(problem)

    def _remove_leftovers(self, objects: Sequence[dict[str, Any]]) -> None:
        """Remove what an earlier run of a scenario left (found by RUN_LABEL and the prefix): its
        namespaces (their workloads with them), then its engine objects, before this run makes its own."""
        labelled = self.core.list_namespace(label_selector=RUN_LABEL).items
        namespaces = leftovers((self.api.sanitize_for_serialization(ns) for ns in labelled), self.prefix)
        for name in namespaces:
            self.core.delete_namespace(name, propagation_policy="Background")
        cluster_kinds = list(
            dict.fromkeys(
                (manifest["apiVersion"], manifest["kind"])
                for manifest in reversed(objects)
                if manifest["kind"] != "Namespace" and not manifest["metadata"].get("namespace")
            )
        )
        for api_version, kind in cluster_kinds:
            found = self.applier.dynamic.resources.get(api_version=api_version, kind=kind).get(label_selector=RUN_LABEL)
            for name in leftovers(found.to_dict().get("items") or [], self.prefix):
                self.applier.delete({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}})
        if namespaces and not self._namespaces_gone(set(namespaces)):
            raise kube.KubeError(
                "namespaces an earlier scenario run left (%s) are still terminating after %d s"
                % (", ".join(namespaces), CLEANUP_SECONDS)
            )

    def _steps(self) -> None:
        scenario, plan, backend = self.scenario, self.plan, self.backend
        # On a site larger than the scenario, its workloads stay on the nodes it was sized to.
        pinned = tuple(name for name, _ in plan.nodes) if plan.unused_nodes else ()
        settings = {
            project.name: workloads.ProjectSettings(self.prefix + project.name, pinned, pinned)
            for project in scenario.projects
        }
        # The engine is held to the model of its own policy; the tables to the scenario's. CPU and
        # memory quotas divide what the live nodes offer pods.
        nodes: list[fairshare.Node | tuple[str, int]] = list(plan.nodes)
        if scenario.cpu_memory_quotas:
            nodes = list(model_nodes(plan.nodes, kube.list_nodes(self.api)))
        model = scenarios.predictions(scenario, nodes, backend.policy)
        written_model = scenarios.predictions(scenario, nodes)
        states: list[scenarios.Observation] = []
        for index, step in enumerate(scenario.steps):
            step_started = time.monotonic()
            self.where = "running step %d (%s)" % (index + 1, step.name)
            self._check_health()
            for name in step.delete:
                self._delete(name)
            freed_settled = True
            if step.delete:
                # Ended workloads free their GPUs before anything new arrives, and what was waiting
                # takes them (the document's order, and one that does not race the scheduler).
                remaining = [
                    job.name for job in (scenario.jobs_after(index - 1) if index else []) if job.name not in step.delete
                ]
                _, freed_settled = self._settle(remaining)
            for job in step.submit:
                self._submit(job, settings[job.project])
            observed, settled = self._settle([job.name for job in scenario.jobs_after(index)])
            states.append(observed)
            if not (settled and freed_settled):
                self.section["checks"].append(unsettled_check(scenario, index, self.options, self.last_change))
            self._judge(index, observed, model[index], written_model[index], round(time.monotonic() - step_started, 1))
            if self.options.after_step is not None and scenario.resource == "gpu":
                self.where = "checking what was recorded of step %d (%s)" % (index + 1, step.name)
                leaves = [
                    self.prefix + project.name for project in scenario.projects if project.name not in scenario.parents
                ]
                self.section["checks"] += self.options.after_step(scenario.name, index, sorted(leaves))
        self.section["tables"].append(scenarios.disruption_table(scenario, states, model))
        judged = [report.Check.from_dict(check) for check in self.section["checks"]]
        self.section["checks"].append(
            scenarios.reproduction(scenario, judged, backend.display_name, backend.policy).to_dict()
        )

    def _submit(self, job: scenarios.ScenarioJob, settings: workloads.ProjectSettings) -> None:
        namespace = self.prefix + job.project
        workload = workloads.Workload(job.name, namespace, job.kind, job.gpus, cpu=job.cpu, memory=job.memory)
        manifests = self.backend.workload_manifests(
            workload, settings, job.replicas, self.scenario.resource, job.min_replicas
        )
        manifests = [self._labelled(manifest) for manifest in manifests]
        self.created[job.name] = (job, manifests)
        submitted = time.monotonic()
        for manifest in manifests:
            if manifest["kind"] == "Deployment":
                self.apps.create_namespaced_deployment(namespace, manifest)
            elif manifest["kind"] == "Job":
                self.batch.create_namespaced_job(namespace, manifest)
            else:  # a gang's PodGroup and pods
                self.applier.apply(manifest)
        if job.min_replicas is not None:
            self.gangs[job.name] = [manifest for manifest in manifests if manifest["kind"] == "Pod"]
        # Workloads arrive one after the other, as users submit them and as the model reads them:
        # the scheduler places each before the next comes.
        self._placed_or_waiting(namespace, job.name, job.replicas or 1, submitted)
        if self.backend.arrival_gap_seconds:
            time.sleep(self.backend.arrival_gap_seconds)

    def _delete(self, name: str) -> None:
        job, manifests = self.created[name]
        self.gangs.pop(name, None)
        for manifest in manifests:
            namespace, object_name = self.prefix + job.project, manifest["metadata"]["name"]
            if manifest["kind"] == "Deployment":
                self.apps.delete_namespaced_deployment(object_name, namespace, propagation_policy="Background")
            elif manifest["kind"] == "Job":
                self.batch.delete_namespaced_job(object_name, namespace, propagation_policy="Background")
            else:
                self.applier.delete(manifest)

    def _recreate_gang_pods(self) -> None:
        """Create again the pods of a gang that the scheduler evicted (gone from the last
        observation's listing): what a gang's controller (a training operator) does, so that an
        evicted gang waits in its queue as a Job's pods do."""
        for pods in self.gangs.values():
            for pod in pods:
                if pod["metadata"]["name"] not in self.listed_pods:
                    self.applier.apply(pod)

    def _judge(
        self,
        index: int,
        observed: scenarios.Observation,
        prediction: Any,
        written_prediction: Any,
        duration: float,
    ) -> None:
        scenario, plan, section = self.scenario, self.plan, self.section
        applies = index not in self.not_applicable and (
            plan.exact or scenarios.written_holds(scenario, index, written_prediction)
        )
        if index in self.not_applicable:
            section["checks"].append(
                {
                    "id": "scenario/%s/%d/written" % (scenario.name, index + 1),
                    "title": "%s: the document's table" % scenario.steps[index].name,
                    "status": "skip",
                    "message": self.not_applicable[index],
                }
            )
        elif not applies:
            section["checks"].append(
                {
                    "id": "scenario/%s/%d/written" % (scenario.name, index + 1),
                    "title": "%s: the document's table, scaled to this site" % scenario.steps[index].name,
                    "status": "skip",
                    "message": "does not carry over to %s; the model's prediction is checked instead" % plan.describe(),
                }
            )
        section["checks"] += [
            check.to_dict()
            for check in scenarios.judge(scenario, index, observed, prediction, applies, duration, self.backend.policy)
        ]
        section["tables"].append(scenarios.step_table(scenario, index, observed, prediction, applies))

    def _pod_amount(self, pod: Any) -> float:
        return self.backend.pod_cpus(pod) if self.scenario.resource == "cpu" else self.backend.pod_gpus(pod)

    def _observe(self, alive: Sequence[str] = ()) -> scenarios.Observation:
        """What the scheduler did. ``alive``: the workloads that exist now; one with no running pod
        waits (where a waiting workload has no pod at all, as a suspended Job under Kueue)."""
        scenario = self.scenario
        allocated: dict[str, float] = {}
        running: list[str] = []
        pending: list[str] = []
        groups: dict[str, list[str]] = {}
        replicas: dict[str, int] = {}
        listed: set[str] = set()
        deployments = {job.name for step in scenario.steps for job in step.submit if job.replicas is not None}
        for project in scenario.projects:
            allocated[project.name] = 0.0
            if project.name in scenario.parents:
                continue  # inner node of a quota tree: it holds what its children hold
            for pod in self.core.list_namespaced_pod(self.prefix + project.name).items:
                listed.add(pod.metadata.name)
                if pod.metadata.deletion_timestamp or pod.status.phase in ("Succeeded", "Failed"):
                    continue
                name = (pod.metadata.labels or {}).get(workloads.WORKLOAD_NAME_LABEL)
                if pod.status.phase == "Running" and pod.spec.node_name:
                    allocated[project.name] += self._pod_amount(pod)
                    if name in deployments:
                        replicas[name] = replicas.get(name, 0) + 1
                    running.append(name)
                    group = self.backend.shared_gpu_group(pod)
                    if group:
                        groups.setdefault(group, []).append(name)
                else:
                    pending.append(name)
        self.listed_pods = listed
        parents = {project.name: project.parent for project in scenario.projects if project.parent}
        rolled = scenarios.roll_up({key: round(value, 3) for key, value in allocated.items()}, parents)
        shared = tuple(sorted(tuple(sorted(members)) for members in groups.values()))
        waiting = set(pending) | (set(alive) - set(running))
        return scenarios.Observation(
            rolled, tuple(sorted(set(running))), tuple(sorted(waiting)), shared, replicas, parents
        )

    def _settle(self, expected_names: Sequence[str]) -> tuple[scenarios.Observation, bool]:
        """Poll until every workload has a pod (where waiting workloads have pods) and nothing has
        changed for ``settle_seconds`` (then: the state and True), or ``step_timeout`` has passed
        (the last state seen and False)."""
        pods_first = self.backend.waiting_workloads_have_pods
        began = time.monotonic()
        deadline = began + self.options.step_timeout
        since = began
        previous: scenarios.Observation | None = None  # the last poll's state, where it moved
        while True:
            observed = self._observe(() if pods_first else expected_names)
            if self.gangs:
                self._recreate_gang_pods()
            self.timeline.append([round(time.monotonic() - self.started, 1), dict(observed.allocated)])
            missing = set(expected_names) - set(observed.running) - set(observed.pending) if pods_first else set()
            moved = previous is None or _state(observed) != _state(previous)
            now = time.monotonic()
            if moved:
                self.last_change = "at %.0f s, %s" % (now - began, change_between(previous, observed))
                previous = observed
            elif missing:
                self.last_change = "at %.0f s, still waiting for a pod of %s" % (
                    now - began,
                    ", ".join(sorted(missing)),
                )
            if moved or missing:
                since = now
            elif now - since >= self.options.settle_seconds:
                return observed, True
            if now > deadline:
                return observed, False
            if not moved:
                # Nothing moved since the last poll: make sure it is not because a node or the engine
                # cannot (while the allocation moves, both are evidently working; listing every node
                # on each poll of a busy step is the API server's load for nothing).
                self._check_health()
            time.sleep(1)

    def _placed_or_waiting(
        self, namespace: str, name: str, pods_wanted: int = 1, submitted: float | None = None
    ) -> None:
        """Wait until the engine has decided about the workload just submitted, so that the next
        one arrives after that decision, as the model reads arrivals (``scenarios.predictions``).
        Where a waiting workload has pods: until ``engine_decided`` (each pod runs, or the engine
        marked it unschedulable for now), at most ``decision_seconds``. Under load a fixed 3 s was
        too short: KAI had not yet placed a 0.6 GPU when the 0.4 came, placed both in one cycle, on
        two GPUs instead of one. Where a waiting workload has no pod (a suspended Job): until it
        runs, at most ``arrival_seconds``; nothing marks it. After a pod that shares a GPU runs, the
        next arrival also waits ``shared_gpu_settle`` (``submitted``: when the workload was
        created, by the monotonic clock)."""
        selector = "%s=%s" % (workloads.WORKLOAD_NAME_LABEL, name)
        pods_first = self.backend.waiting_workloads_have_pods
        seen: list[Any] = []

        def decided() -> bool:
            seen[:] = self.core.list_namespaced_pod(namespace, label_selector=selector).items
            if pods_first:
                return engine_decided(seen, pods_wanted)
            return sum(1 for pod in seen if _runs(pod)) >= pods_wanted

        timeout = self.options.decision_seconds if pods_first else self.options.arrival_seconds
        waited = wait_until(decided, timeout=timeout, interval=0.25)
        if any(_runs(pod) and self.backend.shared_gpu_group(pod) for pod in seen):
            took = waited.waited_s if submitted is None else time.monotonic() - submitted
            time.sleep(shared_gpu_settle(took, self.backend.shared_gpu_settle_seconds))

    def _cleanup(self, objects: Sequence[dict[str, Any]]) -> str | None:
        """Remove what the run created; None when it is gone, else why not (a sentence)."""
        try:
            for manifest in reversed(objects):
                self.applier.delete(manifest)
            names = {self.prefix + project.name for project in self.scenario.projects}
            if not self._namespaces_gone(names):
                return "namespaces still terminating after %d s" % CLEANUP_SECONDS
        except Exception as error:  # the API server gone: the label lets the next run finish the job
            return _brief(error)
        return None

    def _namespaces_gone(self, names: set[str]) -> bool:
        def gone() -> bool:
            return not names & {ns.metadata.name for ns in self.core.list_namespace().items}

        return wait_until(gone, timeout=CLEANUP_SECONDS, interval=1).held


# The longest wait after a fraction runs on a shared GPU (``shared_gpu_settle``).
SHARED_GPU_SETTLE_CAP = 30.0


def shared_gpu_settle(decided_after: float, floor: float) -> float:
    """Seconds the next arrival waits after a pod that shares a GPU runs, so that the engine's cache
    holds that GPU's share when it places the next fraction: the engine's own ``floor`` (KAI: two of
    its cycles), or as long as the engine took to decide about the pod, whichever is longer, at most
    ``SHARED_GPU_SETTLE_CAP``. Its informers lag as its decisions do: under a load of 15 on two
    cores a pod took seconds from creation to running, and the next fraction, two seconds after,
    was placed on a new GPU as if the shared one were empty. No floor (an engine without shared
    GPUs): no wait."""
    if floor <= 0:
        return 0.0
    return min(max(floor, decided_after), SHARED_GPU_SETTLE_CAP)


def _runs(pod: Any) -> bool:
    return pod.status.phase == "Running" and bool(pod.spec.node_name)


def engine_decided(pods: Sequence[Any], wanted: int) -> bool:
    """Whether the engine has decided about each of a just-submitted workload's ``wanted`` pods:
    it runs on a node, or the engine said it cannot place it now (``PodScheduled`` False: KAI marks
    each pod it could not place at the end of its cycle, ``markTaskUnschedulable``, as
    kube-scheduler does). A pod the engine pipelined (placed once its victims are gone) is neither
    yet; nor is a workload whose controller has not made all its pods."""
    live = [pod for pod in pods if not pod.metadata.deletion_timestamp]
    if len(live) < wanted:
        return False
    return all(_runs(pod) or _marked_unschedulable(pod) for pod in live)


def _marked_unschedulable(pod: Any) -> bool:
    return any(
        condition.type == "PodScheduled" and condition.status == "False" for condition in pod.status.conditions or ()
    )


def _reach(connect: Callable[[], Any], name: str) -> tuple[Any, list[Any]]:
    """The API client and every pod of the cluster (listed once per run), or ScenarioRefused."""
    try:
        api = connect()
        return api, kube.core_v1(api).list_pod_for_all_namespaces().items
    except Exception as error:  # whatever the client raises (urllib3's errors too): the cluster is out of reach
        raise ScenarioRefused(
            "cannot reach the cluster to run scenario %s: %s; nothing was changed" % (name, _brief(error))
        ) from None


def node_quantity(raw: Any, scale: float = 1.0) -> float | None:
    """A Kubernetes quantity (``"80"``, ``"80000m"``, ``"512Gi"``) divided by ``scale``; None when
    it is missing or not a quantity. Pure."""
    if raw is None:
        return None
    try:
        return float(kube.parse_quantity(raw)) / scale
    except (ValueError, TypeError, ArithmeticError):
        return None


def model_nodes(plan_nodes: Sequence[tuple[str, int]], live: Iterable[Mapping[str, Any]]) -> list[fairshare.Node]:
    """The model's nodes: each (name, GPUs) the scenario runs on, with the CPU cores and the memory
    (GiB) its live Node (of ``live``, API objects as dicts) offers pods, its ``status.allocatable``;
    None where the node or the amount is missing or unreadable (the model then takes CPU and memory
    as unbounded). Pure."""
    allocatable = {
        (node.get("metadata") or {}).get("name"): (node.get("status") or {}).get("allocatable") or {} for node in live
    }
    return [
        fairshare.Node(
            name,
            gpus,
            node_quantity(allocatable.get(name, {}).get("cpu")),
            node_quantity(allocatable.get(name, {}).get("memory"), 1024**3),
        )
        for name, gpus in plan_nodes
    ]


def daemonset_requests(pods: Iterable[Any], amount: Callable[[Any], float]) -> dict[str, float]:
    """What the running or pending pods of DaemonSets (the client's V1Pods) request, per node. Pure."""
    taken: dict[str, float] = {}
    for pod in pods:
        owners = pod.metadata.owner_references or ()
        if (
            pod.spec.node_name
            and pod.status.phase in ("Pending", "Running")
            and any(o.kind == "DaemonSet" for o in owners)
        ):
            taken[pod.spec.node_name] = taken.get(pod.spec.node_name, 0.0) + amount(pod)
    return taken


def foreign_pods(pods: Iterable[Any], skipped: set[str], nodes: set[str], amount: Callable[[Any], float]) -> list[str]:
    """Of ``pods`` (the client's V1Pods), those outside the ``skipped`` namespaces that hold some of
    the scenario's resource on one of its ``nodes``, or wait for a node. Pods of a DaemonSet are the
    nodes' own (a real cluster's CNI and kube-proxy run on every node, simulated ones included: the
    scenario is sized to what they leave, ``daemonset_requests``), and pods on nodes the scenario does
    not use take nothing from it. Pure."""
    busy = []
    for pod in pods:
        namespace = pod.metadata.namespace
        if namespace in skipped or pod.status.phase not in ("Pending", "Running"):
            continue
        if any(owner.kind == "DaemonSet" for owner in pod.metadata.owner_references or ()):
            continue
        if pod.spec.node_name and pod.spec.node_name not in nodes:
            continue
        if amount(pod) > 0:
            busy.append("%s/%s" % (namespace, pod.metadata.name))
    return sorted(busy)


def project_objects(
    scenario: scenarios.Scenario, prefix: str, site_gpus: float, backend: Backend
) -> list[dict[str, Any]]:
    """The scenario's projects on the engine, in creation order. A quota tree (projects with
    parents) is the engine's quota tree (the inventory's mapping, each leaf a namespace of its own);
    flat projects are the engine's projects under a group of the scenario's own."""
    if scenario.parents:
        resource = scenario.resource
        nodes = [
            quota_tree.TreeNode(
                prefix + project.name,
                None if project.parent is None else prefix + project.parent,
                {resource: project.quota},
                {} if project.limit is None else {resource: project.limit},
                () if project.name in scenario.parents else (prefix + project.name,),
            )
            for project in scenario.projects
        ]
        weights = {
            prefix + project.name: project.quota if project.weight is None else project.weight
            for project in scenario.projects
        }
        return backend.tree_objects(nodes, weights)
    group = prefix + GROUP_SUFFIX
    objects = backend.group_objects(group, site_gpus)
    for project in scenario.projects:
        declared = projects.Project(
            prefix + project.name,
            gpu_quota=project.quota,
            over_quota_weight=project.quota if project.weight is None else project.weight,
            gpu_limit=project.limit,
            cpu_quota=project.cpu_quota,
            cpu_limit=project.cpu_limit,
            memory_quota=project.memory_quota,
            memory_limit=project.memory_limit,
        )
        objects += backend.scenario_project_manifests(declared, group)
    return objects
