#!/usr/bin/python
"""Run a fairness scenario against the live scheduler and judge what it does."""

DOCUMENTATION = r"""
module: validate_scenario
short_description: Run a fairness scenario on the cluster's GPU scheduler and judge the stable states
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Loads a scenario file (docs/scenarios.md), makes its projects exist in namespaces and scheduler
    queues of its own (prefixed, under a group of its own - a KAI department queue, a Kueue cohort -
    or as the scheduler's quota tree when the scenario is one), then runs its steps (submit and
    delete workloads, wait until the allocation has not changed for O(settle_seconds)), and compares
    what the scheduler did with the expectation written in the file and with the fair-share
    model's prediction for the scenario's policy.
  - Refuses to start when workloads outside the scenario hold or wait for GPUs, unless O(force=true).
  - Always removes what it created, also when a step fails or the run is interrupted (SIGINT,
    SIGTERM, SIGHUP), so it reports C(changed=false). Every object it creates carries the label
    C(clusterproof.io/scenario-run) with its run's id; what a run could not remove (the API server
    gone) the next run removes before it starts, instead of failing on objects that already exist.
  - Whatever stops a started run (an API error, the API server gone, a signal, a node the scenario
    uses not Ready, on the sandbox a process of the engine stopped or gone) is the scenario's failed
    check C(scenario/<name>/stopped), naming the cause; the task itself does not fail, so the report
    has it. Before and during each step the nodes and, on the sandbox, the engine's processes are
    checked, so a step that cannot settle stops at once with its cause, not after O(step_timeout).
  - A scenario that is not started (a bad file, a busy cluster, a cluster out of reach) fails the
    task with the reason, and nothing is changed.
  - A scenario is read as shares of the capacity it was written for, and runs sized to this site
    (docs/scenarios.md) - quotas, job sizes and written allocations scale, on nodes of one size, its
    workloads kept off the GPU nodes it does not use. Written expectations are checked where the
    model, sized to the site, agrees with them; the model's prediction is checked always. A site
    too small for the scenario skips it with the reason.
  - With O(prometheus_url), O(sandbox_port_base) or O(prometheus_in_cluster), after each step is judged the run
    waits, up to O(prometheus_settle_timeout) seconds, until Prometheus's C(project:gpus_allocated:sum) of every
    project of the run equals the whole GPUs its pods hold, and adds the check C(monitoring/step/<name>/<step>);
    the step's state holds meanwhile, so Prometheus records every step. With none, nothing of Prometheus is checked.
  - The engine named by O(scheduler) is held to the model of its own fairness policy; where that
    differs from the policy the scenario's tables were written for, a difference from the tables is
    a warning and the report says whether the engine reproduces the document.
options:
  scenario_file:
    description: Path of the scenario YAML file (on the controller when O(scenario_content) is given).
    type: path
    required: true
  scenario_content:
    description:
      - The scenario file's bytes as they are, in base64 (C(ansible.builtin.slurp)'s C(content)), read on
        the controller; the file's path names it in messages. The role gives it, so the module runs
        where the cluster's kubeconfig is (a kubeadm site's first control-plane host) without the
        project's files there. The bytes go through the same loader as a file read here (UTF-8 only,
        no aliases, bounded), which names the file, line and byte of what it refuses.
    type: str
  nodes:
    description: The site's GPU nodes as the inventory declares them (name, gpu_count).
    type: list
    elements: dict
    required: true
  force:
    description: Run even when other workloads hold or wait for GPUs (their presence will skew the result).
    type: bool
    default: false
  settle_seconds:
    description: A step is done when the allocation has not changed for this long.
    type: float
    default: 6
  arrival_seconds:
    description:
      - Where a waiting workload has no pod (Kueue's suspended Jobs), wait up to this long after submitting
        one for it to run before the next arrives.
    type: float
    default: 3
  decision_seconds:
    description:
      - Where a waiting workload has pods (KAI), wait after submitting one until the engine has decided
        about each of its pods (it runs, or the engine marked it unschedulable for now), at most this long,
        before the next arrives.
    type: float
    default: 60
  step_timeout:
    description: Seconds a step may take before its state is judged as it is.
    type: int
    default: 180
  namespace_prefix:
    description: Prefix of the scenario's namespaces and queues.
    type: str
    default: scn-
  sandbox_state_dir:
    description:
      - The sandbox's state directory, when the cluster is the sandbox; the engine's processes recorded
        there are checked before and during each step (one stopped or gone stops the run, naming it).
    type: path
  prometheus_settle_timeout:
    description:
      - Seconds to wait after a step for Prometheus's allocation to equal the pods' (a scrape and a rule evaluation).
    type: int
    default: 45
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
  - clusterproof.gpu.scheduler
  - clusterproof.gpu.prometheus
"""

EXAMPLES = r"""
- name: Run NetApp's 4.8-4.10 fairness scenario
  clusterproof.gpu.validate_scenario:
    scenario_file: scenarios/netapp-runai-4.8-4.10.yml
    nodes: "{{ clusterproof_site.nodes }}"
    kubeconfig: "{{ clusterproof_active_kubeconfig }}"
  register: scenario
"""

RETURN = r"""
section:
  description: The report section (checks per step, a table per step, the allocation timeline chart).
  returned: always
  type: dict
duration_s:
  description: Wall time of the whole scenario in seconds.
  returned: always
  type: float
failed_checks:
  description: How many checks failed.
  returned: always
  type: int
skip_reason:
  description: Why the scenario was not run (check mode, a site too small, an engine that cannot run it).
  returned: when the scenario was skipped
  type: str
stopped:
  description: Why a started run stopped before its end (also its failed check C(scenario/<name>/stopped)).
  returned: when the run stopped
  type: str
window:
  description:
    - When the run was on the cluster (C(start), C(end), seconds since the epoch), its C(projects) (scenario name to
      namespace and queue) and its C(resource); what C(clusterproof.gpu.monitoring_timeline) charts.
  returned: when the run reached the cluster
  type: dict
"""

import base64
import binascii
import json
from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils.common import pods
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import api as prometheus
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import checks as monitoring_checks
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring.reach import prometheus_of
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import scenario_runner

OPTIONS = {
    "scenario_file": {"type": "path", "required": True},
    "scenario_content": {"type": "str"},
    "nodes": {"type": "list", "elements": "dict", "required": True},
    "force": {"type": "bool", "default": False},
    "settle_seconds": {"type": "float", "default": 6},
    "arrival_seconds": {"type": "float", "default": 3},
    "decision_seconds": {"type": "float", "default": 60},
    "step_timeout": {"type": "int", "default": 180},
    "namespace_prefix": {"type": "str", "default": "scn-"},
    "sandbox_state_dir": {"type": "path"},
    "prometheus_settle_timeout": {"type": "int", "default": 45},
}


def _content(params):
    """The scenario file's bytes from O(scenario_content), or None (the module reads the file)."""
    if params["scenario_content"] is None:
        return None
    try:
        return base64.b64decode(params["scenario_content"], validate=True)
    except (binascii.Error, ValueError):
        raise scenario_runner.ScenarioRefused(
            "scenario %s: scenario_content: expected the file's bytes in base64, found text that is not base64; "
            "nothing was changed" % params["scenario_file"]
        ) from None


def _prometheus_check(params):
    """The check of Prometheus after each step (RunOptions.after_step), or None when no Prometheus is given."""
    url = prometheus_of(params)
    if not url:
        return None
    api = kube.api_client(params["kubeconfig"], params["context"])
    core = kube.core_v1(api)

    def after_step(scenario, index, namespaces):
        def look():
            held = {}
            for namespace in namespaces:
                raw = core.list_namespaced_pod(
                    namespace, _preload_content=False, _request_timeout=params["request_timeout"]
                )
                held.update(pods.held_by_pods(json.loads(raw.data)["items"], [namespace]))
            query = monitoring_checks.of_projects(monitoring_checks.ALLOCATED, namespaces)
            return held, prometheus.by_label(prometheus.query(url, query), "project")

        def same(value):
            held, recorded = value
            return all(project in recorded and abs(recorded[project] - gpus) < 1e-9 for project, gpus in held.items())

        try:
            waited = wait_until(look, same, timeout=params["prometheus_settle_timeout"], interval=2.0)
        except prometheus.PrometheusError as error:
            return [monitoring_checks.unanswered_step_check(scenario, index, str(url), str(error)).to_dict()]
        held, recorded = waited.value
        return [monitoring_checks.step_allocation_check(scenario, index, held, recorded, waited.waited_s).to_dict()]

    return after_step


def _run(module):
    params = module.params
    options = scenario_runner.RunOptions(
        settle_seconds=params["settle_seconds"],
        arrival_seconds=params["arrival_seconds"],
        decision_seconds=params["decision_seconds"],
        step_timeout=params["step_timeout"],
        namespace_prefix=params["namespace_prefix"],
        force=params["force"],
        sandbox_state_dir=params["sandbox_state_dir"],
        after_step=_prometheus_check(params),
    )
    result = scenario_runner.run(
        Path(params["scenario_file"]),
        params["nodes"],
        registry.backend(params["scheduler"]),
        options,
        lambda: kube.api_client(params["kubeconfig"], params["context"]),
        module.check_mode,
        _content(params),
    )
    # A run that stopped says so in its section (its failed check names the cause): the report has it.
    return {"changed": False, **result.to_dict()}


def main():
    runner.run_cluster_module(
        OPTIONS,
        registry.ARG_SPEC,
        runner.PROMETHEUS_ARG_SPEC,
        work=_run,
        doing="running the scenario",
        expected=(scenario_runner.ScenarioRefused,),
    )


if __name__ == "__main__":
    main()
