#!/usr/bin/python
"""Run a fairness scenario against the live scheduler and judge what it does."""

DOCUMENTATION = r"""
module: validate_scenario
short_description: Run a fairness scenario on the cluster's GPU scheduler and judge the stable states
description:
  - Loads a scenario file (docs/scenarios.md), makes its projects exist in namespaces and KAI queues
    of its own (prefixed, under a department queue of its own), then runs its steps (submit and
    delete workloads, wait until the allocation has not changed for O(settle_seconds)), and compares
    what the scheduler did with the expectation written in the file and with the fair-share
    model's prediction for the scenario's policy.
  - Refuses to start when workloads outside the scenario hold or wait for GPUs, unless O(force=true).
  - Always removes what it created, also when a step fails or the run is interrupted, so it
    reports C(changed=false).
  - A scenario is read as shares of the capacity it was written for, and runs sized to this site
    (docs/scenarios.md) - quotas, job sizes and written allocations scale, on nodes of one size, its
    workloads kept off the GPU nodes it does not use. Written expectations are checked where the
    model, sized to the site, agrees with them; the model's prediction is checked always. A site
    too small for the scenario skips it with the reason.
version_added: 0.1.0
options:
  scenario_file:
    description: Path of the scenario YAML file.
    type: path
    required: true
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
    description: After submitting a workload, wait up to this long for it to run before the next arrives.
    type: float
    default: 3
  step_timeout:
    description: Seconds a step may take before its state is judged as it is.
    type: int
    default: 180
  namespace_prefix:
    description: Prefix of the scenario's namespaces and queues.
    type: str
    default: scn-
  scheduler:
    description:
      - The GPU scheduler (engine) the cluster runs. Its fairness policy is what the model predicts
        and the scheduler is held to; where it differs from the policy the scenario's tables were
        written for, a difference from the tables is a warning and the report says whether the
        engine reproduces the document.
    type: str
    default: kai
    choices: [kai, kueue]
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
author:
  - clusterproof developers
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
"""

import copy
import json
import signal
import time
from pathlib import Path

import yaml
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import model as report
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai, kueue
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects, workloads
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import scenarios

SCENARIO_DEPARTMENT = "clusterproof-scenarios"
ENGINE_NAMES = {"kai": "KAI scheduler", "kueue": "Kueue"}


class Interrupted(Exception):
    pass


def _brief(error):
    """An API error as the API server's message (its status and reason), not the client's dump."""
    if isinstance(error, kube.ApiException):
        try:
            message = json.loads(error.body or "{}").get("message")
        except ValueError:
            message = None
        return "%s %s%s" % (error.status, error.reason, ": %s" % message if message else "")
    return str(error)


def _pod_amount(pod, resource):
    return kai.pod_cpus(pod) if resource == "cpu" else kai.pod_gpus(pod)


def _observe(core, scenario, prefix, alive=()):
    """What the scheduler did. ``alive``: the workloads that exist now; one with no running pod
    waits (under Kueue a waiting Job has no pod at all: it is suspended until admitted)."""
    allocated, running, pending, groups, replicas = {}, [], [], {}, {}
    deployments = {job.name for step in scenario.steps for job in step.submit if job.replicas is not None}
    for project in scenario.projects:
        allocated[project.name] = 0.0
        if project.name in scenario.parents:
            continue  # inner node of a quota tree: it holds what its children hold
        for pod in core.list_namespaced_pod(prefix + project.name).items:
            if pod.metadata.deletion_timestamp or pod.status.phase in ("Succeeded", "Failed"):
                continue
            name = (pod.metadata.labels or {}).get(workloads.WORKLOAD_NAME_LABEL)
            if pod.status.phase == "Running" and pod.spec.node_name:
                allocated[project.name] += _pod_amount(pod, scenario.resource)
                if name in deployments:
                    replicas[name] = replicas.get(name, 0) + 1
                running.append(name)
                group = (pod.metadata.labels or {}).get(kai.GPU_GROUP_LABEL)
                if group and (pod.metadata.annotations or {}).get(kai.GPU_FRACTION_ANNOTATION):
                    groups.setdefault(group, []).append(name)
            else:
                pending.append(name)
    parents = {project.name: project.parent for project in scenario.projects if project.parent}
    allocated = scenarios.roll_up({key: round(value, 3) for key, value in allocated.items()}, parents)
    shared = tuple(sorted(tuple(sorted(members)) for members in groups.values()))
    waiting = set(pending) | (set(alive) - set(running))
    return scenarios.Observation(
        allocated, tuple(sorted(set(running))), tuple(sorted(waiting)), shared, replicas, parents
    )


def _foreign_pods(core, own_namespaces, resource):
    busy = []
    for pod in core.list_pod_for_all_namespaces().items:
        namespace = pod.metadata.namespace
        if namespace in own_namespaces or namespace == kai.RESERVATION_NAMESPACE:
            continue
        if pod.status.phase in ("Pending", "Running") and _pod_amount(pod, resource) > 0:
            busy.append("%s/%s" % (namespace, pod.metadata.name))
    return sorted(busy)


def _settle(core, scenario, prefix, expected_names, settle, timeout, started, timeline, pods_first=True):
    """Poll until every workload has a pod (``pods_first``; Kueue makes none for a waiting Job)
    and nothing has changed for ``settle`` seconds."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while True:
        observed = _observe(core, scenario, prefix, () if pods_first else expected_names)
        timeline.append([round(time.monotonic() - started, 1), dict(observed.allocated)])
        complete = not pods_first or set(expected_names) <= set(observed.running) | set(observed.pending)
        key = (observed.allocated, observed.running, observed.pending, observed.shared_gpus, observed.replicas)
        if key != last or not complete:
            last, since = key, time.monotonic()
        elif time.monotonic() - since >= settle:
            return observed
        if time.monotonic() > deadline:
            return observed
        time.sleep(1)


def _placed_or_waiting(core, namespace, name, patience, pods_wanted=1):
    """Wait until the workload's pods run, or have waited ``patience`` seconds."""
    deadline = time.monotonic() + patience
    selector = "%s=%s" % (workloads.WORKLOAD_NAME_LABEL, name)
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        if sum(1 for pod in pods if pod.status.phase == "Running" and pod.spec.node_name) >= pods_wanted:
            return
        time.sleep(0.25)


def _project_objects(scenario, prefix, site_gpus, engine="kai"):
    if engine == "kueue":
        resource = kueue.GPU if scenario.resource == "gpu" else scenario.resource
        return kueue.scenario_manifests(scenario.projects, prefix, resource, prefix + "scenarios")
    if scenario.parents:
        return _tree_objects(scenario, prefix)
    objects = [kai.queue_manifest(SCENARIO_DEPARTMENT, site_gpus, 1, None, None)]
    for project in scenario.projects:
        declared = projects.Project(
            prefix + project.name,
            gpu_quota=project.quota,
            over_quota_weight=project.quota if project.weight is None else project.weight,
            gpu_limit=project.limit,
        )
        objects += [projects.namespace_manifest(declared), projects.queue_manifest(declared, SCENARIO_DEPARTMENT)]
    return objects


def _tree_objects(scenario, prefix):
    """A quota tree: every node a KAI queue under its parent (the root at the top), in the
    scenario's resource; a namespace for each leaf."""
    objects = []
    for project in scenario.projects:
        name, parent = prefix + project.name, None if project.parent is None else prefix + project.parent
        weight = project.quota if project.weight is None else project.weight
        if scenario.resource == "cpu":
            objects.append(kai.cpu_queue_manifest(name, project.quota, weight, project.limit, parent))
        else:
            objects.append(kai.queue_manifest(name, project.quota, weight, project.limit, parent))
        if project.name not in scenario.parents:
            objects.append(projects.namespace_manifest(projects.Project(name, gpu_quota=0, over_quota_weight=0)))
    return objects


def _cleanup(applier, core, objects, prefix, scenario, timeout=90):
    for manifest in reversed(objects):
        applier.delete(manifest)
    deadline = time.monotonic() + timeout
    names = {prefix + project.name for project in scenario.projects}
    while time.monotonic() < deadline:
        existing = {ns.metadata.name for ns in core.list_namespace().items}
        if not names & existing:
            return
        time.sleep(1)


def main():
    spec = {
        "scenario_file": {"type": "path", "required": True},
        "nodes": {"type": "list", "elements": "dict", "required": True},
        "force": {"type": "bool", "default": False},
        "settle_seconds": {"type": "float", "default": 6},
        "arrival_seconds": {"type": "float", "default": 3},
        "step_timeout": {"type": "int", "default": 180},
        "namespace_prefix": {"type": "str", "default": "scn-"},
        "scheduler": {"type": "str", "default": "kai", "choices": sorted(scenarios.ENGINE_POLICY)},
    }
    spec.update(copy.deepcopy(kube.AUTH_ARG_SPEC))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    params = module.params
    path = Path(params["scenario_file"])
    try:
        scenario = scenarios.load(yaml.safe_load(path.read_text()), where=str(path))
    except (OSError, yaml.YAMLError, scenarios.ScenarioError) as error:
        module.fail_json(msg="scenario %s: %s; nothing was changed" % (path, error))
    section = {
        "id": "scenario-%s" % scenario.name,
        "title": "Scenario: %s" % scenario.title,
        "checks": [],
        "tables": [],
        "charts": [],
    }
    capacity_key = "cpu_cores" if scenario.resource == "cpu" else "gpu_count"
    nodes = [(str(node["name"]), int(node.get(capacity_key) or 0)) for node in params["nodes"]]
    plan = scenarios.fit_to_site(scenario, nodes)
    if isinstance(plan, str) or module.check_mode:
        if module.check_mode:
            reason = "check mode: the scenario was not run"
        else:
            reason = "written for %d %s on nodes of %d; this site cannot hold it: %s" % (
                scenario.reference_gpus,
                scenario.unit,
                scenario.node_gpus,
                plan,
            )
        section["checks"].append(
            {"id": "scenario/%s" % scenario.name, "title": scenario.title, "status": "skip", "message": reason}
        )
        module.exit_json(changed=False, section=section, duration_s=0.0, failed_checks=0, skip_reason=reason)
    section["title"] += " (%s)" % plan.describe()
    scenario = plan.scenario
    engine = params["scheduler"]
    # Steps whose written tables cannot apply on this engine, with the reason.
    not_applicable = {}
    if engine == "kueue" and any(job.gpus < 1 for step in scenario.steps for job in step.submit):
        scenario, affected = scenarios.without_fractions(scenario)
        if not any(step.submit for step in scenario.steps):
            reason = "Kueue has no fractional GPUs, and every workload of this scenario is a fraction of a GPU"
            section["checks"].append(
                {"id": "scenario/%s" % scenario.name, "title": scenario.title, "status": "skip", "message": reason}
            )
            module.exit_json(changed=False, section=section, duration_s=0.0, failed_checks=0, skip_reason=reason)
        for index, names in affected.items():
            not_applicable[index] = (
                "Kueue has no fractional GPUs: %s left out, so the document's table does not apply to this step; "
                "the model, without them, is checked" % ", ".join(names)
            )

    prefix = params["namespace_prefix"]
    own = {prefix + project.name for project in scenario.projects}
    try:
        api = kube.api_client(params["kubeconfig"], params["context"])
        core = kube.core_v1(api)
        busy = _foreign_pods(core, own, scenario.resource)
    except (kube.KubeError, kube.ApiException) as error:
        module.fail_json(msg="cannot reach the cluster to run scenario %s: %s" % (scenario.name, error))
    if busy and not params["force"]:
        module.fail_json(
            msg="scenario %s not started: %d workload pod(s) outside it hold or wait for %s (%s); "
            "nothing was changed; set force to run anyway"
            % (scenario.name, len(busy), scenario.unit, ", ".join(busy[:5]))
        )

    def interrupt(signum, frame):
        raise Interrupted("interrupted by signal %d" % signum)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    applier = kube.Applier(api)
    batch = kube.batch_v1(api)
    apps = kube.apps_v1(api)
    engine_policy = scenarios.ENGINE_POLICY[engine]
    objects = _project_objects(scenario, prefix, plan.gpus, engine)
    timeline = []
    started = time.monotonic()
    error_message = None
    try:
        if engine == "kueue":
            # The site's flavor and priority classes (the kueue_scheduler role makes them; kept after).
            for manifest in [kueue.resource_flavor_manifest(), *kueue.priority_class_manifests()]:
                applier.apply(manifest)
        for manifest in objects:
            applier.apply(manifest)
        # On a site larger than the scenario, its workloads stay on the nodes it was sized to.
        pinned = tuple(name for name, _ in plan.nodes) if plan.unused_nodes else ()
        settings = {
            project.name: workloads.ProjectSettings(prefix + project.name, pinned, pinned)
            for project in scenario.projects
        }
        # The engine is held to the model of its own policy; the tables to the scenario's.
        model = scenarios.predictions(scenario, list(plan.nodes), engine_policy)
        written_model = scenarios.predictions(scenario, list(plan.nodes))
        by_name = {}
        for index, step in enumerate(scenario.steps):
            step_started = time.monotonic()
            for name in step.delete:
                job = by_name[name]
                if engine == "kueue" and job.replicas is not None:
                    batch.delete_collection_namespaced_job(
                        prefix + job.project,
                        label_selector="%s=%s" % (workloads.WORKLOAD_NAME_LABEL, name),
                        propagation_policy="Background",
                    )
                elif job.replicas is None:
                    batch.delete_namespaced_job(name, prefix + job.project, propagation_policy="Background")
                else:
                    apps.delete_namespaced_deployment(name, prefix + job.project, propagation_policy="Background")
            if step.delete:
                # Ended workloads free their GPUs before anything new arrives, and what was waiting
                # takes them (the document's order, and one that does not race the scheduler).
                remaining = [
                    job.name for job in (scenario.jobs_after(index - 1) if index else []) if job.name not in step.delete
                ]
                _settle(
                    core,
                    scenario,
                    prefix,
                    remaining,
                    params["settle_seconds"],
                    params["step_timeout"],
                    started,
                    timeline,
                    pods_first=engine != "kueue",
                )
            for job in step.submit:
                by_name[job.name] = job
                workload = workloads.Workload(job.name, prefix + job.project, job.kind, job.gpus)
                if engine == "kueue":
                    manifests = (
                        [kueue.job_manifest(workload, settings[job.project])]
                        if job.replicas is None
                        else kueue.replica_jobs(workload, settings[job.project], job.replicas, scenario.resource)
                    )
                    for manifest in manifests:
                        batch.create_namespaced_job(prefix + job.project, manifest)
                elif job.replicas is None:
                    batch.create_namespaced_job(
                        prefix + job.project, workloads.job_manifest(workload, settings[job.project])
                    )
                else:
                    manifest = workloads.deployment_manifest(
                        workload, settings[job.project], job.replicas, scenario.resource
                    )
                    apps.create_namespaced_deployment(prefix + job.project, manifest)
                # Workloads arrive one after the other, as users submit them and as the model
                # reads them: the scheduler places each before the next comes.
                _placed_or_waiting(core, prefix + job.project, job.name, params["arrival_seconds"], job.replicas or 1)
                if engine == "kueue":
                    # Kueue orders preemption candidates by admission time, kept to the second: arrivals
                    # a second apart keep that order the order of submission, as the model reads it.
                    time.sleep(1.05)
            alive = [job.name for job in scenario.jobs_after(index)]
            observed = _settle(
                core,
                scenario,
                prefix,
                alive,
                params["settle_seconds"],
                params["step_timeout"],
                started,
                timeline,
                pods_first=engine != "kueue",
            )
            duration = round(time.monotonic() - step_started, 1)
            applies = index not in not_applicable and (
                plan.exact or scenarios.written_holds(scenario, index, written_model[index])
            )
            if index in not_applicable:
                section["checks"].append(
                    {
                        "id": "scenario/%s/%d/written" % (scenario.name, index + 1),
                        "title": "%s: the document's table" % scenario.steps[index].name,
                        "status": "skip",
                        "message": not_applicable[index],
                    }
                )
            elif not applies:
                section["checks"].append(
                    {
                        "id": "scenario/%s/%d/written" % (scenario.name, index + 1),
                        "title": "%s: the document's table, scaled to this site" % scenario.steps[index].name,
                        "status": "skip",
                        "message": "does not carry over to %s; the model's prediction is checked instead"
                        % plan.describe(),
                    }
                )
            section["checks"] += [
                check.to_dict()
                for check in scenarios.judge(scenario, index, observed, model[index], applies, duration, engine_policy)
            ]
            section["tables"].append(scenarios.step_table(scenario, index, observed, model[index], applies))
        judged = [report.Check.from_dict(check) for check in section["checks"]]
        section["checks"].append(
            scenarios.reproduction(scenario, judged, ENGINE_NAMES[engine], engine_policy).to_dict()
        )
    except (
        kube.ApiException,
        kube.KubeError,
        workloads.WorkloadError,
        kueue.KueueError,
        ValueError,
        Interrupted,
    ) as error:
        error_message = "scenario %s stopped: %s" % (scenario.name, _brief(error))
    finally:
        _cleanup(applier, core, objects, prefix, scenario)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    duration = round(time.monotonic() - started, 1)
    section["charts"].append(
        {
            "id": "scenario-%s-timeline" % scenario.name,
            "title": "%s allocated per project over time (%s)" % (scenario.unit, scenario.name),
            "timeline": timeline,
        }
    )
    if error_message:
        module.fail_json(
            msg=error_message + "; everything it created was removed", section=section, duration_s=duration
        )
    failed = sum(1 for check in section["checks"] if check["status"] == "fail")
    module.exit_json(changed=False, section=section, duration_s=duration, failed_checks=failed)


if __name__ == "__main__":
    main()
