#!/usr/bin/env python3
"""A sandbox site on an older Kueue, with admitted work, moved to the pinned Kueue by running
``scheduler.yml`` again, as a site moves when ``versions.KUEUE`` moves.

    .venv/bin/python bench/kueue_upgrade_bench.py [--from v0.16.2]

Brings up a sandbox of its own (2 nodes of 8 GPUs, three projects of quota 5) and installs Kueue
``--from`` on it (``scheduler.yml -e kueue_scheduler_version=...``: the sandbox build puts that
release in the cache, in the pinned one's place), submits Jobs that fill the projects' quotas (one
borrows), then runs ``scheduler.yml`` again with the pin, timed (the pinned Kueue built back into the
cache first, not counted). Prints the seconds, the Kueue versions in its log, and for each kind of
object (ClusterQueues, LocalQueues, Cohorts, ResourceFlavors, WorkloadPriorityClasses, Workloads,
pods) whether every one is still there with its UID, the Workloads still admitted and the pods still
running. Exits 1 when anything was lost. Touches the sandbox cache (the pinned Kueue is built back
before it ends, also on failure) and its own sandbox: run it with no other Kueue sandbox of this
checkout running.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(REPO))

from kubernetes import client, config  # noqa: E402

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions  # noqa: E402
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build  # noqa: E402
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kueue  # noqa: E402
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads  # noqa: E402
from bench.sandbox_bench import generated_inventory  # noqa: E402
from tests.e2e.conftest import own_sandbox, run_playbook, sandbox_vars  # noqa: E402

PROJECTS = ("project-000", "project-001", "project-002")
# (project, GPUs a Job, Jobs): the cohort's quotas (3 of 5: 15 of the 16 GPUs) all admitted,
# project-000 borrowing 2 beyond its quota.
WORK = (("project-000", 1, 7), ("project-001", 2, 2), ("project-002", 1, 4))
GROUP, VERSION = kueue.API_VERSION.split("/")
KINDS = ("clusterqueues", "localqueues", "cohorts", "resourceflavors", "workloadpriorityclasses")


def snapshot(api: client.ApiClient) -> dict[str, dict[str, Any]]:
    """Every Kueue object of the site and every project pod, by name: its UID and its state."""
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    found: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        items = custom.list_cluster_custom_object(GROUP, VERSION, kind)["items"]
        found[kind] = {
            "%s/%s" % (i["metadata"].get("namespace", ""), i["metadata"]["name"]): i["metadata"]["uid"] for i in items
        }
    admitted = {}
    for item in custom.list_cluster_custom_object(GROUP, VERSION, "workloads")["items"]:
        conditions = (item.get("status") or {}).get("conditions") or []
        state = any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)
        admitted["%s/%s" % (item["metadata"]["namespace"], item["metadata"]["name"])] = (item["metadata"]["uid"], state)
    found["workloads"] = admitted
    found["pods"] = {
        "%s/%s" % (project, pod.metadata.name): (pod.metadata.uid, pod.status.phase)
        for project in PROJECTS
        for pod in core.list_namespaced_pod(project).items
    }
    return found


def kueue_versions(log: Path) -> list[str]:
    return re.findall(r'"msg":"Initializing","gitVersion":"([^"]+)"', log.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="old", default="v0.16.2", help="the Kueue release the site starts on")
    args = parser.parse_args()
    pinned_plan = sandbox_build.plan()
    lost = True
    try:
        with tempfile.TemporaryDirectory() as directory:
            inventory = generated_inventory(Path(directory) / "hosts.yml", 2, projects=3, scheduler="kueue")
            with own_sandbox(inventory, Path(directory) / "state", scheduler=False) as site:
                on_sandbox = sandbox_vars(site.state_dir, site.port_base)
                started = time.monotonic()
                older = run_playbook(
                    "playbooks/scheduler.yml",
                    *on_sandbox,
                    "-e",
                    "kueue_scheduler_version=" + args.old,
                    inventory=inventory,
                )
                if older.returncode != 0:
                    print(older.tail(3000))
                    return 1
                print("Kueue %s built and installed in %.0f s" % (args.old, time.monotonic() - started), flush=True)
                api = config.new_client_from_config(config_file=str(site.state_dir / "kubeconfig"))
                batch = client.BatchV1Api(api)
                for project, gpus, count in WORK:
                    settings = workloads.ProjectSettings(project)
                    for number in range(count):
                        job = workloads.Workload("%s-%d" % (project, number), project, workloads.TRAINING, gpus)
                        batch.create_namespaced_job(project, kueue.job_manifest(job, settings))
                deadline = time.monotonic() + 120
                while True:
                    before = snapshot(api)
                    running = sum(1 for _, phase in before["pods"].values() if phase == "Running")
                    if running == sum(count for _, _, count in WORK) or time.monotonic() > deadline:
                        break
                    time.sleep(2)
                admitted = sum(1 for _, state in before["workloads"].values() if state)
                print(
                    "before: %d Workloads, %d admitted, %d pods running" % (len(before["workloads"]), admitted, running)
                )
                built = time.monotonic()
                sandbox_build.ensure_built(pinned_plan)
                print("Kueue %s built back in %.0f s" % (versions.KUEUE.version, time.monotonic() - built), flush=True)
                moved = time.monotonic()
                run = run_playbook("playbooks/scheduler.yml", *on_sandbox, inventory=inventory)
                seconds = time.monotonic() - moved
                if run.returncode != 0:
                    print(run.tail(3000))
                    return 1
                after = snapshot(api)
                log = site.state_dir / "logs" / "kueue.log"
                print(
                    "scheduler.yml moved the site in %.1f s; Kueue's log: %s"
                    % (seconds, " then ".join(kueue_versions(log)))
                )
                lost = False
                for kind in (*KINDS, "workloads", "pods"):
                    changed = {
                        name: (before[kind].get(name), after[kind].get(name))
                        for name in set(before[kind]) | set(after[kind])
                        if before[kind].get(name) != after[kind].get(name)
                    }
                    lost |= bool(changed)
                    print(
                        "  %-24s %3d %s"
                        % (kind, len(before[kind]), "CHANGED: %s" % json.dumps(changed) if changed else "kept")
                    )
                api.close()
    finally:
        sandbox_build.ensure_built(pinned_plan)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
