#!/usr/bin/python
"""Chart the scenario runs as Prometheus recorded them: GPUs allocated, quota and fair share per project over time."""

DOCUMENTATION = r"""
module: monitoring_timeline
short_description: Chart each scenario run per project over time from Prometheus's range queries
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - For each run of C(clusterproof.gpu.validate_scenario) in O(runs) that reached the cluster, asks Prometheus
    for clusterproof's recording rules C(project:gpus_allocated:sum), C(project:gpus_quota:max) and
    C(project:gpus_fair_share:max) of the run's projects over the run's window (range queries).
  - Returns, per scenario section, a chart per project (its allocation, quota and fair share over time), the
    check C(monitoring/timeline/<scenario>) (Prometheus recorded an allocation for every project of the run)
    and a table of the queries with Prometheus's address, so that an admin can open the same view live; the
    filter C(clusterproof.gpu.report_sections_merged) puts them into the report's sections.
  - Waits first, up to O(settle_timeout) seconds, until Prometheus has evaluated its rules past the end of
    the last run (a scrape and a rule evaluation after it ended).
  - When Prometheus does not answer, each run's check fails saying why, and the validation goes on.
  - Reads only; reports C(changed=false).
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
  - clusterproof.gpu.prometheus
options:
  runs:
    description:
      - The results of C(clusterproof.gpu.validate_scenario), each with its C(section) and, when it ran, its
        C(window) (C(start) and C(end) in seconds since the epoch, C(projects), C(resource)).
    type: list
    elements: dict
    default: []
  settle_timeout:
    description: Seconds to wait for Prometheus's rules to be evaluated past the end of the last run.
    type: int
    default: 45
"""

EXAMPLES = r"""
- name: Chart the scenario runs from Prometheus
  clusterproof.gpu.monitoring_timeline:
    sandbox_port_base: "{{ clusterproof_sandbox_port_base }}"
    runs: "{{ validate_scenarios_runs.results }}"
  register: timeline
"""

RETURN = r"""
extras:
  description: Per scenario section id, the C(checks), C(charts) and C(tables) to add to it.
  returned: always
  type: dict
failed_checks:
  description: How many of the checks failed.
  returned: always
  type: int
seconds:
  description: How long the wait and the queries took, in seconds.
  returned: always
  type: dict
"""

import time

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import api, config, timeline
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring.reach import prometheus_of


def _evaluated_until(url):
    """The newest evaluation time of the allocation rule (seconds since the epoch), or 0."""
    samples = api.query(url, "max(timestamp(%s))" % timeline.SERIES[0][1])
    return max((value for _, value in samples), default=0.0)


def _work(module):
    params = module.params
    try:
        windows = [timeline.window_of(run, "runs[%d]" % index) for index, run in enumerate(params["runs"])]
    except timeline.WindowError as error:
        raise runner.ModuleError(str(error)) from None
    windows = [window for window in windows if window is not None]
    if not windows:
        return {"changed": False, "extras": {}, "failed_checks": 0, "seconds": {}}
    url = prometheus_of(params)
    if not url:
        raise runner.ModuleError(
            "prometheus_url, sandbox_port_base or prometheus_in_cluster: expected one, found none of them"
        )
    clock = time.monotonic()
    last_end = max(window.end for window in windows)
    seconds = {}
    extras = {}
    try:
        wait_until(
            lambda: _evaluated_until(url), lambda t: t >= last_end, timeout=params["settle_timeout"], interval=2.0
        )
        seconds["wait"] = round(time.monotonic() - clock, 1)
        clock = time.monotonic()
        for window in windows:
            recorded = {}
            if window.resource == "gpu":
                for name, record in timeline.SERIES:
                    answer = api.query_range(
                        url, timeline.selector(record, window), window.start, window.end + window.step, window.step
                    )
                    recorded[name] = timeline.by_project(answer)
            extras[window.section_id] = timeline.extras(window, recorded, str(url))
        seconds["queries"] = round(time.monotonic() - clock, 1)
    except api.PrometheusError as error:
        # The validation goes on: each run's check says why (the monitoring section says more).
        extras = {
            window.section_id: {"checks": [timeline.unanswered_check(window, str(url), str(error)).to_dict()]}
            for window in windows
        }
    failed = sum(1 for added in extras.values() for check in added["checks"] if check["status"] == "fail")
    return {"changed": False, "extras": extras, "failed_checks": failed, "seconds": seconds}


def main():
    runner.run_cluster_module(
        runner.PROMETHEUS_ARG_SPEC,
        {
            "runs": {"type": "list", "elements": "dict", "default": []},
            "settle_timeout": {"type": "int", "default": 3 * config.SCRAPE_INTERVAL_SECONDS},
        },
        work=_work,
        doing="charting the scenario runs from Prometheus",
    )


if __name__ == "__main__":
    main()
