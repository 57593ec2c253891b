#!/usr/bin/python
"""Check the monitoring against the cluster: targets up, rules loaded, per-project GPUs as the pods hold them."""

DOCUMENTATION = r"""
module: validate_monitoring
short_description: Check that Prometheus scrapes every target, has every rule and records the GPUs pods hold
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Waits until Prometheus has scraped every active target since the check began (at most O(scrape_wait)
    seconds), then checks each scrape job's targets are up (a check per job, naming the GPU scheduler's own);
    an endpoint stopped before the check is down at that scrape, and the check says why (Prometheus's error).
  - Checks that every rule of the shipped rule files (O(rules) or O(rules_dir)) is loaded and evaluates without error.
  - For each project, checks that Prometheus's C(project:gpus_allocated:sum) equals the whole GPUs its running
    pods hold (read from the API server), waiting up to O(settle_timeout) seconds for Prometheus to catch up.
  - Adds a table of GPUs per project as Prometheus records them (quota, allocated, held by pods, fair share,
    borrowed), naming Prometheus's address and the queries.
  - When Prometheus does not answer, the section is one failed check saying why (the validation goes on).
  - Where the API server serves the Prometheus Operator's C(PrometheusRule), checks that each shipped rule file is
    one, as shipped (check C(monitoring/operator-rules)), as M(clusterproof.gpu.prometheus_rules) makes them; where it
    serves C(ServiceMonitor) too, that each scrape source the rules need is one, as that module makes it (check
    C(monitoring/operator-monitors); O(scheduler) names the GPU scheduler's).
  - With O(skipped), reads nothing and returns the section with one skipped check giving that reason; with
    O(prometheus_in_cluster) on a site that serves C(PrometheusRule) (where the stage runs no Prometheus of its
    own), the same, saying so.
  - Reads only; reports C(changed=false).
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
  - clusterproof.gpu.prometheus
  - clusterproof.gpu.rule_files
options:
  projects:
    description: The projects (namespaces) whose allocation is checked.
    type: list
    elements: str
    default: []
  scrape_wait:
    description: Seconds to wait for Prometheus to scrape every target once after the check began.
    type: int
    default: 45
  settle_timeout:
    description:
      - Seconds to wait for Prometheus's per-project allocation to equal the pods', and its quota to be known.
      - The default outlasts the lookback delta clusterproof's Prometheus runs with (60 s) by two rule
        evaluations; a Prometheus restarted a moment ago still answers the series of pods that ended while
        it was down until their last sample is older than its lookback delta.
    type: int
    default: 90
  skipped:
    description:
      - A reason not to check Prometheus (the site runs no monitoring clusterproof knows, or names no Prometheus);
        the section says it.
      - Where the API server serves the Prometheus Operator's C(PrometheusRule), the objects are checked all the same.
    type: str
  scheduler:
    description:
      - The site's GPU scheduler (kai, kueue, none). With O(prometheus_in_cluster), each scrape job the monitoring
        stage configures for it must have found a target (its metrics Service), or its check fails; where the site
        serves C(ServiceMonitor), its ServiceMonitors are among those checked.
    type: str
    default: none
  rule_labels:
    description:
      - The labels the monitoring stage gives its PrometheusRules (the site's operator selects rules by them);
        checked on the objects where the API server serves C(PrometheusRule).
    type: dict
    default: {}
  gpu_operator_namespace:
    description:
      - Where the GPU operator runs DCGM's exporter, as the monitoring stage was given it; the ServiceMonitor
        C(clusterproof-dcgm-exporter) is expected to scrape there.
    type: str
    default: gpu-operator
"""

EXAMPLES = r"""
- name: Check the sandbox's Prometheus against the cluster
  clusterproof.gpu.validate_monitoring:
    sandbox_port_base: 16440
    projects: [team-a, team-b]
    rules_dir: roles/monitoring/files/rules
    kubeconfig: "{{ clusterproof_active_kubeconfig }}"
"""

RETURN = r"""
section:
  description: The report section C(monitoring) (a check per scrape job, the rules, a check per project; the table).
  returned: always
  type: dict
failed_checks:
  description: How many checks failed.
  returned: always
  type: int
skipped_prometheus:
  description: Whether Prometheus was left unasked (O(skipped), or a site whose operator holds the rules).
  returned: always
  type: bool
seconds:
  description: How long each part took (targets, rules, allocation), in seconds.
  returned: unless skipped
  type: dict
"""

import datetime
import json
import time

from ansible_collections.clusterproof.gpu.plugins.module_utils.common import pods
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import api, checks, cluster, config, operator
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring.reach import prometheus_of
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check


def _rule_files(params):
    """The shipped rule files, parsed; None where the module was given none."""
    if not params["rules"] and not params["rules_dir"]:
        return None
    try:
        return operator.given_rule_files(params["rules"], params["rules_dir"])
    except ValueError as error:
        raise runner.ModuleError(str(error)) from error


def _operator_checks(module, rule_files):
    """Where the API server serves the Prometheus Operator's PrometheusRule, ``monitoring/operator-rules``
    (the objects as the monitoring stage makes them of ``rule_files``) and, where it serves ServiceMonitor
    too, ``monitoring/operator-monitors``; else none."""
    params = module.params
    applier = kube.Applier(kube.api_client(params["kubeconfig"], params["context"]))
    if not applier.serves(operator.API_VERSION, operator.RULE_KIND):
        return []
    if rule_files is None:
        raise runner.ModuleError("rules or rules_dir: expected the shipped rule files, found neither")
    wanted = operator.rule_objects(rule_files, params["rule_labels"])
    found = {obj["metadata"]["name"]: applier.get(obj) for obj in wanted}
    made = [operator.rules_check(wanted, found, params["prometheus_url"] or "")]
    if applier.serves(operator.API_VERSION, operator.MONITOR_KIND):
        settings = cluster.ClusterMonitoring(
            params["scheduler"], rule_files, gpu_operator_namespace=params["gpu_operator_namespace"]
        )
        targets = operator.monitor_targets(settings)
        monitors = operator.monitor_objects(targets, params["rule_labels"])
        made.append(operator.monitors_check(monitors, {obj["metadata"]["name"]: applier.get(obj) for obj in monitors}))
    return made


def _pods(module):
    api_client = kube.api_client(module.params["kubeconfig"], module.params["context"])
    raw = kube.core_v1(api_client).list_pod_for_all_namespaces(
        _preload_content=False, _request_timeout=module.params["request_timeout"]
    )
    return json.loads(raw.data)["items"]


def _targets(url, started, wait):
    def look():
        return api.active_targets(url)

    def all_scraped(targets):
        return targets and all(checks.scraped_since(target, started) for target in targets)

    return wait_until(look, all_scraped, timeout=wait, interval=1.0).value


def _work(module):
    params = module.params
    url = prometheus_of(params)
    problems = operator.label_problems(params["rule_labels"], "rule_labels")
    if problems:
        raise runner.ModuleError(problems + "; nothing was changed")
    # Read once: the operator's objects are made of them, and Prometheus must have loaded their rules.
    rule_files = _rule_files(params)
    operator_checks = _operator_checks(module, rule_files)
    skipped = params["skipped"]
    if params["prometheus_in_cluster"] and operator_checks:
        # The monitoring stage made the rules the operator's objects and ran no Prometheus of its own.
        skipped = (
            "the site runs the Prometheus Operator, which loads clusterproof's rules; clusterproof runs no "
            "Prometheus of its own there: name the site's (clusterproof_monitoring_prometheus_url) to check its "
            "targets and numbers (docs/monitoring.md)"
        )
    if skipped:
        # Where the site runs the Prometheus Operator, its objects are checked all the same.
        found = operator_checks or [Check("monitoring/skipped", "Monitoring is checked", "skip", message=skipped)]
        failed = sum(1 for check in found if check.status == "fail")
        section = checks.section(found, str(url) or "none")
        return {"changed": False, "section": section, "failed_checks": failed, "skipped_prometheus": True}
    if not url or rule_files is None:
        raise runner.ModuleError(
            "prometheus_url (or sandbox_port_base, or prometheus_in_cluster) and rules (or rules_dir): expected "
            "both (or skipped), found %s" % ("no rule files" if url else "no Prometheus address")
        )
    seconds = {}
    started = datetime.datetime.now(datetime.UTC)
    clock = time.monotonic()
    try:
        targets = _targets(url, started, params["scrape_wait"])
    except api.PrometheusError as error:
        section = checks.section([checks.unreachable_check(str(url), str(error))], str(url))
        return {"changed": False, "section": section, "failed_checks": 1, "skipped_prometheus": False}
    # On a kubeadm site the targets are discovered: a job that found none is a failed check too.
    expected = (
        cluster.expected_jobs(cluster.ClusterMonitoring(params["scheduler"], rule_files))
        if params["prometheus_in_cluster"]
        else ()
    )
    found = checks.target_checks(targets, started, expected) + operator_checks
    seconds["targets"] = round(time.monotonic() - clock, 1)
    clock = time.monotonic()
    found.append(checks.rule_check(operator.rule_names(rule_files), api.rule_groups(url)))
    seconds["rules"] = round(time.monotonic() - clock, 1)
    clock = time.monotonic()

    def look():
        held = pods.held_by_pods(_pods(module), params["projects"])
        recorded = api.by_label(api.query(url, checks.ALLOCATED), "project")
        return held, recorded, api.by_label(api.query(url, checks.QUOTA), "project")

    def settled(value):
        held, recorded, quotas = value
        # The quota too: a scheduler that has just made its queues exports their quota a scrape and a
        # rule evaluation later (Kueue's table once showed no quota under load).
        return all(check.status == "pass" for check in checks.allocation_checks(held, recorded)) and all(
            project in quotas for project in held
        )

    held, recorded, quotas = wait_until(look, settled, timeout=params["settle_timeout"], interval=3.0).value
    found += checks.allocation_checks(held, recorded)
    queried = {rule: api.by_label(api.query(url, rule), "project") for rule in (checks.FAIR_SHARE, checks.BORROWED)}
    queried[checks.ALLOCATED], queried[checks.QUOTA] = recorded, quotas
    seconds["allocation"] = round(time.monotonic() - clock, 1)
    section = checks.section(found, str(url), checks.project_rows(held, queried))
    failed = sum(1 for check in section["checks"] if check["status"] == "fail")
    return {
        "changed": False,
        "section": section,
        "failed_checks": failed,
        "seconds": seconds,
        "skipped_prometheus": False,
    }


def main():
    runner.run_cluster_module(
        runner.PROMETHEUS_ARG_SPEC,
        runner.RULES_ARG_SPEC,
        {
            "projects": {"type": "list", "elements": "str", "default": []},
            "scrape_wait": {"type": "int", "default": 45},
            "settle_timeout": {"type": "int", "default": config.SETTLE_SECONDS},
            "skipped": {"type": "str"},
            "rule_labels": {"type": "dict", "default": {}},
            "gpu_operator_namespace": {"type": "str", "default": "gpu-operator"},
            "scheduler": {"type": "str", "default": "none"},
        },
        work=_work,
        doing="checking the monitoring",
        expected=(api.PrometheusError,),
    )


if __name__ == "__main__":
    main()
