#!/usr/bin/python
"""Make clusterproof's rules the Prometheus Operator's PrometheusRules, and what they need scraped its
ServiceMonitors, where the site runs the operator."""

DOCUMENTATION = r"""
module: prometheus_rules
short_description: Make clusterproof's rules and scrape sources the Prometheus Operator's objects where the site runs it
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Where the API server serves the Prometheus Operator's C(monitoring.coreos.com/v1) C(PrometheusRule), makes one
    per rule file (O(rules) or O(rules_dir)) in the namespace C(clusterproof-monitoring) (made if missing), named
    after the file (C(clusterproof.rules.yml) is C(clusterproof-rules)), with the file's groups as they are.
  - Labels them with O(labels) (those the site's operator selects rules by, its C(ruleSelector)) and with
    C(clusterproof.io/rules=shipped); a PrometheusRule with that label that no rule file names any more is removed.
  - Where the API server serves C(ServiceMonitor) too, makes one per scrape source the rules need that an operator's
    stack does not scrape already, in the same namespace and with the same labels (kube-prometheus-stack selects
    monitors by C(release) too), C(clusterproof.io/monitors=shipped) instead of the rules' label - each control
    plane's kube-scheduler C(/metrics/resources) (through the headless Service C(clusterproof-kube-scheduler) in
    C(kube-system), made here), the GPU scheduler's own metrics (O(scheduler); labelled C(clusterproof_role=scheduler))
    and DCGM's exporter (through C(clusterproof-dcgm-exporter), made where O(gpu_operator_namespace) exists); a
    ServiceMonitor with that label that is not wanted any more is removed.
  - Where the API server does not serve C(PrometheusRule), changes nothing and returns O(served=false).
  - Idempotent; supports check mode. O(state=absent) removes the PrometheusRules and ServiceMonitors it made.
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
  - clusterproof.gpu.rule_files
options:
  labels:
    description:
      - Labels for the PrometheusRules besides clusterproof's own, those the site's operator selects rules by
        (kube-prometheus-stack's C(release) label, say). Label names and values as Kubernetes admits them.
    type: dict
    default: {}
  scheduler:
    description: The site's GPU scheduler (kai, kueue, none), whose own metrics the ServiceMonitors scrape.
    type: str
    default: none
  gpu_operator_namespace:
    description: Where the GPU operator runs DCGM's exporter (real GPUs).
    type: str
    default: gpu-operator
  state:
    description: present or absent.
    type: str
    choices: [present, absent]
    default: present
"""

EXAMPLES = r"""
- name: Hand clusterproof's rules to the site's kube-prometheus-stack
  clusterproof.gpu.prometheus_rules:
    rules_dir: roles/monitoring/files/rules
    labels:
      release: kube-prometheus-stack
    kubeconfig: "{{ clusterproof_active_kubeconfig }}"
"""

RETURN = r"""
served:
  description: Whether the API server serves the Prometheus Operator's PrometheusRule (nothing is done where not).
  returned: always
  type: bool
rules:
  description: The PrometheusRules wanted (namespace/name).
  returned: always
  type: list
  elements: str
monitors:
  description: The ServiceMonitors wanted (namespace/name); none where the API server serves no ServiceMonitor.
  returned: always
  type: list
  elements: str
message:
  description: Where the rules went, in a sentence (the objects and their labels, or that the kind is not served).
  returned: always
  type: str
changed_objects:
  description: Objects created, changed or deleted (kind/name).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import cluster, operator

OPTIONS = {
    **runner.RULES_ARG_SPEC,
    "labels": {"type": "dict", "default": {}},
    "scheduler": {"type": "str", "default": "none"},
    "gpu_operator_namespace": {"type": "str", "default": "gpu-operator"},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
}


def _names(objects):
    return ["%s/%s" % (operator.NAMESPACE, obj["metadata"]["name"]) for obj in objects]


def _keep_only(changes, kind, label, wanted):
    """Remove what an earlier run made of ``kind`` (``label``) that is not ``wanted`` any more."""
    kept = {obj["metadata"]["name"] for obj in wanted}
    made_before = changes.applier.list_labelled(
        operator.API_VERSION, kind, operator.NAMESPACE, "%s=%s" % (label, operator.RULES_LABEL_VALUE)
    )
    changes.delete(obj for obj in made_before if obj["metadata"]["name"] not in kept)


def _work(module):
    params = module.params
    problems = operator.label_problems(params["labels"], "labels")
    if problems:
        raise runner.ModuleError(problems + "; nothing was changed")
    try:
        files = operator.given_rule_files(params["rules"], params["rules_dir"])
        site = cluster.ClusterMonitoring(
            params["scheduler"], files, gpu_operator_namespace=params["gpu_operator_namespace"]
        )
        targets = operator.monitor_targets(site)
    except (ValueError, KeyError) as error:
        raise runner.ModuleError("%s; nothing was changed" % error) from error
    present = params["state"] == "present"
    wanted = operator.rule_objects(files, params["labels"]) if present else []
    monitors = operator.monitor_objects(targets, params["labels"]) if present else []
    try:
        changes = kube.Changes.connect(params["kubeconfig"], params["context"], module.check_mode)
        if not changes.applier.serves(operator.API_VERSION, operator.RULE_KIND):
            message = "the API server serves no %s (no Prometheus Operator): nothing made" % operator.RULE_KIND
            return {
                "changed": False,
                "served": False,
                "rules": _names(wanted),
                "monitors": [],
                "message": message,
                "changed_objects": [],
            }
        if wanted:
            changes.apply([operator.namespace_object(), *wanted])
        _keep_only(changes, operator.RULE_KIND, operator.RULES_LABEL, wanted)
        if not changes.applier.serves(operator.API_VERSION, operator.MONITOR_KIND):
            monitors = []
        else:
            if monitors:
                gpu_operator = changes.applier.get(cluster.gpu_operator_namespace(site)) is not None
                services = operator.monitor_services(site, gpu_operator=gpu_operator)
                changes.apply([*services, *monitors])
            _keep_only(changes, operator.MONITOR_KIND, operator.MONITORS_LABEL, monitors)
    except kube.ApiException as error:
        runner.fail_from_exception(module, error, "the Prometheus Operator's objects in %s" % operator.NAMESPACE)
    labels = (
        " (labels %s)" % ", ".join("%s=%s" % item for item in sorted(params["labels"].items()))
        if params["labels"]
        else ""
    )
    message = "%ss %s%s for the site's Prometheus Operator%s" % (
        operator.RULE_KIND,
        ", ".join(_names(wanted)) or "none",
        "; %ss %s" % (operator.MONITOR_KIND, ", ".join(_names(monitors))) if monitors else "",
        labels,
    )
    return {
        "changed": changes.changed,
        "served": True,
        "rules": _names(wanted),
        "monitors": _names(monitors),
        "message": message,
        "changed_objects": changes.applied,
    }


def main():
    runner.run_cluster_module(
        OPTIONS, work=_work, doing="making clusterproof's rules the Prometheus Operator's objects"
    )


if __name__ == "__main__":
    main()
