#!/usr/bin/env python3
"""Validator figures: the NetApp 4.8 -> 4.10 scenario's wall time on the default sandbox, and the
inventory and quota checks on a large sandbox (default 1,000 nodes, 8,000 GPUs).

    .venv/bin/python bench/validation_bench.py [--nodes 1000]

Goals (issue 4): the chained scenario <= 3 minutes; node and quota checks on 1,000 nodes <= 60 s
with <= 1 GiB RSS. Each figure is the wall time of the module run the way an admin runs it (an
ad-hoc Ansible call), and the peak RSS of that run's largest process.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.sandbox_bench import generated_inventory  # noqa: E402
from tests.e2e.conftest import free_port_base, run_playbook, sandbox_vars  # noqa: E402

ANSIBLE = Path(sys.executable).parent / "ansible"


def module(name: str, args: dict) -> tuple[float, float, dict]:
    """Run a module ad hoc; return wall seconds, peak RSS (MiB) of a child, and its result."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env["PATH"] = "%s:%s" % (ANSIBLE.parent, env["PATH"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.monotonic()
    done = subprocess.run(
        [str(ANSIBLE), "localhost", "-m", name, "-a", json.dumps(args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.monotonic() - started
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    if done.returncode != 0:
        raise SystemExit("%s failed:\n%s" % (name, done.stdout[-3000:]))
    return wall, peak, json.loads(done.stdout[done.stdout.index("=> {") + 3 :])


def up(inventory: Path | None, state_dir: Path, port_base: int) -> None:
    for playbook in ("playbooks/sandbox.yml", "playbooks/scheduler.yml"):
        run = run_playbook(playbook, *sandbox_vars(state_dir, port_base), inventory=inventory, timeout=1800)
        if run.returncode != 0:
            raise SystemExit(run.output[-3000:])


def down(inventory: Path | None, state_dir: Path, port_base: int) -> None:
    run_playbook(
        "playbooks/sandbox.yml",
        "-e",
        "sandbox_cluster_state=down",
        *sandbox_vars(state_dir, port_base),
        inventory=inventory,
    )


def pure_node_checks(count: int) -> float:
    """Seconds the node comparison alone takes for ``count`` 8-GPU nodes (one of them short a GPU)."""
    sys.path.insert(0, str(REPO / "collections"))
    from ansible_collections.clusterproof.gpu.plugins.module_utils.validate.nodes import validate_gpu_nodes

    names = ["gpu-%05d" % index for index in range(count)]
    declared = [{"name": name, "gpu_count": 8} for name in names]
    observed = [
        {
            "metadata": {"name": name, "labels": {}},
            "status": {
                "allocatable": {"nvidia.com/gpu": "7" if index == count // 2 else "8"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for index, name in enumerate(names)
    ]
    started = time.perf_counter()
    outcome = validate_gpu_nodes(declared, observed)
    elapsed = time.perf_counter() - started
    assert len(outcome.failed) == 2, [check.id for check in outcome.failed]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--pure-only", action="store_true", help="only the comparisons, no sandbox")
    args = parser.parse_args()
    for count in (1000, 10000):
        print("node comparison alone, %d nodes: %.3f s" % (count, pure_node_checks(count)))
    if args.pure_only:
        return
    with tempfile.TemporaryDirectory() as scratch:
        state, base = Path(scratch) / "default", free_port_base()
        up(None, state, base)
        try:
            nodes = [{"name": "dgx1-1", "gpu_count": 8}, {"name": "dgx1-2", "gpu_count": 8}]
            wall, peak, result = module(
                "clusterproof.gpu.validate_scenario",
                {
                    "scenario_file": str(REPO / "scenarios/netapp-runai-4.8-4.10.yml"),
                    "nodes": nodes,
                    "kubeconfig": str(state / "kubeconfig"),
                },
            )
            print(
                "NetApp 4.8 -> 4.10 on the default sandbox: %.0f s wall (goal <= 180 s), %d failed checks"
                % (wall, result["failed_checks"])
            )
        finally:
            down(None, state, base)

        inventory = generated_inventory(Path(scratch) / "hosts.yml", args.nodes, projects=args.projects)
        state, base = Path(scratch) / "large", free_port_base()
        started = time.monotonic()
        up(inventory, state, base)
        print("%d-node sandbox with KAI up in %.0f s" % (args.nodes, time.monotonic() - started))
        try:
            declared = [
                {
                    "name": "gpu-%04d" % i,
                    "gpu_count": 8,
                    "gpu_product": "NVIDIA-H100-80GB-HBM3",
                    "gpu_memory_mib": 81559,
                }
                for i in range(args.nodes)
            ]
            wall, peak, result = module(
                "clusterproof.gpu.validate_gpu_nodes", {"nodes": declared, "kubeconfig": str(state / "kubeconfig")}
            )
            print(
                "node checks, %d nodes: %.1f s wall, peak RSS %.0f MiB, %d checks, %d failed"
                % (args.nodes, wall, peak, len(result["checks"]), result["failed_checks"])
            )
            quota = 8 * args.nodes // args.projects
            declared_projects = [
                {"name": "project-%03d" % i, "gpu_quota": quota, "over_quota_weight": quota}
                for i in range(args.projects)
            ]
            wall_q, peak_q, result_q = module(
                "clusterproof.gpu.validate_projects",
                {"projects": declared_projects, "kubeconfig": str(state / "kubeconfig")},
            )
            print(
                "quota checks, %d projects: %.1f s wall, peak RSS %.0f MiB, %d failed (goal: <= 60 s, <= 1 GiB)"
                % (args.projects, wall_q, peak_q, result_q["failed_checks"])
            )
        finally:
            down(inventory, state, base)


if __name__ == "__main__":
    main()
