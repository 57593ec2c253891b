"""The one interface of a scheduler backend (an engine). Pure.

Everything outside ``scheduler/`` that depends on the engine asks a :class:`Backend` (from
``scheduler.registry``), never an engine's name: what a project, a quota tree and a workload become,
how pods are counted, how the configured objects are read back and judged, which fair-share policy
the engine follows (``model/fairshare.py``), and what to tell an operator when its API is missing.
An engine file (``kai.py``, ``kueue.py``) holds its adapter, a subclass of :class:`Backend`.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import admission, projects, quota_tree, workloads

Manifest = dict[str, Any]
# A cluster-scoped custom resource: (group, version, plural).
Api = tuple[str, str, str]


def shown(value: Any) -> str:
    """A configured or declared value as the validator shows it: none, a whole number plain."""
    if value is None:
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclasses.dataclass(frozen=True)
class ConfigCheck:
    """One comparison of a declared project with the engine's object, before it becomes a report
    check (``validate/projects.py`` names it ``projects/<project>/<field>``)."""

    field: str
    title: str
    expected: str
    observed: str
    ok: bool
    fix: str = ""


@dataclasses.dataclass(frozen=True)
class ProjectReadback:
    """What the engine holds for one declared project: the checks, and the configured quota and
    weight for the quota table. ``complete`` is False when the engine's object is missing and
    nothing more of the project is judged."""

    checks: tuple[ConfigCheck, ...]
    quota: str
    weight: str
    complete: bool = True


@dataclasses.dataclass(frozen=True)
class MetricsEndpoint:
    """Where the engine serves its own metrics on the sandbox (``Backend.sandbox_metrics``), for the
    monitoring stage's scrape configuration: the job's name, the URL, and whether the endpoint is
    served over TLS with a certificate of the sandbox CA and asks for a bearer token (authorized
    by the API server, as controller-runtime's secure metrics do)."""

    job: str
    url: str
    tls: bool = False
    token: bool = False


@dataclasses.dataclass(frozen=True)
class ClusterMetrics:
    """Where the engine serves its own metrics on a kubeadm site, as its chart installs it
    (``Backend.cluster_metrics``): the job's name, the Service in ``namespace`` and the name of its
    metrics port; over TLS with a certificate the engine makes itself, and asking for a bearer token
    (authorized by the API server), or plain HTTP."""

    job: str
    namespace: str
    service: str
    port: str
    tls: bool = False
    token: bool = False


@dataclasses.dataclass(frozen=True)
class QuotaTable:
    """How the quota table names the engine's configured quota and weight."""

    title: str
    quota_column: str
    weight_column: str


class Backend(abc.ABC):
    """A scheduler engine as clusterproof installs, drives and validates it."""

    # The inventory's ``clusterproof_scheduler`` value and the modules' ``scheduler`` choice.
    name: ClassVar[str]
    display_name: ClassVar[str]
    # The fair-share policy the engine implements (one of ``fairshare.POLICIES``).
    policy: ClassVar[str]
    # Whether a workload may ask for a fraction of a GPU.
    fractions: ClassVar[bool]
    # Whether a workload may be a gang: pods of which a minimum start together (``gang_manifests``).
    gangs: ClassVar[bool] = False
    # Whether a project may declare how much of its quota it lends (``gpu_lending_limit``).
    lends_quota: ClassVar[bool]
    # Whether a project may declare CPU and memory quotas and limits beside its GPUs (KAI's queues).
    cpu_memory_quotas: ClassVar[bool] = False
    # Whether a waiting workload has a pod (KAI: a pending one) or none (Kueue: a suspended Job).
    waiting_workloads_have_pods: ClassVar[bool] = True
    # Seconds between two arrivals so that the engine sees them in the order they came.
    arrival_gap_seconds: ClassVar[float] = 0.0
    # Seconds after a pod that shares a GPU (``shared_gpu_group``) runs before the next arrival, so
    # that the engine's own cache holds that GPU's use when it places the next fraction.
    shared_gpu_settle_seconds: ClassVar[float] = 0.0
    # Where the project objects and the quota tree's objects are read back from.
    project_apis: ClassVar[tuple[Api, ...]]
    tree_apis: ClassVar[tuple[Api, ...]]
    # Kinds of a project's engine objects that removing the project deletes (with its namespace).
    removed_kinds: ClassVar[tuple[str, ...]]
    # What members of a project may read of the engine in their namespace.
    member_rules: ClassVar[tuple[Mapping[str, Any], ...]] = ()
    # Namespaces whose pods are the engine's own, not workloads (GPU reservations).
    own_namespaces: ClassVar[tuple[str, ...]] = ()
    quota_table: ClassVar[QuotaTable]
    # The engine's processes on the sandbox without which no workload is placed (its health check).
    health_processes: ClassVar[tuple[str, ...]] = ()
    # Where a cluster's install of the engine runs its pods (their health check off the sandbox).
    system_namespace: ClassVar[str]
    # How the engine sees a workload, for the admission policy that binds a project's GPU work to
    # its own queue (tenancy/admission.py).
    admission_rules: ClassVar[admission.AdmissionRules]
    # Every process the engine runs on the sandbox: installing another engine stops them
    # (``registry.sandbox_processes``).
    sandbox_processes: ClassVar[tuple[str, ...]] = ()

    # What the playbooks and roles ask of the site's engine, settled once into the site inventory
    # (``clusterproof_site.engine``, ``registry.site_engine``) so that none compares engine names.
    # The role that installs the engine (roles/<install_role>, playbooks/scheduler.yml).
    install_role: ClassVar[str]
    # Whether the engine gives each project a queue of its own: the projects, their admission
    # policy, the quota tree, the isolation checks and the fairness scenarios then apply.
    has_queues: ClassVar[bool] = True
    # Whether the engine's GPU fractions put reservation pods on the GPU nodes that simulated nodes
    # must answer (the GPU agent, module_utils/sandbox/gpu_agent.py; the simulated_gpu_nodes role).
    gpu_agent: ClassVar[bool] = False
    # Whether the engine leaves on the sandbox what would stand in the way of another engine (Kueue's
    # webhooks intercept every Job): its install role's tasks/absent.yml removes it when the site
    # declares another scheduler.
    sandbox_leftovers: ClassVar[bool] = False

    def sandbox_metrics(self, port_base: int) -> tuple[MetricsEndpoint, ...]:
        """The engine's metrics endpoints on the sandbox at ``port_base`` (the monitoring stage
        scrapes them, labelled as the GPU scheduler's); none for an engine that serves none."""
        return ()

    def cluster_metrics(self) -> tuple[ClusterMetrics, ...]:
        """The engine's metrics Services on a kubeadm site (the monitoring stage's Prometheus finds
        their endpoints, labelled as the GPU scheduler's); none for an engine that serves none."""
        return ()

    @property
    def hint(self) -> str:
        """Added to an API error's message: the likely cause when the engine's API is missing."""
        return "is %s installed?" % self.display_name

    def health_problem(self, states: Mapping[str, tuple[int, str] | None]) -> str | None:
        """Why the engine cannot place workloads now, from the states of its sandbox processes
        (name -> (pid, state letter), None when not running): a sentence naming the process, or
        None when every one of ``health_processes`` runs. Pure."""
        return process_problem(states, self.health_processes)

    def cluster_health_problem(self, pods: Iterable[Mapping[str, Any]]) -> str | None:
        """The same off the sandbox, from the pods of ``system_namespace`` (API objects as dicts). Pure."""
        return pod_problem(pods, self.system_namespace)

    # --- Projects ---------------------------------------------------------------------------

    def namespace_labels(self, project: projects.Project) -> dict[str, str]:
        """Labels the engine wants on a project's namespace."""
        return {}

    @abc.abstractmethod
    def group_objects(self, name: str, total_gpus: float) -> list[Manifest]:
        """A group that projects hang under (a department queue, a cohort), for a scenario's
        projects; the inventory's projects use the engine's site group."""

    @abc.abstractmethod
    def project_objects(self, project: projects.Project, group: str | None = None) -> list[Manifest]:
        """The project's engine objects, under ``group`` (the site's when None)."""

    def check_project(self, project: projects.Project) -> list[str]:
        """What of the project the engine cannot express, as sentences that name the field (the
        project rules; whether the engine takes a lending limit at all is the registry's
        ``lenders``, which the inventory and the ``gpu_project`` module check). An engine without
        CPU and memory quotas (``cpu_memory_quotas`` False) refuses a project that declares them."""
        messages = projects.problem_messages(project.name, _quota_fields(project))
        if not self.cpu_memory_quotas:
            messages += [
                "project %s: %s: expected none (%s takes no CPU or memory quotas; KAI scheduler does), found %s"
                % (project.name, field, self.display_name, shown(getattr(project, field)))
                for field in projects.RESOURCE_FIELDS
                if getattr(project, field) is not None
            ]
        return messages

    def project_manifests(self, project: projects.Project) -> list[Manifest]:
        """Everything the project is, in the order to create it: with its NetworkPolicy when the
        project is isolated (``Project.network_isolation``), and its ResourceQuota where it holds one."""
        return [
            projects.namespace_manifest(project, self.namespace_labels(project)),
            *self.project_objects(project),
            *projects.rbac_manifests(project, self.member_rules),
            *projects.network_manifests(project, self.system_namespace),
            *projects.resource_quota_manifests(project),
        ]

    def scenario_project_manifests(self, project: projects.Project, group: str) -> list[Manifest]:
        """A scenario's project: its namespace and its engine objects under ``group``."""
        return [
            projects.namespace_manifest(project, self.namespace_labels(project)),
            *self.project_objects(project, group),
        ]

    @abc.abstractmethod
    def project_readback(self, project: projects.Project, found: Mapping[str, Any] | None) -> ProjectReadback:
        """The declared project against the engine's object for it (None: there is none)."""

    def project_objects_by_name(self, objects: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
        """The objects read from ``project_apis``, by the project they stand for."""
        return {item["metadata"]["name"]: item for item in objects}

    # --- Quota trees ------------------------------------------------------------------------

    @abc.abstractmethod
    def tree_objects(
        self, nodes: Sequence[quota_tree.TreeNode], weights: Mapping[str, float] | None = None
    ) -> list[Manifest]:
        """The tree's objects, parents first, then its leaves' namespaces. ``weights``: a node's
        share of its parent's spare capacity against its siblings (the engine's default where a
        node has none)."""

    @abc.abstractmethod
    def tree_differences(
        self, nodes: Sequence[quota_tree.TreeNode], found: Iterable[Mapping[str, Any]]
    ) -> dict[str, str | None]:
        """Per node, None when its object (among ``found``, read from ``tree_apis``) is as the
        tree declares it, else what differs (a sentence)."""

    # --- Workloads --------------------------------------------------------------------------

    def site_objects(self) -> list[Manifest]:
        """What a workload refers to that the engine's install makes (kept once made)."""
        return []

    @abc.abstractmethod
    def job_manifest(self, workload: workloads.Workload, settings: workloads.ProjectSettings) -> Manifest:
        """The Job that runs ``workload`` in its project's queue."""

    def workload_manifests(
        self,
        workload: workloads.Workload,
        settings: workloads.ProjectSettings,
        replicas: int | None,
        resource: str,
        min_replicas: int | None = None,
    ) -> list[Manifest]:
        """What runs ``workload``: its Job, or for ``replicas`` pods of its size in ``resource``
        (gpu or cpu) what the engine runs replicas as, or with ``min_replicas`` its gang."""
        if replicas is None:
            return [self.job_manifest(workload, settings)]
        if min_replicas is not None:
            if resource != "gpu":
                raise workloads.WorkloadError(
                    "workload %s: min_replicas: a gang's pods ask for GPUs, not %s" % (workload.name, resource)
                )
            return self.gang_manifests(workload, settings, replicas, min_replicas)
        return self.replica_manifests(workload, settings, replicas, resource)

    def gang_manifests(
        self, workload: workloads.Workload, settings: workloads.ProjectSettings, replicas: int, min_replicas: int
    ) -> list[Manifest]:
        """``replicas`` pods of ``workload``'s size of which ``min_replicas`` start together; the
        pods come last, after what groups them. An engine without gangs (``gangs`` False) refuses."""
        raise workloads.WorkloadError(
            "workload %s: min_replicas: %s is not given gangs by clusterproof; gangs run on KAI scheduler"
            % (workload.name, self.display_name)
        )

    @abc.abstractmethod
    def replica_manifests(
        self, workload: workloads.Workload, settings: workloads.ProjectSettings, replicas: int, resource: str
    ) -> list[Manifest]:
        """``replicas`` pods of ``workload``'s size in ``resource`` (gpu or cpu), as the engine runs
        replicas (a Deployment, or one Job per replica)."""

    @abc.abstractmethod
    def pod_gpus(self, pod: Any) -> float:
        """GPUs a pod (a kubernetes client V1Pod) holds."""

    def pod_cpus(self, pod: Any) -> float:
        """CPU cores a pod (a kubernetes client V1Pod) requests."""
        return workloads.pod_cpus(pod)

    def shared_gpu_group(self, pod: Any) -> str | None:
        """The GPU a fractional pod shares with others (an id), or None."""
        return None


# Process states (``/proc/<pid>/stat``, field 3) of a process that runs no code until it is resumed.
STOPPED_STATES = ("T", "t")


def process_problem(states: Mapping[str, tuple[int, str] | None], names: Iterable[str]) -> str | None:
    """Why the processes ``names`` cannot place workloads, from their ``states`` (name -> (pid,
    state letter), None when not running), as a sentence naming the first that cannot; None when
    every one runs. Pure."""
    for name in names:
        found = states.get(name)
        if found is None:
            return "%s is not running (no live process of it on the sandbox)" % name
        pid, state = found
        if state in STOPPED_STATES:
            return "%s is not responding: its process (pid %d) is stopped (state %s) and places nothing" % (
                name,
                pid,
                state,
            )
    return None


def pod_problem(pods: Iterable[Mapping[str, Any]], namespace: str) -> str | None:
    """Why an engine installed in ``namespace`` of a cluster cannot place workloads, from that
    namespace's ``pods`` (API objects as dicts): the first that is not Running with every container
    ready (with the waiting reason, e.g. CrashLoopBackOff); None when all are. Pods that ran to
    completion (a chart's hooks) do not count, and neither does a namespace without pods: the
    engine then runs outside the cluster (as on the sandbox, whose processes are checked instead). Pure."""
    live = [pod for pod in pods if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    for pod in live:
        status = pod.get("status") or {}
        containers = status.get("containerStatuses") or []
        unready = [container for container in containers if not container.get("ready")]
        if status.get("phase") == "Running" and containers and not unready:
            continue
        reasons = sorted(
            {
                str(reason)
                for container in unready
                for reason in [((container.get("state") or {}).get("waiting") or {}).get("reason")]
                if reason
            }
        )
        return "%s/%s is not ready (phase %s%s): the engine may place nothing" % (
            namespace,
            (pod.get("metadata") or {}).get("name"),
            status.get("phase", "unknown"),
            "; " + ", ".join(reasons) if reasons else "",
        )
    return None


def _quota_fields(project: projects.Project) -> dict[str, Any]:
    return {
        "gpu_quota": project.gpu_quota,
        "gpu_limit": project.gpu_limit,
        "over_quota_weight": project.over_quota_weight,
        "gpu_lending_limit": project.gpu_lending_limit,
        "interactive_time_limit_seconds": project.interactive_time_limit_seconds,
        **{field: getattr(project, field) for field in projects.RESOURCE_FIELDS},
    }


def read_only_objects(member_rules: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str], ...]:
    """Each (API group, resource) an engine's member rules let members read: its own objects."""
    return tuple(
        (group, resource) for rule in member_rules for group in rule["apiGroups"] for resource in rule["resources"]
    )
