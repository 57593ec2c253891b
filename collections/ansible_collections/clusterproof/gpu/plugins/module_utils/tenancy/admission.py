"""The admission policy that binds a project's GPU work to its own quota. Pure.

A ValidatingAdmissionPolicy (CEL, built into the API server since Kubernetes 1.30: no webhook, no
extra component) and its binding, matched to every namespace that carries
``isolation.QUEUE_NAMESPACE_LABEL`` (project namespaces and quota-tree leaves). In such a namespace
a pod, or a workload's pod template (Job, CronJob, Deployment, StatefulSet, ReplicaSet):

1. names no queue but the namespace's own, in any of the engine's queue labels, on the object or
   its template (KAI charges a pod to whatever queue its label names: ``queue_label``);
2. if it asks for GPUs (any ``nvidia.com/`` resource: whole GPUs, MIG slices, shared GPUs; or the
   engine's fraction annotations), goes through the engine: KAI's scheduler name, or for an engine
   that gates admission (Kueue) a queue label, on a kind the engine manages, and as a pod only when
   a controller of the cluster made it (a bare GPU pod would bypass the engine);
3. decides nothing the quota scheduler decides: no ``spec.nodeName`` (a pod bound by its author is
   never placed, nor counted, by the engine), only the priority classes the engine assigns (a
   ``system-node-critical`` pod is never reclaimed and preempts others), no DRA ``resourceClaims``
   (devices outside every quota);
4. names no devices itself: no ``NVIDIA_VISIBLE_DEVICES`` (nor the toolkit's other device
   variables) in any container's env, nor an ``envFrom`` prefix that could spell one, nor a CDI
   annotation (``cdi.k8s.io/``): the container runtime reads these to hand a container GPUs;
5. in a project that declares an interactive time limit, its interactive GPU work (as the engine
   tells it: ``time_limited_classes``, ``interactive_labels``) carries a limit of at most that many
   seconds: ``activeDeadlineSeconds`` on the Pod, the Job or a CronJob's Job, or the engine's own
   time-limit label (``time_limit_label``: Kueue's maximum execution time). A Deployment cannot
   carry one, so interactive GPU work there is a Pod or a Job. Pods a controller of the cluster
   makes are the Job's, already held.

A mutating policy (``DEVICES_POLICY_NAME``) closes what no validation can see: an image's own
environment. NVIDIA's CUDA images set ``NVIDIA_VISIBLE_DEVICES=all``, and where the toolkit reads
the variable from unprivileged containers (NVIDIA's default, which KAI's fractions need), a pod that
asks for no GPU would see every GPU of its host. So every container of a project's pod that asks for
no GPU and sets no device variable gets ``NVIDIA_VISIBLE_DEVICES=void`` (a pod's environment comes
after its image's, so it wins); a fractional pod is the engine's to set.

A second validating policy (``OBJECTS_POLICY_NAME``) holds the other objects a member writes: a Service takes no
``externalIPs`` (traffic meant for other addresses, CVE-2020-8554) and is neither a NodePort nor a
LoadBalancer (ports on every node, outside the NetworkPolicy); a ConfigMap or Secret carries a
device variable as a key only when the engine's own components (``engine_writers``) or the site's
admins write it, so that ``envFrom`` cannot bring one in either.

``tenancy/threats.py`` lists every field and API a member can write with the guard that decides it;
each rule here is a row there.

What differs between engines is an :class:`AdmissionRules` value each backend gives
(``Backend.admission_rules``); this module names no engine. Each rule's message names the project
(the namespace's queue), the rule and what was found, so that a tenant refused knows why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import isolation, projects

POLICY_NAME = "clusterproof-project-quota"
OBJECTS_POLICY_NAME = "clusterproof-project-objects"
DEVICES_POLICY_NAME = "clusterproof-project-devices"
GPU_RESOURCE = "nvidia.com/gpu"
# Every extended resource NVIDIA's device plugin advertises starts so: whole GPUs, MIG slices
# (nvidia.com/mig-1g.10gb), GPUs shared by time-slicing when renamed (nvidia.com/gpu.shared).
GPU_RESOURCE_PREFIX = "nvidia.com/"
# What the NVIDIA container runtime reads from a container's environment to hand it devices
# (NVIDIA_VISIBLE_DEVICES) or MIG control (the two MIG variables; the toolkit honours them only for
# privileged containers, which Pod Security already refuses). Values that hide every device.
DEVICE_ENV = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES")
NO_DEVICE_VALUES = ("void", "none")
# Container Device Interface annotations: a runtime with CDI on injects the devices they name.
CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"
# The groups of a site's admins, whose writes are the site's own (the sandbox's admin and kubeadm's
# admin.conf before and since Kubernetes 1.29).
ADMIN_GROUPS = ("system:masters", "kubeadm:cluster-admins")
# The node label a project's declared node affinity names its nodes by.
HOSTNAME_LABEL = "kubernetes.io/hostname"
# Service types that open ports beyond the cluster network.
EXPOSED_SERVICE_TYPES = ("NodePort", "LoadBalancer")
# Every kind a workload in a project namespace may be, with where its pod template is.
WORKLOAD_RESOURCES = (
    ("", "v1", "pods"),
    ("batch", "v1", "jobs"),
    ("batch", "v1", "cronjobs"),
    ("apps", "v1", "deployments"),
    ("apps", "v1", "statefulsets"),
    ("apps", "v1", "replicasets"),
)
# The other objects a member writes that the runtime or the network reads.
OBJECT_RESOURCES = (("", "v1", "services"), ("", "v1", "configmaps"), ("", "v1", "secrets"))
# The user a cluster's controllers create pods as (kube-controller-manager with
# --use-service-account-credentials, as kubeadm and the sandbox run it).
CONTROLLER_PREFIX = "system:serviceaccount:kube-system:"


@dataclasses.dataclass(frozen=True)
class AdmissionRules:
    """How an engine sees a workload, for the admission policy.

    ``queue_labels``: the labels that name a workload's queue (the first is the one clusterproof
    writes); ``scheduler_name``: the scheduler GPU work must name (None: the default scheduler, the
    engine gating admission instead); ``queue_required``: GPU work must name its queue;
    ``gpu_kinds``: the kinds whose GPU work the engine manages (others are refused);
    ``gpu_pods_from_controllers_only``: a GPU pod is admitted only from a controller (the engine
    manages its owner, not the pod); ``fraction_annotations``: the annotations that ask for part of
    a GPU (they count as asking for GPUs); ``priority_classes``: the PriorityClasses a pod may name
    (the ones the engine's workloads use; none: a pod names none); ``priority_labels``: labels that
    name a priority the engine reads, each with the values a member may give; ``engine_writers``:
    the user-name prefixes of the engine's own components, which may write a device variable into a
    ConfigMap (KAI's binder writes a fractional pod's GPU there); ``shared_device_configmap_annotation``:
    the annotation naming the ConfigMap (a name prefix) from which the engine's admission hands a
    fractional pod its GPU's device variable, or None where the engine hands none;
    ``engine_objects``: the engine's own objects (API group, resource) that members may only read;
    ``non_preemptible_priority``: the priority from which the engine never takes a pod's resources
    back (None: an engine that takes back what it lent whatever the priority), and
    ``preemptibility_label``: the label and value that make a pod non-preemptible whatever its
    priority; ``resumed_by_engine_only``: the engine holds a Job suspended until it admits it, and
    only the engine's components (or the site's admins) may set its ``spec.suspend`` false;
    ``interactive_classes``, ``interactive_labels`` and ``interactive_kinds_by_default``: what makes
    work interactive (held to the project's interactive node affinity, not its training one): the
    priority classes, the labels with their values, and the kinds the engine makes interactive when
    they name no class (KAI's pod grouper gives a Deployment ``inference``);
    ``time_limited_classes``: the priority classes of the interactive work a project's interactive
    time limit holds (with ``interactive_labels``), and ``time_limit_label``: the label from which
    the engine ends a workload after that many seconds (None: ``activeDeadlineSeconds`` only)."""

    engine: str
    queue_labels: tuple[str, ...]
    scheduler_name: str | None
    queue_required: bool
    gpu_kinds: tuple[str, ...]
    gpu_pods_from_controllers_only: bool = False
    fraction_annotations: tuple[str, ...] = ()
    priority_classes: tuple[str, ...] = ()
    priority_labels: tuple[tuple[str, tuple[str, ...]], ...] = ()
    engine_writers: tuple[str, ...] = ()
    shared_device_configmap_annotation: str | None = None
    engine_objects: tuple[tuple[str, str], ...] = ()
    non_preemptible_priority: int | None = None
    preemptibility_label: tuple[str, str] | None = None
    resumed_by_engine_only: bool = False
    interactive_classes: tuple[str, ...] = ()
    interactive_labels: tuple[tuple[str, tuple[str, ...]], ...] = ()
    interactive_kinds_by_default: tuple[str, ...] = ()
    time_limited_classes: tuple[str, ...] = ()
    time_limit_label: str | None = None


def _cel(text: str) -> str:
    return "'%s'" % text.replace("\\", "\\\\").replace("'", "\\'")


def _cel_list(items: tuple[str, ...] | list[str]) -> str:
    return "[%s]" % ", ".join(_cel(item) for item in items)


def _labels_of(path: str, guard: str = "true") -> str:
    """The labels map at ``path`` (an object's metadata), or an empty map."""
    return "(%s && has(%s.metadata) && has(%s.metadata.labels) ? %s.metadata.labels : {})" % (
        guard,
        path,
        path,
        path,
    )


def _variables(rules: AdmissionRules) -> list[dict[str, str]]:
    template = (
        "object.kind == 'Pod' ? object : "
        "object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template : object.spec.template"
    )
    label_maps = [
        _labels_of("object"),
        _labels_of("variables.template"),
        _labels_of("object.spec.jobTemplate", "object.kind == 'CronJob'"),
    ]
    named = " + ".join(
        "(%s in %s ? [%s[%s]] : [])" % (_cel(label), labels, labels, _cel(label))
        for label in rules.queue_labels
        for labels in label_maps
    )
    priorities = " + ".join(
        "(%s in %s && !(%s[%s] in %s) ? [%s + '=' + %s[%s]] : [])"
        % (_cel(label), labels, labels, _cel(label), _cel_list(values), _cel(label), labels, _cel(label))
        for label, values in rules.priority_labels
        for labels in label_maps
    )
    gpu = _cel(GPU_RESOURCE_PREFIX)
    gpu_containers = (
        "variables.containers.exists(c, has(c.resources) && "
        "((has(c.resources.limits) && c.resources.limits.exists(r, r.startsWith(%(gpu)s))) || "
        "(has(c.resources.requests) && c.resources.requests.exists(r, r.startsWith(%(gpu)s))))"
        ")" % {"gpu": gpu}
    )
    asks = "(%s) || variables.asksFraction" % gpu_containers
    # The engine's own way of handing a fractional pod its GPU (KAI's admission webhook): the
    # device variable read from the GPU-sharing ConfigMap the pod's annotation names, which only
    # the engine writes (the objects policy). Any other device variable that shows a device, and
    # any envFrom prefix that could spell one with a key of its source, is the member's own.
    if rules.shared_device_configmap_annotation:
        shared = (
            "variables.asksFraction && %(a)s in variables.annotations ? variables.annotations[%(a)s] + '-' : ''"
            % {"a": _cel(rules.shared_device_configmap_annotation)}
        )
    else:
        shared = "''"
    from_engine = (
        "(variables.sharedConfigMap != '' && has(e.valueFrom) && has(e.valueFrom.configMapKeyRef) && "
        "e.valueFrom.configMapKeyRef.key == e.name && "
        "e.valueFrom.configMapKeyRef.name.startsWith(variables.sharedConfigMap))"
    )
    device_env = (
        "variables.containers.filter(c, has(c.env) && c.env.exists(e, e.name in %s && "
        "!(has(e.value) && e.value in %s) && !%s)).map(c, c.name)"
        % (_cel_list(DEVICE_ENV), _cel_list(NO_DEVICE_VALUES), from_engine)
    )
    device_prefixes = (
        "variables.containers.filter(c, has(c.envFrom) && c.envFrom.exists(s, has(s.prefix) && s.prefix != '' "
        "&& %s.exists(n, n.startsWith(s.prefix)))).map(c, c.name)" % _cel_list(DEVICE_ENV)
    )
    fraction = (
        "variables.annotations.exists(a, a in %s)" % _cel_list(rules.fraction_annotations)
        if rules.fraction_annotations
        else "false"
    )
    return [
        {"name": "template", "expression": template},
        {
            "name": "containers",
            "expression": "variables.template.spec.containers + (has(variables.template.spec.initContainers) "
            "? variables.template.spec.initContainers : [])",
        },
        {
            "name": "annotations",
            "expression": "has(variables.template.metadata) && has(variables.template.metadata.annotations) "
            "? variables.template.metadata.annotations : {}",
        },
        {"name": "queue", "expression": "namespaceObject.metadata.labels[%s]" % _cel(isolation.QUEUE_NAMESPACE_LABEL)},
        {"name": "namedQueues", "expression": named},
        {"name": "asksFraction", "expression": fraction},
        {"name": "asksGpus", "expression": asks},
        {"name": "sharedConfigMap", "expression": shared},
        {
            "name": "scheduler",
            "expression": "has(variables.template.spec.schedulerName) ? variables.template.spec.schedulerName "
            ": 'default-scheduler'",
        },
        {"name": "badPriorityLabels", "expression": priorities or "[]"},
        {"name": "interactive", "expression": _interactive(rules, label_maps)},
        {
            "name": "timeLimited",
            "expression": _interactive(rules, label_maps, rules.time_limited_classes, kinds=()),
        },
        {"name": "timeLimit", "expression": _time_limit()},
        {"name": "deadlines", "expression": _deadlines(rules)},
        {"name": "declaredNodes", "expression": _declared_nodes()},
        {"name": "onDeclaredNodes", "expression": _on_declared_nodes()},
        {"name": "deviceEnv", "expression": device_env},
        {"name": "devicePrefixes", "expression": device_prefixes},
    ]


def _interactive(
    rules: AdmissionRules,
    label_maps: list[str],
    classes: tuple[str, ...] | None = None,
    kinds: tuple[str, ...] | None = None,
) -> str:
    """Whether the workload is interactive work, as the engine tells it from its class (``classes``,
    the engine's interactive ones unless given), its labels, or its kind naming no class (``kinds``,
    likewise)."""
    classes = rules.interactive_classes if classes is None else classes
    kinds = rules.interactive_kinds_by_default if kinds is None else kinds
    found = ["false"]
    if classes:
        found.append(
            "(has(variables.template.spec.priorityClassName) && variables.template.spec.priorityClassName in %s)"
            % _cel_list(classes)
        )
    if kinds:
        found.append("(!has(variables.template.spec.priorityClassName) && object.kind in %s)" % _cel_list(kinds))
    for label, values in rules.interactive_labels:
        found.extend(
            "(%s in %s && %s[%s] in %s)" % (_cel(label), m, m, _cel(label), _cel_list(values)) for m in label_maps
        )
    return " || ".join(found)


# A whole number of seconds as a label or annotation writes it (int() of anything else fails the request).
_SECONDS = "'^[0-9]{1,10}$'"


def _time_limit() -> str:
    """The project's interactive time limit in seconds (0: none declared)."""
    annotations = "namespaceObject.metadata.annotations"
    return "has(%(m)s) && %(a)s in %(m)s && %(m)s[%(a)s].matches(%(s)s) ? int(%(m)s[%(a)s]) : 0" % {
        "m": annotations,
        "a": _cel(projects.INTERACTIVE_LIMIT_ANNOTATION),
        "s": _SECONDS,
    }


def _deadlines(rules: AdmissionRules) -> str:
    """The time limits the workload carries, in seconds: activeDeadlineSeconds of a Pod, a Job or a
    CronJob's Job, and the engine's time-limit label on the workload or a CronJob's Job."""
    found = [
        "(object.kind in ['Pod', 'Job'] && has(object.spec.activeDeadlineSeconds) ? "
        "[object.spec.activeDeadlineSeconds] : [])",
        "(object.kind == 'CronJob' && has(object.spec.jobTemplate.spec.activeDeadlineSeconds) ? "
        "[object.spec.jobTemplate.spec.activeDeadlineSeconds] : [])",
    ]
    if rules.time_limit_label:
        label = _cel(rules.time_limit_label)
        for labels in (_labels_of("object"), _labels_of("object.spec.jobTemplate", "object.kind == 'CronJob'")):
            found.append(
                "(%(l)s in %(m)s && %(m)s[%(l)s].matches(%(s)s) ? [int(%(m)s[%(l)s])] : [])"
                % {"l": label, "m": labels, "s": _SECONDS}
            )
    return " + ".join(found)


def _declared_nodes() -> str:
    """The nodes the project's declaration keeps this kind of work to, comma-separated ('' for any)."""
    annotation = (
        "(has(namespaceObject.metadata.annotations) && %(a)s in namespaceObject.metadata.annotations ? "
        "namespaceObject.metadata.annotations[%(a)s] : '')"
    )
    return "variables.interactive ? %s : %s" % (
        annotation % {"a": _cel(projects.INTERACTIVE_NODES_ANNOTATION)},
        annotation % {"a": _cel(projects.TRAINING_NODES_ANNOTATION)},
    )


def _on_declared_nodes() -> str:
    """Whether the pod template keeps to the declared nodes: a node selector on the host name among
    them, or a required node affinity whose every term holds the host name to them."""
    # string() is the identity on a string; it keeps a concatenation a CEL string for the interpreters.
    among = "string(',' + variables.declaredNodes + ',').contains(string(',' + %s + ','))"
    hostname = _cel(HOSTNAME_LABEL)
    selector = (
        "(has(variables.template.spec.nodeSelector) && %(h)s in variables.template.spec.nodeSelector && "
        + among % "variables.template.spec.nodeSelector[%(h)s]"
        + ")"
    ) % {"h": hostname}
    terms = (
        "(has(variables.template.spec.affinity) && has(variables.template.spec.affinity.nodeAffinity) && "
        "has(variables.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && "
        "size(variables.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms) > 0 && "
        "variables.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        ".all(t, has(t.matchExpressions) && t.matchExpressions.exists(e, e.key == %(h)s && e.operator == 'In' && "
        "has(e.values) && size(e.values) > 0 && e.values.all(v, " + among % "v" + "))))"
    ) % {"h": hostname}
    return "variables.declaredNodes == '' || %s || %s" % (selector, terms)


def _rule(expression: str, message: str) -> dict[str, str]:
    """A validation whose message starts with the project; ``message`` is a CEL string expression."""
    return {
        "expression": expression,
        "messageExpression": "'project ' + variables.queue + ': ' + " + message,
        "reason": "Forbidden",
    }


def _validations(rules: AdmissionRules) -> list[dict[str, str]]:
    labels = " or ".join(rules.queue_labels)
    validations = [
        _rule(
            "variables.namedQueues.all(q, q == variables.queue)",
            "%s + variables.queue + ', found ' + variables.namedQueues.filter(q, q != variables.queue)[0] + ')'"
            % _cel("a workload may be charged only to its own project's queue (%s must be " % labels),
        )
    ]
    if rules.scheduler_name:
        validations.append(
            _rule(
                "!variables.asksGpus || variables.scheduler == %s" % _cel(rules.scheduler_name),
                "%s + variables.scheduler"
                % _cel(
                    "a workload that asks for GPUs must be scheduled by %s, the site's quota scheduler "
                    "(spec.schedulerName %s), found " % (rules.engine, rules.scheduler_name)
                ),
            )
        )
    kinds = ", ".join("'%s'" % kind for kind in rules.gpu_kinds)
    validations.append(
        _rule(
            "!variables.asksGpus || object.kind in [%s]" % kinds,
            "%s + object.kind"
            % _cel(
                "GPUs are given through %s, which manages %s here; a workload that asks for GPUs "
                "cannot be a " % (rules.engine, ", ".join(rules.gpu_kinds))
            ),
        )
    )
    if rules.queue_required:
        validations.append(
            _rule(
                "!variables.asksGpus || object.kind == 'Pod' || size(variables.namedQueues) > 0",
                "%s + variables.queue + ')'"
                % _cel(
                    "a workload that asks for GPUs must name its project's queue for %s (label %s: "
                    % (rules.engine, rules.queue_labels[0])
                ),
            )
        )
    if rules.gpu_pods_from_controllers_only:
        validations.append(
            _rule(
                "!variables.asksGpus || object.kind != 'Pod' || "
                "request.userInfo.username.startsWith(%s)" % _cel(CONTROLLER_PREFIX),
                _cel(
                    "a pod that asks for GPUs must come from a workload %s admits (%s), not be created "
                    "directly" % (rules.engine, ", ".join(kind for kind in rules.gpu_kinds if kind != "Pod"))
                ),
            )
        )
    if rules.resumed_by_engine_only:
        # The engine's webhook suspends a Job on its creation; a member who sets it false again
        # would have the Job controller make its pods before the engine admitted it.
        validations.append(
            _rule(
                "request.operation != 'UPDATE' || object.kind != 'Job' || "
                "!(has(oldObject.spec.suspend) && oldObject.spec.suspend) || "
                "(has(object.spec.suspend) && object.spec.suspend) || %s" % _engine_or_admin(rules),
                _cel(
                    "a Job runs when %s admits it: spec.suspend may be set false by %s alone"
                    % (rules.engine, rules.engine)
                ),
            )
        )
    return validations + _placement_validations(rules) + _device_validations()


def _engine_or_admin(rules: AdmissionRules) -> str:
    """Whether the request comes from the engine's components or the site's admins."""
    return " || ".join(
        ["request.userInfo.username.startsWith(%s)" % _cel(prefix) for prefix in rules.engine_writers]
        + ["(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in %s))" % _cel_list(ADMIN_GROUPS)]
    )


def _placement_validations(rules: AdmissionRules) -> list[dict[str, str]]:
    """What the quota scheduler decides, and a member must not: where a pod runs, its priority, and
    devices outside the quota."""
    allowed = ", ".join(rules.priority_classes) or "none"
    return [
        # A pod's nodeName cannot change once set, and a scheduler binds through pods/binding: only
        # a pod's creation (or a workload's template) can carry one.
        _rule(
            "(object.kind == 'Pod' && request.operation != 'CREATE') || "
            "!has(variables.template.spec.nodeName) || variables.template.spec.nodeName == ''",
            "%s + variables.template.spec.nodeName"
            % _cel(
                "where a pod runs is the quota scheduler's decision (%s): spec.nodeName must not be set, found "
                % rules.engine
            ),
        ),
        _rule(
            "!has(variables.template.spec.priorityClassName) || variables.template.spec.priorityClassName in %s"
            % _cel_list(rules.priority_classes),
            "%s + variables.template.spec.priorityClassName"
            % _cel(
                "a pod's priority decides whether %s may take its resources back: spec.priorityClassName must be "
                "one of the site's (%s), found " % (rules.engine, allowed)
            ),
        ),
        _rule(
            "size(variables.badPriorityLabels) == 0",
            "%s + variables.badPriorityLabels[0]"
            % _cel(
                "a workload's priority must be one %s gives (%s), found "
                % (
                    rules.engine,
                    "; ".join("%s: %s" % (label, " or ".join(values)) for label, values in rules.priority_labels)
                    or "none",
                )
            ),
        ),
        # The project's declared node affinity (for its training or its interactive work), which
        # the engine does not hold a member's own work to (clusterproof sets it on the workloads it
        # builds): GPU work elsewhere would take GPUs another project's affinity counts on.
        _rule(
            "!variables.asksGpus || variables.onDeclaredNodes",
            "%s + variables.declaredNodes + ')'"
            % _cel(
                "the project's GPU work runs on its declared nodes: a required node affinity (or node selector) on "
                "%s among them (" % HOSTNAME_LABEL
            ),
        ),
        # The project's interactive time limit, which the engine holds only the workloads clusterproof
        # builds to (activeDeadlineSeconds, Kueue's maximum execution time): a member's own interactive
        # work would keep its GPUs for as long as it likes. The Job controller's pods are the Job's.
        _rule(
            "!(variables.asksGpus && variables.timeLimited && variables.timeLimit > 0) || "
            "request.userInfo.username.startsWith(%s) || "
            "variables.deadlines.exists(d, d > 0 && d <= variables.timeLimit)" % _cel(CONTROLLER_PREFIX),
            "%s + string(variables.timeLimit) + %s + (size(variables.deadlines) > 0 ? "
            "string(variables.deadlines[0]) : 'none')"
            % (
                _cel("the project's interactive GPU work ends within its time limit of "),
                _cel(
                    " s: a Pod, Job or CronJob's Job must carry spec.activeDeadlineSeconds%s of at most that "
                    "(a Deployment cannot), found "
                    % (" (or label %s)" % rules.time_limit_label if rules.time_limit_label else "")
                ),
            ),
        ),
        _rule(
            "!has(variables.template.spec.resourceClaims) || size(variables.template.spec.resourceClaims) == 0",
            _cel(
                "devices are given through %s's quota: spec.resourceClaims (dynamic resource allocation) is not "
                "allowed in a project" % rules.engine
            ),
        ),
    ]


def _device_validations() -> list[dict[str, str]]:
    """Nothing a member writes names devices for the container runtime."""
    names = ", ".join(DEVICE_ENV)
    return [
        _rule(
            "size(variables.deviceEnv) == 0",
            "%s + variables.deviceEnv[0]"
            % _cel(
                "GPUs are given by the device plugin and the quota scheduler: a container must not set %s "
                "(except to %s), found in container " % (names, " or ".join(NO_DEVICE_VALUES))
            ),
        ),
        _rule(
            "size(variables.devicePrefixes) == 0",
            "%s + variables.devicePrefixes[0]"
            % _cel(
                "an envFrom prefix must not be able to spell %s with a key of its source, found in container " % names
            ),
        ),
        _rule(
            "!variables.annotations.exists(a, a.startsWith(%s))" % _cel(CDI_ANNOTATION_PREFIX),
            "%s + variables.annotations.filter(a, a.startsWith(%s))[0]"
            % (
                _cel("devices are given by the device plugin: a pod must not carry a CDI annotation, found "),
                _cel(CDI_ANNOTATION_PREFIX),
            ),
        ),
    ]


def _objects_validations(rules: AdmissionRules) -> list[dict[str, str]]:
    keys = " + ".join(
        "(has(object.%s) ? object.%s.filter(k, k in %s) : [])" % (field, field, _cel_list(DEVICE_ENV))
        for field in ("data", "binaryData", "stringData")
    )
    writers = _engine_or_admin(rules)
    return [
        _rule(
            "object.kind != 'Service' || !has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0",
            _cel(
                "a Service must not take externalIPs (it would receive traffic meant for those addresses, "
                "CVE-2020-8554)"
            ),
        ),
        _rule(
            "object.kind != 'Service' || !has(object.spec.type) || !(object.spec.type in %s)"
            % _cel_list(EXPOSED_SERVICE_TYPES),
            "%s + object.spec.type"
            % _cel(
                "a Service must stay inside the cluster's network, where the project's NetworkPolicy holds it "
                "(type ClusterIP or ExternalName), found "
            ),
        ),
        _rule(
            "!(object.kind in ['ConfigMap', 'Secret']) || size(%s) == 0 || %s" % (keys, writers),
            "%s + (%s)[0]"
            % (
                _cel(
                    "a ConfigMap or Secret carries a device variable only when %s writes it (a container's "
                    "envFrom would hand it devices), found key " % rules.engine
                ),
                keys,
            ),
        ),
    ]


def _devices_policy(rules: AdmissionRules) -> list[dict[str, Any]]:
    """The mutating policy that hides every device from a container that asks for none, and its
    binding: ``NVIDIA_VISIBLE_DEVICES=void`` on each container (and init container) of a pod with
    no fraction that asks for no ``nvidia.com/`` resource and names no device variable itself."""
    hides = (
        "!(has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(r, r.startsWith(%(gpu)s))) || "
        "(has(c.resources.requests) && c.resources.requests.exists(r, r.startsWith(%(gpu)s))))) && "
        "!(has(c.env) && c.env.exists(e, e.name == %(env)s))"
    ) % {"gpu": _cel(GPU_RESOURCE_PREFIX), "env": _cel(DEVICE_ENV[0])}
    fraction = (
        "has(object.metadata.annotations) && object.metadata.annotations.exists(a, a in %s)"
        % _cel_list(rules.fraction_annotations)
        if rules.fraction_annotations
        else "false"
    )

    def hidden(field: str) -> str:
        return (
            "Object{spec: Object.spec{%(field)s: object.spec.%(field)s.filter(c, %(hides)s).map(c, "
            "Object.spec.%(field)s{name: c.name, env: [Object.spec.%(field)s.env{name: %(env)s, value: %(void)s}]})}}"
        ) % {"field": field, "hides": hides, "env": _cel(DEVICE_ENV[0]), "void": _cel(NO_DEVICE_VALUES[0])}

    mutations = [
        {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": hidden("containers")}},
        {
            "patchType": "ApplyConfiguration",
            "applyConfiguration": {
                "expression": "has(object.spec.initContainers) && object.spec.initContainers.exists(c, %s) ? %s : "
                "Object{}" % (hides, hidden("initContainers"))
            },
        },
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": DEVICES_POLICY_NAME, "labels": dict(isolation.MANAGED_BY)},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                ]
            },
            "matchConditions": [
                {
                    "name": "a-container-asks-for-no-device",
                    "expression": "!(%s) && (object.spec.containers.exists(c, %s) || "
                    "(has(object.spec.initContainers) && object.spec.initContainers.exists(c, %s)))"
                    % (fraction, hides, hides),
                }
            ],
            "mutations": mutations,
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": DEVICES_POLICY_NAME, "labels": dict(isolation.MANAGED_BY)},
        "spec": {"policyName": DEVICES_POLICY_NAME, "matchResources": _project_namespaces()},
    }
    return [policy, binding]


def _project_namespaces() -> dict[str, Any]:
    return {"namespaceSelector": {"matchExpressions": [{"key": isolation.QUEUE_NAMESPACE_LABEL, "operator": "Exists"}]}}


def _policy(name: str, resources: tuple[tuple[str, str, str], ...], spec: dict[str, Any]) -> list[dict[str, Any]]:
    """A policy over ``resources`` and its binding (Deny) to every namespace labelled with its queue."""
    resource_rules = [
        {
            "apiGroups": [group],
            "apiVersions": [version],
            "operations": ["CREATE", "UPDATE"],
            "resources": [resource],
        }
        for group, version, resource in resources
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(isolation.MANAGED_BY)},
        "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": resource_rules}, **spec},
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(isolation.MANAGED_BY)},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": _project_namespaces(),
        },
    }
    return [policy, binding]


def policy_manifests(rules: AdmissionRules) -> list[dict[str, Any]]:
    """The three policies, each with its binding: the workloads' (``POLICY_NAME``), the other
    objects' (``OBJECTS_POLICY_NAME``), and the mutating one that hides devices
    (``DEVICES_POLICY_NAME``)."""
    workloads = _policy(
        POLICY_NAME, WORKLOAD_RESOURCES, {"variables": _variables(rules), "validations": _validations(rules)}
    )
    queue = [
        {"name": "queue", "expression": "namespaceObject.metadata.labels[%s]" % _cel(isolation.QUEUE_NAMESPACE_LABEL)}
    ]
    objects = _policy(
        OBJECTS_POLICY_NAME, OBJECT_RESOURCES, {"variables": queue, "validations": _objects_validations(rules)}
    )
    return workloads + objects + _devices_policy(rules)


def served(
    manifests: list[dict[str, Any]], serves: Callable[[str, str], bool]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The policies an API server serves (``serves(api_version, kind)``), and the names of those it
    does not: MutatingAdmissionPolicy is GA from Kubernetes 1.36, so a site at the previous minor
    gets the validating policies alone (its toolkit then holds an image's own device variable)."""
    kinds = {(m["apiVersion"], m["kind"]) for m in manifests}
    answered = {kind: serves(*kind) for kind in sorted(kinds)}
    kept = [m for m in manifests if answered[(m["apiVersion"], m["kind"])]]
    left = [
        "%s/%s" % (m["kind"], m["metadata"]["name"]) for m in manifests if not answered[(m["apiVersion"], m["kind"])]
    ]
    return kept, left
