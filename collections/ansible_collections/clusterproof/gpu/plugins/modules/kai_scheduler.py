#!/usr/bin/python
"""Install KAI scheduler on the sandbox: its CRDs, priority classes and components."""

DOCUMENTATION = r"""
module: kai_scheduler
short_description: Run KAI scheduler on the clusterproof sandbox
description:
  - Applies KAI scheduler's CRDs and priority classes (from its Go module, copied into the sandbox
    cache by the build), its namespaces, the reservation service account and the department queue
    under which every project's queue hangs.
  - Writes the scheduler's configuration (the actions and plugins KAI's operator configures for a
    GPU bin-packing shard) and runs the queue controller, pod-group controller, pod grouper, binder
    and scheduler as local processes with the sandbox kubeconfig, plus the sandbox-only GPU agent
    that answers GPU reservation pods (fractions) for the simulated nodes.
  - Re-running on a sandbox where all of that is in place changes nothing.
  - On a real cluster KAI is installed with its Helm chart instead (not this module).
version_added: 0.1.0
options:
  mode:
    description:
      - C(sandbox) does all of the above on the sandbox.
      - C(cluster) only makes the department queue exist, on a cluster where KAI's Helm chart is installed
        (the kai_scheduler role installs it with C(kubernetes.core.helm)).
    type: str
    choices: [sandbox, cluster]
    default: sandbox
  kubeconfig:
    description: Kubeconfig of the cluster with O(mode=cluster).
    type: path
  state_dir:
    description:
      - The sandbox's state directory (as for C(clusterproof.gpu.sandbox_cluster)).
      - Required with O(mode=sandbox).
    type: path
  bin_dir:
    description: Directory with the kai-* binaries from the sandbox build; required with O(mode=sandbox).
    type: path
  share_dir:
    description:
      - The build's share directory, holding KAI's Helm chart in C(kai-scheduler/chart) (CRDs, priority classes).
    type: path
  port_base:
    description: The sandbox's port base; KAI's components listen on base+10 to base+18 of 127.0.0.1.
    type: int
    default: 16440
  department_gpu_quota:
    description: GPU quota of the department queue that holds the projects' queues (the site's GPUs).
    type: float
    required: true
  agent_pythonpath:
    description:
      - Directory to put on PYTHONPATH for the sandbox GPU agent (the repository's collections folder).
      - Required with O(mode=sandbox).
    type: path
  timeout:
    description: Seconds to wait for each component to become ready.
    type: int
    default: 120
author:
  - clusterproof developers
"""

EXAMPLES = r"""
- name: Run KAI scheduler on the sandbox
  clusterproof.gpu.kai_scheduler:
    state_dir: "{{ sandbox_cluster_dir }}"
    bin_dir: "{{ sandbox_binaries.bin_dir }}"
    share_dir: "{{ sandbox_binaries.share_dir }}"
    department_gpu_quota: "{{ clusterproof_site.total_gpus }}"
    agent_pythonpath: "{{ role_path }}/../../collections"
"""

RETURN = r"""
applied:
  description: Objects created or changed (kind/name).
  returned: always
  type: list
  elements: str
started:
  description: Components started by this run.
  returned: always
  type: list
  elements: str
config:
  description: Path of the scheduler configuration file.
  returned: always
  type: str
"""

import sys
from pathlib import Path

import yaml
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane as sandbox
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai

AGENT_MODULE = "ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.gpu_agent"


def _manifests(directory):
    for path in sorted(Path(directory).glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                yield document


def main():
    module = AnsibleModule(
        argument_spec={
            "mode": {"type": "str", "choices": ["sandbox", "cluster"], "default": "sandbox"},
            "kubeconfig": {"type": "path"},
            "state_dir": {"type": "path"},
            "bin_dir": {"type": "path"},
            "share_dir": {"type": "path"},
            "port_base": {"type": "int", "default": 16440},
            "department_gpu_quota": {"type": "float", "required": True},
            "agent_pythonpath": {"type": "path"},
            "timeout": {"type": "int", "default": 120},
        },
        required_if=[("mode", "sandbox", ("state_dir", "bin_dir", "share_dir", "agent_pythonpath"))],
        supports_check_mode=True,
    )
    params = module.params
    if params["mode"] == "cluster":
        _department_only(module)
    layout = sandbox.Layout(Path(params["state_dir"]))
    chart = Path(params["share_dir"]) / "kai-scheduler" / "chart"
    config_path = layout.root / "kai-scheduler.yaml"
    agent_argv = (
        sys.executable,
        "-m",
        AGENT_MODULE,
        "--kubeconfig=%s" % layout.kubeconfig,
        "--namespace=%s" % kai.RESERVATION_NAMESPACE,
    )
    components = kai.components(
        layout,
        Path(params["bin_dir"]),
        kai.KaiPorts(params["port_base"]),
        config_path,
        agent_argv,
        params["agent_pythonpath"],
    )
    result = {"changed": False, "applied": [], "started": [], "config": str(config_path)}
    if not layout.kubeconfig.exists():
        module.fail_json(
            msg="no sandbox at %s: bring it up first (clusterproof.gpu.sandbox_cluster state=up)" % layout.root,
            **result,
        )
    if not (chart / "crds").is_dir():
        module.fail_json(
            msg="%s has no KAI CRDs; run the sandbox build (clusterproof.gpu.sandbox_binaries)" % chart, **result
        )
    try:
        applier = kube.Applier(kube.api_client(str(layout.kubeconfig)), check_mode=module.check_mode)
        crds = list(_manifests(chart / "crds"))
        wanted = crds + list(_manifests(chart / "templates" / "priorityclasses")) + kai.system_objects()
        for manifest in wanted:
            changed, _, _ = applier.apply(manifest)
            if changed:
                result["applied"].append("%s/%s" % (manifest["kind"], manifest["metadata"]["name"]))
        if not module.check_mode:
            applier.wait_established([crd["metadata"]["name"] for crd in crds], params["timeout"])
            applier.refresh_discovery()
        department = kai.department_queue(params["department_gpu_quota"])
        if module.check_mode and result["applied"]:
            result["applied"].append("Queue/%s" % kai.DEPARTMENT_QUEUE)
        elif applier.apply(department)[0]:
            result["applied"].append("Queue/%s" % kai.DEPARTMENT_QUEUE)
        config_text = yaml.safe_dump(kai.scheduler_config(), sort_keys=False)
        if not config_path.exists() or config_path.read_text() != config_text:
            result["applied"].append("file %s" % config_path)
            if not module.check_mode:
                config_path.write_text(config_text)
        if module.check_mode:
            result["started"] = [c.name for c in components if sandbox.running_pid(layout, c.name, c.argv) is None]
        else:
            result["started"] = sandbox.run_components(layout, components, params["timeout"])
    except (sandbox.SandboxError, kube.KubeError, OSError) as error:
        module.fail_json(msg=str(error), **result)
    except kube.ApiException as error:
        module.fail_json(msg="the API server refused a request: %s %s" % (error.status, error.reason), **result)
    result["changed"] = bool(result["applied"] or result["started"])
    module.exit_json(**result)


def _department_only(module):
    """On a cluster installed from the Helm chart: only the department queue is clusterproof's."""
    params = module.params
    try:
        applier = kube.Applier(kube.api_client(params["kubeconfig"]), check_mode=module.check_mode)
        changed = applier.apply(kai.department_queue(params["department_gpu_quota"]))[0]
    except kube.KubeError as error:
        module.fail_json(msg=str(error))
    except kube.ApiException as error:
        module.fail_json(msg="the API server refused the department queue: %s %s" % (error.status, error.reason))
    applied = ["Queue/%s" % kai.DEPARTMENT_QUEUE] if changed else []
    module.exit_json(changed=changed, applied=applied, started=[], config="")


if __name__ == "__main__":
    main()
