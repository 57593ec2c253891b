"""The admission policy that binds a project's GPU work to its own quota. Pure.

A ValidatingAdmissionPolicy (CEL, built into the API server since Kubernetes 1.30: no webhook, no
extra component) and its binding, matched to every namespace that carries
``isolation.QUEUE_NAMESPACE_LABEL`` (project namespaces and quota-tree leaves). In such a namespace
a pod, or a workload's pod template (Job, CronJob, Deployment, StatefulSet, ReplicaSet):

1. names no queue but the namespace's own, in any of the engine's queue labels, on the object or
   its template (KAI charges a pod to whatever queue its label names: ``queue_label``);
2. if it asks for GPUs, goes through the engine: KAI's scheduler name, or for an engine that gates
   admission (Kueue) a queue label, on a kind the engine manages, and as a pod only when a
   controller of the cluster made it (a bare GPU pod would bypass the engine).

What differs between engines is an :class:`AdmissionRules` value each backend gives
(``Backend.admission_rules``); this module names no engine. Each rule's message names the project
(the namespace's queue), the rule and what was found, so that a tenant refused knows why.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import isolation

POLICY_NAME = "clusterproof-project-quota"
GPU_RESOURCE = "nvidia.com/gpu"
# Every kind a workload in a project namespace may be, with where its pod template is.
WORKLOAD_RESOURCES = (
    ("", "v1", "pods"),
    ("batch", "v1", "jobs"),
    ("batch", "v1", "cronjobs"),
    ("apps", "v1", "deployments"),
    ("apps", "v1", "statefulsets"),
    ("apps", "v1", "replicasets"),
)
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
    manages its owner, not the pod); ``fraction_annotation``: the annotation that asks for part of
    a GPU (counts as asking for GPUs), or None."""

    engine: str
    queue_labels: tuple[str, ...]
    scheduler_name: str | None
    queue_required: bool
    gpu_kinds: tuple[str, ...]
    gpu_pods_from_controllers_only: bool = False
    fraction_annotation: str | None = None


def _cel(text: str) -> str:
    return "'%s'" % text.replace("\\", "\\\\").replace("'", "\\'")


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
    gpu_containers = (
        "variables.containers.exists(c, has(c.resources) && "
        "((has(c.resources.limits) && %(gpu)s in c.resources.limits) || "
        "(has(c.resources.requests) && %(gpu)s in c.resources.requests)))" % {"gpu": _cel(GPU_RESOURCE)}
    )
    asks = gpu_containers
    if rules.fraction_annotation:
        annotations = (
            "has(variables.template.metadata) && has(variables.template.metadata.annotations) && "
            "%s in variables.template.metadata.annotations" % _cel(rules.fraction_annotation)
        )
        asks = "(%s) || (%s)" % (gpu_containers, annotations)
    return [
        {"name": "template", "expression": template},
        {
            "name": "containers",
            "expression": "variables.template.spec.containers + (has(variables.template.spec.initContainers) "
            "? variables.template.spec.initContainers : [])",
        },
        {"name": "queue", "expression": "namespaceObject.metadata.labels[%s]" % _cel(isolation.QUEUE_NAMESPACE_LABEL)},
        {"name": "namedQueues", "expression": named},
        {"name": "asksGpus", "expression": asks},
        {
            "name": "scheduler",
            "expression": "has(variables.template.spec.schedulerName) ? variables.template.spec.schedulerName "
            ": 'default-scheduler'",
        },
    ]


def _validations(rules: AdmissionRules) -> list[dict[str, str]]:
    project = "'project ' + variables.queue + ': '"
    labels = " or ".join(rules.queue_labels)
    validations = [
        {
            "expression": "variables.namedQueues.all(q, q == variables.queue)",
            "messageExpression": project
            + " + %s + variables.queue + ', found ' + variables.namedQueues.filter(q, q != variables.queue)[0]"
            % _cel("a workload may be charged only to its own project's queue (%s must be " % labels)
            + " + ')'",
            "reason": "Forbidden",
        }
    ]
    if rules.scheduler_name:
        validations.append(
            {
                "expression": "!variables.asksGpus || variables.scheduler == %s" % _cel(rules.scheduler_name),
                "messageExpression": project
                + " + %s + variables.scheduler"
                % _cel(
                    "a workload that asks for GPUs must be scheduled by %s, the site's quota scheduler "
                    "(spec.schedulerName %s), found " % (rules.engine, rules.scheduler_name)
                ),
                "reason": "Forbidden",
            }
        )
    kinds = ", ".join("'%s'" % kind for kind in rules.gpu_kinds)
    validations.append(
        {
            "expression": "!variables.asksGpus || object.kind in [%s]" % kinds,
            "messageExpression": project
            + " + %s + object.kind"
            % _cel(
                "GPUs are given through %s, which manages %s here; a workload that asks for GPUs "
                "cannot be a " % (rules.engine, ", ".join(rules.gpu_kinds))
            ),
            "reason": "Forbidden",
        }
    )
    if rules.queue_required:
        validations.append(
            {
                "expression": "!variables.asksGpus || object.kind == 'Pod' || size(variables.namedQueues) > 0",
                "messageExpression": project
                + " + %s + variables.queue + ')'"
                % _cel(
                    "a workload that asks for GPUs must name its project's queue for %s (label %s: "
                    % (rules.engine, rules.queue_labels[0])
                ),
                "reason": "Forbidden",
            }
        )
    if rules.gpu_pods_from_controllers_only:
        validations.append(
            {
                "expression": "!variables.asksGpus || object.kind != 'Pod' || "
                "request.userInfo.username.startsWith(%s)" % _cel(CONTROLLER_PREFIX),
                "messageExpression": project
                + " + %s"
                % _cel(
                    "a pod that asks for GPUs must come from a workload %s admits (%s), not be created "
                    "directly" % (rules.engine, ", ".join(kind for kind in rules.gpu_kinds if kind != "Pod"))
                ),
                "reason": "Forbidden",
            }
        )
    return validations


def policy_manifests(rules: AdmissionRules) -> list[dict[str, Any]]:
    """The policy and its binding (Deny) to every namespace labelled with its queue."""
    resource_rules = [
        {
            "apiGroups": [group],
            "apiVersions": [version],
            "operations": ["CREATE", "UPDATE"],
            "resources": [resource],
        }
        for group, version, resource in WORKLOAD_RESOURCES
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": dict(isolation.MANAGED_BY)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": resource_rules},
            "variables": _variables(rules),
            "validations": _validations(rules),
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME, "labels": dict(isolation.MANAGED_BY)},
        "spec": {
            "policyName": POLICY_NAME,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {
                    "matchExpressions": [{"key": isolation.QUEUE_NAMESPACE_LABEL, "operator": "Exists"}]
                }
            },
        },
    }
    return [policy, binding]
