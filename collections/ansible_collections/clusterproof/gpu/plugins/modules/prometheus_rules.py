#!/usr/bin/python
"""Make clusterproof's rules the Prometheus Operator's PrometheusRules, where the site runs the operator."""

DOCUMENTATION = r"""
module: prometheus_rules
short_description: Make clusterproof's rule files PrometheusRules where the site runs the Prometheus Operator
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Where the API server serves the Prometheus Operator's C(monitoring.coreos.com/v1) C(PrometheusRule), makes one
    per rule file (O(rules) or O(rules_dir)) in the namespace C(clusterproof-monitoring) (made if missing), named
    after the file (C(clusterproof.rules.yml) is C(clusterproof-rules)), with the file's groups as they are.
  - Labels them with O(labels) (those the site's operator selects rules by, its C(ruleSelector)) and with
    C(clusterproof.io/rules=shipped); a PrometheusRule with that label that no rule file names any more is removed.
  - Where the API server does not serve C(PrometheusRule), changes nothing and returns O(served=false).
  - Idempotent; supports check mode. O(state=absent) removes the PrometheusRules it made.
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
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import operator

OPTIONS = {
    **runner.RULES_ARG_SPEC,
    "labels": {"type": "dict", "default": {}},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
}


def _work(module):
    params = module.params
    problems = operator.label_problems(params["labels"], "labels")
    if problems:
        raise runner.ModuleError(problems + "; nothing was changed")
    try:
        files = operator.given_rule_files(params["rules"], params["rules_dir"])
    except ValueError as error:
        raise runner.ModuleError(str(error)) from error
    wanted = operator.rule_objects(files, params["labels"]) if params["state"] == "present" else []
    names = ["%s/%s" % (operator.NAMESPACE, obj["metadata"]["name"]) for obj in wanted]
    try:
        changes = kube.Changes.connect(params["kubeconfig"], params["context"], module.check_mode)
        if not changes.applier.serves(operator.API_VERSION, operator.RULE_KIND):
            message = "the API server serves no %s (no Prometheus Operator): nothing made" % operator.RULE_KIND
            return {"changed": False, "served": False, "rules": names, "message": message, "changed_objects": []}
        if wanted:
            changes.apply([operator.namespace_object(), *wanted])
        kept = {obj["metadata"]["name"] for obj in wanted}
        made_before = changes.applier.list_labelled(
            operator.API_VERSION,
            operator.RULE_KIND,
            operator.NAMESPACE,
            "%s=%s" % (operator.RULES_LABEL, operator.RULES_LABEL_VALUE),
        )
        changes.delete(obj for obj in made_before if obj["metadata"]["name"] not in kept)
    except kube.ApiException as error:
        runner.fail_from_exception(module, error, "the PrometheusRules in %s" % operator.NAMESPACE)
    message = "%ss %s for the site's Prometheus Operator%s" % (
        operator.RULE_KIND,
        ", ".join(names) or "none",
        " (labels %s)" % ", ".join("%s=%s" % item for item in sorted(params["labels"].items()))
        if params["labels"]
        else "",
    )
    return {
        "changed": changes.changed,
        "served": True,
        "rules": names,
        "message": message,
        "changed_objects": changes.applied,
    }


def main():
    runner.run_cluster_module(OPTIONS, work=_work, doing="making clusterproof's rules PrometheusRules")


if __name__ == "__main__":
    main()
