#!/usr/bin/python
"""What an upgrade's drains took from the projects, and whether it came back: the report's section."""

DOCUMENTATION = r"""
module: upgrade_disruption
short_description: Wait for the work an upgrade's drains evicted to run again, and judge it per project
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Reads the projects' pods (every namespace named in O(projects)) until every controller whose pods a drain
    evicted (O(drains)) runs as many pods as before the upgrade (O(before)), or O(timeout) seconds pass.
  - A controller with no pod left at all (a Job that finished, a workload deleted) has nothing to come back; a bare
    pod is never made again.
  - Returns the report's C(upgrade-disruption) section, a check per project that lost pods (failed when its work
    is not back) and a table of what each node's drain evicted.
  - Reads only; reports C(changed=false).
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
options:
  drains:
    description: Node name -> what its drain evicted, as the filter C(clusterproof.gpu.drain_evicts) makes it.
    type: dict
    default: {}
  before:
    description: The projects' work before the upgrade, as the filter C(clusterproof.gpu.project_work) makes it.
    type: dict
    default: {}
  projects:
    description: The projects (namespaces).
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds to wait for the evicted work to run again.
    type: int
    default: 300
"""

EXAMPLES = r"""
- name: Wait for the evicted work and judge it
  clusterproof.gpu.upgrade_disruption:
    drains: "{{ drains }}"
    before: "{{ work_before }}"
    projects: [team-a, team-b]
"""

RETURN = r"""
section:
  description: The report section C(upgrade-disruption).
  returned: always
  type: dict
not_back:
  description: Per project, the evicted work that does not run again (its owners, how many pods run of how many).
  returned: always
  type: dict
waited_s:
  description: Seconds waited for the work to come back.
  returned: always
  type: float
"""

import json
import time

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import disruption
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import section_to_dict


def _work(module):
    params = module.params
    core = kube.core_v1(kube.api_client(params["kubeconfig"], params["context"]))

    def look():
        pods = []
        for project in params["projects"]:
            raw = core.list_namespaced_pod(project, _preload_content=False, _request_timeout=params["request_timeout"])
            pods += json.loads(raw.data)["items"]
        return disruption.running_work(pods, params["projects"])

    started = time.monotonic()
    has_evictions = any(params["drains"].values())
    now = wait_until(
        look,
        lambda work: not disruption.not_back(params["drains"], params["before"], work),
        timeout=params["timeout"] if has_evictions else 0,
        interval=5.0,
    ).value
    waited = round(time.monotonic() - started, 1)
    section = disruption.section(params["drains"], params["before"], now, waited)
    missing = disruption.not_back(params["drains"], params["before"], now)
    return {"changed": False, "section": section_to_dict(section), "not_back": missing, "waited_s": waited}


def main():
    runner.run_cluster_module(
        {
            "drains": {"type": "dict", "default": {}},
            "before": {"type": "dict", "default": {}},
            "projects": {"type": "list", "elements": "str", "default": []},
            "timeout": {"type": "int", "default": 300},
        },
        work=_work,
        doing="reading the projects' pods after the upgrade",
    )


if __name__ == "__main__":
    main()
