#!/usr/bin/env python3
"""Validator figures: the NetApp 4.8 -> 4.10 scenario's wall time on the default sandbox, and the
inventory and quota checks on a large sandbox (default 1,000 nodes, 8,000 GPUs).

    .venv/bin/python bench/validation_bench.py [--nodes 1000] [--projects 100] [--dra-half] [--nodes-only]

Goals (issue 4): the chained scenario <= 3 minutes; node and quota checks on 1,000 nodes <= 60 s
with <= 1 GiB RSS. Issue 15: 10,000 nodes and 80,000 GPUs validated in <= 30 s and <= 1 GiB, with
the GPUs of half the nodes counted from dynamic resource allocation (``--dra-half``: those nodes
advertise no ``nvidia.com/gpu``, their GPUs are in two ResourceSlices of ``gpu.nvidia.com`` each, as
NVIDIA's DRA driver publishes them). ``--nodes-only`` leaves out the scenario, the scheduler and the
quota checks; ``--keep`` leaves the large sandbox up and ``--kubeconfig`` times the node checks on it
again. Each figure is the wall time of a one-task playbook running the module (its arguments from a
file: 10,000 nodes do not fit on a command line), and the peak RSS of that run's largest process
(the controller or the module). The node checks run with the section written to a file
(``section_file``) ``--repeat`` times, then once with the section returned through Ansible.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.sandbox_bench import generated_inventory  # noqa: E402
from tests.e2e.conftest import free_port_base, run_playbook, sandbox_vars  # noqa: E402

ANSIBLE = Path(sys.executable).parent / "ansible"
# NVIDIA's DRA driver publishes a node's GPUs in the pool named after the node; two slices of four
# here, so that the validator's reading of a pool of several slices is what is timed.
DRA_SLICES_PER_NODE = 2
GPUS_PER_NODE = 8
# Runs a command and prints the peak RSS (KiB) of its largest process, waited-for descendants
# included: the figure belongs to this run alone, not to the playbooks the bench ran before.
PEAK_RSS_OF = (
    "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(done.returncode)"
)


def module(name: str, args: dict) -> tuple[float, float, dict]:
    """Run a module in a one-task playbook on localhost (its arguments from a file: 10,000 nodes are
    past the kernel's limit on one command-line argument); return wall seconds, peak RSS (MiB) of the
    run's largest process (the controller or the module), and its result but a returned ``section``
    (the bench reads the section from ``section_file``)."""
    scratch = Path(tempfile.mkdtemp(prefix="cp-validation-bench-"))
    (scratch / "args.json").write_text(json.dumps({"bench_args": args}))
    summary = scratch / "summary.json"
    (scratch / "run.yml").write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Bench " + name,
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {name: "{{ bench_args }}", "register": "bench_result"},
                        {
                            "ansible.builtin.copy": {
                                "content": "{{ bench_result | dict2items | rejectattr('key', 'eq', 'section') "
                                "| items2dict | to_json }}",
                                "dest": str(summary),
                            }
                        },
                    ],
                }
            ]
        )
    )
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env["PATH"] = "%s:%s" % (ANSIBLE.parent, env["PATH"])
    command = [str(ANSIBLE) + "-playbook", "-i", "localhost,", "-c", "local", "-e", "@%s" % (scratch / "args.json")]
    command += ["-e", "ansible_python_interpreter=%s" % sys.executable, str(scratch / "run.yml")]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", PEAK_RSS_OF, *command], cwd=REPO, env=env, capture_output=True, text=True, timeout=1800
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit("%s failed:\n%s%s" % (name, done.stdout[-3000:], done.stderr[-3000:]))
    peak = int(done.stderr.strip().splitlines()[-1]) / 1024
    result = json.loads(summary.read_text())
    shutil.rmtree(scratch, ignore_errors=True)
    return wall, peak, result


def dra_resource_slices(node: str, gpus: int = GPUS_PER_NODE, slices: int = DRA_SLICES_PER_NODE) -> list[dict]:
    """The ResourceSlices NVIDIA's DRA driver would publish for ``node``'s ``gpus`` whole GPUs, in
    ``slices`` slices of one pool (the shape of kubernetes-sigs/dra-driver-nvidia-gpu's deviceinfo.go)."""
    per_slice = gpus // slices
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "%s-gpu.nvidia.com-%d" % (node, part)},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": slices},
                "devices": [
                    {
                        "name": "gpu-%d" % minor,
                        "attributes": {
                            "type": {"string": "gpu"},
                            "uuid": {"string": "GPU-%s-%d" % (node, minor)},
                            "productName": {"string": "NVIDIA H100 80GB HBM3"},
                        },
                        "capacity": {"memory": {"value": "80Gi"}},
                    }
                    for minor in range(part * per_slice, (part + 1) * per_slice)
                ],
            },
        }
        for part in range(slices)
    ]


def is_dra_node(index: int) -> bool:
    """Every other node of the ``--dra-half`` site has its GPUs in ResourceSlices."""
    return index % 2 == 1


def up(inventory: Path | None, state_dir: Path, port_base: int, scheduler: bool = True) -> None:
    # 10,000 simulated nodes take KWOK minutes to make Ready on 2 busy cores, past the role's 120 s.
    patience = ["-e", "sandbox_cluster_timeout=1200"]
    for playbook in ("playbooks/sandbox.yml", "playbooks/scheduler.yml")[: 2 if scheduler else 1]:
        run = run_playbook(playbook, *sandbox_vars(state_dir, port_base), *patience, inventory=inventory, timeout=3600)
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


def pure_node_checks(count: int, dra_half: bool = False) -> float:
    """Seconds the node comparison alone takes for ``count`` 8-GPU nodes (one of them short a GPU),
    with every other node's GPUs in ResourceSlices when ``dra_half``."""
    sys.path.insert(0, str(REPO / "collections"))
    from ansible_collections.clusterproof.gpu.plugins.module_utils.validate.nodes import validate_gpu_nodes

    names = ["gpu-%05d" % index for index in range(count)]
    declared = [{"name": name, "gpu_count": GPUS_PER_NODE} for name in names]
    on_dra = [dra_half and is_dra_node(index) for index in range(count)]
    observed = [
        {
            "metadata": {"name": name, "labels": {}},
            "status": {
                "allocatable": {} if on_dra[index] else {"nvidia.com/gpu": "7" if index == count // 2 else "8"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for index, name in enumerate(names)
    ]
    slices = [item for index, name in enumerate(names) if on_dra[index] for item in dra_resource_slices(name)]
    started = time.perf_counter()
    outcome = validate_gpu_nodes(declared, observed, **({"resource_slices": slices} if slices else {}))
    elapsed = time.perf_counter() - started
    assert len(outcome.failed) == 2, [check.id for check in outcome.failed]
    return elapsed


def large_inventory(path: Path, nodes: int, projects: int, dra_half: bool) -> Path:
    """The sandbox's inventory: ``nodes`` 8-GPU nodes; with ``dra_half`` every other one declared
    with no GPUs for the sandbox, so that its simulated Node advertises none (its GPUs come from
    ResourceSlices); the projects' quotas fit what the device plugin advertises."""
    generated_inventory(path, nodes, projects=projects)
    if not dra_half:
        return path
    inventory = yaml.safe_load(path.read_text())
    hosts = inventory["all"]["children"]["gpu_nodes"]["hosts"]
    # GPU feature discovery labels a DRA node as any other (the GPU operator runs it beside the DRA
    # driver); the sandbox sets them only on nodes that advertise GPUs, so they are declared here.
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}
    for index, name in enumerate(sorted(hosts)):
        if is_dra_node(index):
            hosts[name] = {"gpu_count": 0, "labels": dict(labels)}
    for project in inventory["all"]["vars"].get("clusterproof_projects") or ():
        project["gpu_quota"] //= 2
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


def publish_dra_slices(kubeconfig: Path, names: list[str]) -> float:
    """Create the ResourceSlices of ``names``; return the seconds it took."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(kubeconfig))
    resource_api = client.ResourceV1Api(api)
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(resource_api.create_resource_slice, [item for name in names for item in dra_resource_slices(name)])
        )
    api.close()
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--projects", type=int, default=100)
    parser.add_argument("--pure-only", action="store_true", help="only the comparisons, no sandbox")
    parser.add_argument("--dra-half", action="store_true", help="half the nodes' GPUs in DRA ResourceSlices")
    parser.add_argument("--nodes-only", action="store_true", help="no scenario, scheduler or quota checks")
    parser.add_argument("--repeat", type=int, default=1, help="run the node checks this many times")
    parser.add_argument("--keep", action="store_true", help="leave the large sandbox up (say how to take it down)")
    parser.add_argument("--kubeconfig", help="only the node checks, on the sandbox --keep left up")
    args = parser.parse_args()
    for count in sorted({1000, 10000, args.nodes}):
        print(
            "node comparison alone, %d nodes%s: %.3f s"
            % (count, ", half on DRA" if args.dra_half else "", pure_node_checks(count, args.dra_half))
        )
    if args.pure_only:
        return
    if args.kubeconfig:  # a large sandbox left up by --keep: time the node checks again, nothing else
        node_checks(Path(args.kubeconfig), args.nodes, args.repeat)
        return
    scratch = Path(tempfile.mkdtemp(prefix="cp-validation-bench-"))
    if not args.nodes_only:
        scenario(scratch)
    projects = 0 if args.nodes_only else args.projects
    inventory = large_inventory(scratch / "hosts.yml", args.nodes, projects, args.dra_half)
    state, base = scratch / "large", free_port_base()
    started = time.monotonic()
    try:
        up(inventory, state, base, scheduler=not args.nodes_only)
        print("%d-node sandbox up in %.0f s" % (args.nodes, time.monotonic() - started), flush=True)
        if args.dra_half:
            on_dra = ["gpu-%04d" % index for index in range(args.nodes) if is_dra_node(index)]
            seconds = publish_dra_slices(state / "kubeconfig", on_dra)
            print(
                "%d ResourceSlices of gpu.nvidia.com for %d nodes created in %.0f s"
                % (len(on_dra) * DRA_SLICES_PER_NODE, len(on_dra), seconds)
            )
        node_checks(state / "kubeconfig", args.nodes, args.repeat)
        if not args.nodes_only:
            quota_checks(state, inventory)
    finally:
        if args.keep:
            print(
                "left up: --kubeconfig %s; down with: .venv/bin/ansible-playbook playbooks/sandbox.yml -i %s "
                "-e sandbox_cluster_state=down %s"
                % (state / "kubeconfig", inventory, " ".join(sandbox_vars(state, base)))
            )
        else:
            down(inventory, state, base)
            shutil.rmtree(scratch, ignore_errors=True)


def node_checks(kubeconfig: Path, nodes: int, repeat: int) -> None:
    """Run the node checks ``repeat`` times on the large sandbox, the section written to a file
    (``section_file``), then once with the section returned through Ansible; print each run's figures."""
    declared = [
        {
            "name": "gpu-%04d" % i,
            "gpu_count": GPUS_PER_NODE,
            "gpu_product": "NVIDIA-H100-80GB-HBM3",
            "gpu_memory_mib": 81559,
        }
        for i in range(nodes)
    ]
    section_file = Path(tempfile.mkdtemp(prefix="cp-validation-bench-")) / "gpu-nodes.json"
    for run in range(repeat + 1):
        to_file = run < repeat
        args = {
            "nodes": declared,
            "kubeconfig": str(kubeconfig),
            **({"section_file": str(section_file)} if to_file else {}),
        }
        wall, peak, result = module("clusterproof.gpu.validate_gpu_nodes", args)
        # Through Ansible, the section stays in Ansible's variables; the file of the run before shows it.
        section = json.loads(section_file.read_text())
        sources: dict[str, int] = {}
        for row in section["node_table"]:
            sources[row["gpu_source"]] = sources.get(row["gpu_source"], 0) + 1
        total = next(check for check in section["checks"] if check["id"] == "cluster/gpu-total")
        print(
            "node checks, %d nodes / %d GPUs, section %s: %.1f s wall, peak RSS %.0f MiB, %d checks, %d failed; "
            "nodes by GPU source %s (goal at 10,000 nodes: <= 30 s, <= 1 GiB)"
            % (
                nodes,
                total["observed"],
                "to a file" if to_file else "through Ansible",
                wall,
                peak,
                len(section["checks"]),
                result["failed_checks"],
                sources,
            ),
            flush=True,
        )
    shutil.rmtree(section_file.parent, ignore_errors=True)


def scenario(scratch: Path) -> None:
    state, base = scratch / "default", free_port_base()
    up(None, state, base)
    try:
        nodes = [{"name": "dgx1-1", "gpu_count": 8}, {"name": "dgx1-2", "gpu_count": 8}]
        wall, _, result = module(
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


def quota_checks(state: Path, inventory: Path) -> None:
    """The quota checks of the projects ``inventory`` declares (KAI's queues on the sandbox)."""
    declared_projects = [
        {"name": project["name"], "gpu_quota": project["gpu_quota"], "over_quota_weight": project["gpu_quota"]}
        for project in yaml.safe_load(inventory.read_text())["all"]["vars"]["clusterproof_projects"]
    ]
    wall, peak, result = module(
        "clusterproof.gpu.validate_projects", {"projects": declared_projects, "kubeconfig": str(state / "kubeconfig")}
    )
    print(
        "quota checks, %d projects: %.1f s wall, peak RSS %.0f MiB, %d failed (goal: <= 60 s, <= 1 GiB)"
        % (len(declared_projects), wall, peak, result["failed_checks"])
    )


if __name__ == "__main__":
    main()
