"""The threat model of a project's boundary: every field and API a member can write, what it could
do with it, and the guard that decides it. Pure data.

A member of a project may write, in its namespace, what the member Role gives
(``projects.MEMBER_RULES``: pods, Services, ConfigMaps, Secrets, PVCs, Jobs, CronJobs, Deployments,
StatefulSets, ``pods/exec``, ``pods/portforward``, events) and read what the engine adds. Each
:class:`Threat` is one such field or API, with what it could do to the site (``HARMS``) and the
guard that decides it (``GUARDS``): the admission policies (``tenancy/admission.py``), Pod Security,
RBAC, the engine itself or Kubernetes, or a row accepted with its reason, one that needs hardware
to show, or one not closed yet, said as such.

A row whose guard is a refusal the validator can provoke (the policies, Pod Security, RBAC) carries
its :class:`Probe`: what a member sends to try it. ``validate/isolation.py`` builds its attempts
from these rows and nothing else, so that a row cannot be written without its attempt (a unit test
holds the two together, and docs/tenancy.md's table is this table, ``markdown``).

What differs between engines is read from their ``admission.AdmissionRules`` (``applies``); this
module names no engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import admission

# What a member could do with a row.
HARMS = {
    "quota": "take GPUs or other quota resources past its quota, or keep them where the engine would take them back",
    "scheduler": "get around the quota scheduler's decision (placement, priority, gang, time limits)",
    "devices": "see or use devices it was not given",
    "reach": "reach the host, another project's pods, or traffic meant for others",
    "denial": "deny service to other projects",
}
# Who decides a row.
POLICY = "admission policy"
OBJECTS_POLICY = "objects admission policy"
DEVICES_POLICY = "devices admission policy"
POD_SECURITY = "Pod Security"
RBAC = "RBAC"
NETWORK_POLICY = "NetworkPolicy"
RESOURCE_QUOTA = "ResourceQuota"
ENGINE = "the quota scheduler"
KUBERNETES = "Kubernetes"
TOOLKIT = "the NVIDIA toolkit"
ACCEPTED = "accepted"
OPEN = "not closed yet"
GUARDS = (
    POLICY,
    OBJECTS_POLICY,
    DEVICES_POLICY,
    POD_SECURITY,
    RBAC,
    NETWORK_POLICY,
    RESOURCE_QUOTA,
    ENGINE,
    KUBERNETES,
    TOOLKIT,
    ACCEPTED,
    OPEN,
)
# The guards a dry run or an access review can provoke: each such row has its probe (the devices
# policy's is a pod admitted as it changed it), unless a check tries it instead (``tried_by``: a
# ceiling on the number of pods cannot be passed by one dry run).
PROBED = (POLICY, OBJECTS_POLICY, DEVICES_POLICY, POD_SECURITY, RBAC, RESOURCE_QUOTA)

# What a probe sends.
WORKLOAD = "workload"  # the project's own GPU work (a pod or the engine's kind), changed as the probe says
OBJECT = "object"  # ``manifest`` in the project's namespace
ACCESS = "access"  # may the member ``access`` (verb, API group, resource, subresource): an access review
# A Job the validator makes and the engine holds (suspended, naming no queue: never admitted), which
# the member then tries to resume (a dry-run patch of spec.suspend), the Job removed after.
RESUME = "resume"
# Whose queue or namespace a workload probe names.
OWN = "own"
OTHER = "other"
NONE = "none"
# A name no node, class or template has: the probes are dry runs, refused before anything looks.
NOWHERE = "clusterproof-isolation-nowhere"


@dataclasses.dataclass(frozen=True)
class Probe:
    """What a member sends to try a row (a server-side dry run, or an access review)."""

    sends: str
    gpus: int = 1
    kind: str | None = None  # None: the engine's kind for GPU work (a pod, or a Job on Kueue)
    queue: str = OWN
    namespace: str = OWN
    scheduler: str | None = None  # None: the engine's scheduler name
    pod_spec: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    container: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Each of the engine's fraction annotations, or priority labels with a value it does not give.
    fraction_annotations: bool = False
    priority_labels: bool = False
    manifest: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    access: tuple[str, str, str, str] = ("", "", "", "")
    # Each API the engine serves for its own objects (``AdmissionRules.engine_objects``), asked as ``access``.
    engine_objects: bool = False
    # Interactive work, as the engine tells it (its first interactive class, or label), tried only in a
    # project that declares nodes for its interactive work.
    interactive: bool = False
    # Interactive work the project's time limit holds, carrying no limit, tried only in a project that
    # declares an interactive time limit (on its declared interactive nodes, if any).
    time_limited: bool = False
    # The project's ResourceQuota key the probe asks one unit past (a claim for requests.storage, a CPU
    # pod for requests.cpu or requests.memory), tried only where the project holds that key.
    past_ceiling: str | None = None
    # The declared exception that admits it (``isolation.EXCEPTIONS``).
    exception: str | None = None


def _always(_rules: admission.AdmissionRules) -> bool:
    return True


@dataclasses.dataclass(frozen=True)
class Threat:
    """One row: ``surface`` (the field or API a member writes), ``harm`` (a key of ``HARMS``), what
    it could do (``could``), the guard that decides it and how (``rule``: the rule, or the reason a
    row is accepted), and its probe where the guard refuses."""

    key: str
    surface: str
    harm: str
    could: str
    guard: str
    rule: str
    probe: Probe | None = None
    applies: Callable[[admission.AdmissionRules], bool] = _always
    # The check that tries a row no probe sends (the connection between projects, with real pods).
    tried_by: str | None = None


def _has(field: str) -> Callable[[admission.AdmissionRules], bool]:
    return lambda rules: bool(getattr(rules, field))


def _manages(kind: str, yes: bool) -> Callable[[admission.AdmissionRules], bool]:
    return lambda rules: (kind in rules.gpu_kinds) == yes


def _cpu_pod(**changes: Any) -> Probe:
    """A pod that asks for no GPU, changed as ``changes`` say."""
    return Probe(WORKLOAD, gpus=0, kind="Pod", **changes)


_HOST_PATH = {"volumes": [{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}]}
_RESOURCE_CLAIM = {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": NOWHERE}]}
_DEVICE_ENV = "NVIDIA_VISIBLE_DEVICES"

THREATS: tuple[Threat, ...] = (
    # --- the quota ---------------------------------------------------------------------------------
    Threat(
        "other-queue",
        "a queue label on a pod, a workload or its pod template (each label the engine takes a queue from)",
        "quota",
        "charge its work to another project's quota",
        POLICY,
        "every queue label names the namespace's own queue",
        Probe(WORKLOAD, queue=OTHER),
    ),
    Threat(
        "bypass-scheduler",
        "spec.schedulerName of GPU work",
        "quota",
        "run GPUs through the default scheduler, outside every quota",
        POLICY,
        "GPU work names the quota scheduler",
        Probe(WORKLOAD, kind="Pod", scheduler="default-scheduler"),
        applies=_has("scheduler_name"),
    ),
    Threat(
        "no-queue",
        "a GPU Job that names no queue",
        "quota",
        "run GPUs the engine never admitted",
        POLICY,
        "GPU work names its project's queue (and the engine holds a Job without one)",
        Probe(WORKLOAD, kind="Job", queue=NONE),
        applies=_has("queue_required"),
    ),
    Threat(
        "bare-gpu-pod",
        "a GPU pod made directly (not by a Job)",
        "quota",
        "run GPUs the engine, which admits Jobs, never sees",
        POLICY,
        "a GPU pod comes from a workload the engine admits",
        Probe(WORKLOAD, kind="Pod"),
        applies=_has("gpu_pods_from_controllers_only"),
    ),
    Threat(
        "gpu-deployment",
        "GPUs in a Deployment",
        "quota",
        "run GPUs in a kind the engine does not manage",
        POLICY,
        "GPU work is of a kind the engine manages",
        Probe(WORKLOAD, kind="Deployment"),
        applies=_manages("Deployment", False),
    ),
    Threat(
        "mig-resource",
        "any other nvidia.com/ resource in a container's limits or requests (MIG slices, shared GPUs)",
        "quota",
        "take GPU slices outside the quota scheduler",
        POLICY,
        "every nvidia.com/ resource counts as asking for GPUs",
        _cpu_pod(scheduler="default-scheduler", container={"resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}),
    ),
    Threat(
        "fraction-annotation",
        "the engine's fraction annotations (part of a GPU by share or by memory)",
        "quota",
        "take part of a GPU outside the quota scheduler",
        POLICY,
        "a fraction annotation counts as asking for GPUs",
        _cpu_pod(scheduler="default-scheduler", fraction_annotations=True),
        applies=_has("fraction_annotations"),
    ),
    Threat(
        "node-name",
        "spec.nodeName of a pod or a pod template",
        "quota",
        "bind its pod itself: the engine neither places it nor checks its quota, and a non-preemptible one "
        "is never taken back (a member of team-a held all 16 GPUs of the sandbox so)",
        POLICY,
        "no pod or template names its node",
        Probe(WORKLOAD, pod_spec={"nodeName": NOWHERE}),
    ),
    Threat(
        "priority-class",
        "spec.priorityClassName",
        "quota",
        "name a class the engine does not give (system-node-critical): never preempted, and preempting "
        "other projects' pods",
        POLICY,
        "only the engine's priority classes",
        Probe(WORKLOAD, pod_spec={"priorityClassName": "system-node-critical"}),
    ),
    Threat(
        "priority-label",
        "the labels the engine takes a workload's priority from",
        "quota",
        "name a priority the site does not give",
        POLICY,
        "only the priorities the engine's workloads use",
        Probe(WORKLOAD, priority_labels=True),
        applies=_has("priority_labels"),
    ),
    Threat(
        "resource-claims",
        "spec.resourceClaims (dynamic resource allocation)",
        "quota",
        "take devices through a ResourceClaim, which the engine's quota does not count",
        POLICY,
        "no pod or template claims resources",
        Probe(WORKLOAD, pod_spec=_RESOURCE_CLAIM, container={"resources": {"claims": [{"name": "gpu"}]}}),
    ),
    Threat(
        "non-preemptible",
        "a non-preemptible priority (KAI: 100 and above, or its preemptibility label)",
        "quota",
        "keep GPUs the engine cannot take back",
        ENGINE,
        "the engine holds non-preemptible work within its queue's deserved quota (KAI's proportion plugin, "
        "quota_check.go) and reclaims only preemptible work; with node-name refused, nothing places a pod around it. "
        "The outcome is checked on the live cluster: the GPUs a project holds that the engine cannot take back",
        tried_by="held-past-quota",
    ),
    Threat(
        "engine-objects",
        "the engine's own objects (KAI's PodGroups and Queues, Kueue's Workloads and queues)",
        "quota",
        "write its own gang, queue or admission",
        RBAC,
        "members may read them only",
        Probe(ACCESS, engine_objects=True),
        applies=_has("engine_objects"),
    ),
    Threat(
        "resume-held-job",
        "spec.suspend of a Job the engine holds (set false by the member)",
        "quota",
        "start a Job's pods before the engine admitted it: the Job controller makes them at once (Kueue's Job "
        "webhook at the pin lets the change through, and its reconciler suspends the Job again only later)",
        POLICY,
        "only the engine's controller or the site's admins resume a Job",
        Probe(RESUME),
        applies=_has("resumed_by_engine_only"),
    ),
    # --- the quota scheduler's decisions -------------------------------------------------------------
    Threat(
        "time-limit",
        "interactive (non-preemptible) work without the project's interactive time limit",
        "scheduler",
        "keep its in-quota GPUs past the project's interactive_time_limit_seconds",
        POLICY,
        "in a project that declares the limit, interactive GPU work (KAI: priority class build; Kueue: the "
        "interactive workload priority) is a Pod, Job or CronJob carrying activeDeadlineSeconds (Kueue: or its "
        "max-exec-time-seconds label) of at most the limit; the Job controller's pods are the Job's",
        Probe(WORKLOAD, time_limited=True),
    ),
    Threat(
        "node-affinity",
        "a GPU pod's node selector and affinity, against the project's declared node affinity",
        "scheduler",
        "run on nodes its project's declaration keeps it from, taking GPUs another project's affinity counts on",
        POLICY,
        "a project that declares nodes for its training or its interactive work runs its GPU work there: a required "
        "node affinity (or node selector) on kubernetes.io/hostname among them",
        Probe(WORKLOAD, interactive=True, pod_spec={"nodeSelector": {"kubernetes.io/hostname": NOWHERE}}),
    ),
    Threat(
        "placement-fields",
        "nodeSelector, affinity, tolerations, topology spread, the engine's topology annotations and node-pool "
        "label, schedulingGates",
        "scheduler",
        "choose among the nodes for its own pods",
        ACCEPTED,
        "the engine still places each pod and counts its GPUs; a toleration of a GPU or control-plane taint lets a "
        "pod onto that node, where Pod Security still keeps it off the host",
    ),
    Threat(
        "priority-value",
        "spec.priority and spec.preemptionPolicy",
        "quota",
        "give itself a priority its class does not",
        KUBERNETES,
        "the Priority admission plugin sets both from the class and refuses a pod whose own value differs",
    ),
    # --- devices -----------------------------------------------------------------------------------
    Threat(
        "device-env",
        "NVIDIA_VISIBLE_DEVICES (or the toolkit's MIG variables) in a container's env, as a value",
        "devices",
        "see every GPU of its host without asking for one, where the toolkit reads the variable",
        POLICY,
        "no container sets a device variable, except to void or none",
        _cpu_pod(container={"env": [{"name": _DEVICE_ENV, "value": "all"}]}),
    ),
    Threat(
        "device-env-from-object",
        "a device variable taken from a ConfigMap or Secret key (valueFrom)",
        "devices",
        "the same, through an object it wrote",
        POLICY,
        "the same rule: only the engine's own GPU-sharing ConfigMap, in a pod that asks for a fraction",
        _cpu_pod(
            container={
                "env": [{"name": _DEVICE_ENV, "valueFrom": {"configMapKeyRef": {"name": NOWHERE, "key": _DEVICE_ENV}}}]
            }
        ),
    ),
    Threat(
        "device-env-prefix",
        "an envFrom prefix (NVIDIA_ with a key VISIBLE_DEVICES)",
        "devices",
        "spell a device variable from keys the policy cannot see",
        POLICY,
        "no envFrom prefix that begins a device variable",
        _cpu_pod(container={"envFrom": [{"prefix": "NVIDIA_", "configMapRef": {"name": NOWHERE}}]}),
    ),
    Threat(
        "device-object",
        "a ConfigMap or Secret key named like a device variable (taken whole by envFrom)",
        "devices",
        "hand a container devices through envFrom, whose keys the pod does not show",
        OBJECTS_POLICY,
        "only the engine's components and the site's admins write such a key",
        Probe(
            OBJECT,
            manifest={"apiVersion": "v1", "kind": "ConfigMap", "data": {_DEVICE_ENV: "all"}},
        ),
    ),
    Threat(
        "cdi-annotation",
        "a CDI annotation (cdi.k8s.io/) on a pod or template",
        "devices",
        "name devices for a runtime with CDI on",
        POLICY,
        "no CDI annotation",
        _cpu_pod(annotations={admission.CDI_ANNOTATION_PREFIX + "clusterproof": "nvidia.com/gpu=all"}),
    ),
    Threat(
        "host-device",
        "a hostPath volume (/dev/nvidia0)",
        "devices",
        "open a GPU's device file",
        POD_SECURITY,
        "baseline refuses hostPath volumes",
        _cpu_pod(pod_spec=_HOST_PATH, exception="privileged"),
    ),
    Threat(
        "image-env",
        "NVIDIA_VISIBLE_DEVICES set by the image (CUDA's images set it to all)",
        "devices",
        "see every GPU of its host without asking for one, where the toolkit reads the variable (NVIDIA's default)",
        DEVICES_POLICY,
        "every container that asks for no GPU and names no device variable gets NVIDIA_VISIBLE_DEVICES=void, "
        "which comes after the image's and wins (a fractional pod is the engine's)",
        _cpu_pod(),
    ),
    Threat(
        "runtime-visibility",
        "what the container runtime hands a container on a GPU host",
        "devices",
        "see a GPU the device plugin did not give it",
        TOOLKIT,
        "the toolkit hands devices from the device plugin and NVIDIA_VISIBLE_DEVICES as the policies leave it "
        "(needs hardware to show: the host tests check the toolkit's settings; isolation/gpu-visibility)",
    ),
    # --- the host and the network ---------------------------------------------------------------------
    Threat(
        "privileged-pod",
        "securityContext.privileged",
        "reach",
        "own the host",
        POD_SECURITY,
        "baseline refuses privileged containers",
        _cpu_pod(container={"securityContext": {"privileged": True}}, exception="privileged"),
    ),
    Threat(
        "host-network-pod",
        "spec.hostNetwork",
        "reach",
        "listen and send on the host's network, outside every NetworkPolicy",
        POD_SECURITY,
        "baseline refuses the host's namespaces",
        _cpu_pod(pod_spec={"hostNetwork": True}, exception="privileged"),
    ),
    Threat(
        "host-pid",
        "spec.hostPID and spec.hostIPC",
        "reach",
        "see and signal the host's processes",
        POD_SECURITY,
        "baseline refuses the host's namespaces",
        _cpu_pod(pod_spec={"hostPID": True}, exception="privileged"),
    ),
    Threat(
        "capabilities",
        "securityContext.capabilities.add, and the other kernel fields baseline holds (host ports, /proc mount, "
        "sysctls, seccomp, AppArmor, SELinux)",
        "reach",
        "act on the host's kernel",
        POD_SECURITY,
        "baseline refuses added capabilities beyond its list",
        _cpu_pod(container={"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}, exception="privileged"),
    ),
    Threat(
        "ephemeral-containers",
        "pods/ephemeralcontainers (kubectl debug)",
        "devices",
        "add a container to a running pod, which no pod-create rule sees",
        RBAC,
        "the member Role does not give the subresource",
        Probe(ACCESS, access=("patch", "", "pods", "ephemeralcontainers")),
    ),
    Threat(
        "other-namespace",
        "another project's namespace",
        "reach",
        "run work, or read secrets, in another project",
        RBAC,
        "the member Role is bound in its own namespace only",
        Probe(WORKLOAD, namespace=OTHER, queue=OTHER),
    ),
    Threat(
        "namespace-labels",
        "the project namespace's labels (its queue, its Pod Security level)",
        "reach",
        "turn its own boundary off",
        RBAC,
        "members cannot write namespaces",
        Probe(ACCESS, access=("patch", "", "namespaces", "")),
    ),
    Threat(
        "network-policy-edit",
        "NetworkPolicies",
        "reach",
        "let other projects' pods in, or its own out",
        RBAC,
        "the member Role does not give NetworkPolicies",
        Probe(ACCESS, access=("delete", "networking.k8s.io", "networkpolicies", "")),
    ),
    Threat(
        "role-bindings",
        "Roles and RoleBindings",
        "reach",
        "give itself or others more rights",
        RBAC,
        "the member Role does not give RBAC objects",
        Probe(ACCESS, access=("create", "rbac.authorization.k8s.io", "rolebindings", "")),
    ),
    Threat(
        "endpoint-slices",
        "EndpointSlices and Endpoints",
        "reach",
        "point a Service at addresses of its choosing",
        RBAC,
        "the member Role does not give them (the endpoint controllers write them)",
        Probe(ACCESS, access=("create", "discovery.k8s.io", "endpointslices", "")),
    ),
    Threat(
        "service-external-ips",
        "a Service's spec.externalIPs",
        "reach",
        "receive traffic meant for another address (CVE-2020-8554)",
        OBJECTS_POLICY,
        "no externalIPs",
        Probe(
            OBJECT,
            manifest={
                "apiVersion": "v1",
                "kind": "Service",
                "spec": {"ports": [{"port": 80}], "externalIPs": ["192.0.2.10"]},
            },
        ),
    ),
    Threat(
        "service-exposed",
        "a Service of type NodePort or LoadBalancer",
        "reach",
        "open ports on every node, outside the NetworkPolicy, and use up the site's node ports",
        OBJECTS_POLICY,
        "ClusterIP and ExternalName only",
        Probe(
            OBJECT,
            manifest={"apiVersion": "v1", "kind": "Service", "spec": {"type": "NodePort", "ports": [{"port": 80}]}},
        ),
    ),
    Threat(
        "network-reach",
        "a connection from a pod of another project",
        "reach",
        "open connections to another project's Services",
        NETWORK_POLICY,
        "each project's NetworkPolicy lets in its own namespace and the site's system namespaces only; enforced "
        "only where an enforcer runs (docs/tenancy.md)",
        tried_by="network-reach",
    ),
    Threat(
        "exec-portforward",
        "pods/exec, pods/portforward, pods/log, events, Secrets, ConfigMaps, PVCs, service accounts' tokens",
        "reach",
        "act on its own pods and objects",
        ACCEPTED,
        "the project's own: its pods stay behind Pod Security and its NetworkPolicy, and its service accounts have "
        "no role",
    ),
    # --- service to others --------------------------------------------------------------------------
    Threat(
        "pod-count",
        "pods on any scheduler, and Services, ConfigMaps and Secrets, by their number",
        "denial",
        "fill the nodes' pod slots (110 a node by default) and the API server's storage, which every project needs",
        RESOURCE_QUOTA,
        "each project's ResourceQuota clusterproof-project: pods 500, services 100, configmaps 500, secrets 500 "
        "unless the site declares others (clusterproof_tenancy.resource_quota, a project's resource_quota); the "
        "validator reads it back",
        tried_by="resource-quota",
    ),
    Threat(
        "cpu-pods",
        "CPU and memory requests of pods on the default scheduler",
        "denial",
        "fill nodes' CPU or memory, which other projects' GPU pods need too",
        RESOURCE_QUOTA,
        "requests.cpu and requests.memory in the project's ResourceQuota where the site declares them (a LimitRange "
        "then gives containers that state none 100m and 128Mi, so that they are counted); none by default: the "
        "ceiling counts the project's GPU pods too, and one below the site's size would stop the project borrowing "
        "the spare GPUs the quota scheduler lends (KAI holds the CPU and memory of the pods it schedules: "
        "cpu_quota, cpu_limit)",
        Probe(OBJECT, past_ceiling="requests.cpu"),
    ),
    Threat(
        "storage",
        "PersistentVolumeClaims",
        "denial",
        "fill a shared storage class",
        RESOURCE_QUOTA,
        "each project's ResourceQuota: persistentvolumeclaims 100, requests.storage 10Ti unless the site declares "
        "others (the provisioners take no path from a claim: the policy on other objects holds none)",
        Probe(OBJECT, past_ceiling="requests.storage"),
    ),
    Threat(
        "image-cache",
        "an image another project pulled with its credentials (imagePullPolicy IfNotPresent)",
        "reach",
        "run another project's private image from a node's cache",
        KUBERNETES,
        "the kubelet checks a pod's own pull credentials before it runs an image the kubelet pulled with "
        "another pod's (KubeletEnsureSecretPulledImages, on by default from Kubernetes 1.35, with "
        "imagePullCredentialsVerificationPolicy NeverVerifyPreloadedImages: only images the kubelet did not pull "
        "itself, preloaded ones, are not checked); the validator reads each real kubelet's configuration",
        tried_by="image-credentials",
    ),
)


def applicable(rules: admission.AdmissionRules) -> tuple[Threat, ...]:
    """The rows that apply to an engine with ``rules``."""
    return tuple(threat for threat in THREATS if threat.applies(rules))


def markdown(rules_by_engine: Mapping[str, admission.AdmissionRules]) -> str:
    """The table of docs/tenancy.md: each row, its guard, and which engines it applies to."""
    lines = [
        "| row | what a member writes | could | guard | rule or reason | tried as | engines |",
        "|---|---|---|---|---|---|---|",
    ]
    for threat in THREATS:
        engines = [name for name, rules in rules_by_engine.items() if threat.applies(rules)]
        tried = "`%s`" % (threat.key if threat.probe else threat.tried_by) if threat.probe or threat.tried_by else "–"
        lines.append(
            "| %s | %s | %s | %s | %s | %s | %s |"
            % (threat.key, threat.surface, threat.could, threat.guard, threat.rule, tried, ", ".join(engines))
        )
    return "\n".join(lines)
