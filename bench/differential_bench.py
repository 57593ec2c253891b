#!/usr/bin/env python3
"""The differential bench: random small scenarios run on the real engine on a sandbox, each
settled state compared with the fair-share model of the engine's policy.

    .venv/bin/python bench/differential_bench.py [--scheduler kai|kueue] [--count 20] [--first-seed 1]
        [--seeds 8,11,...] [--nodes 2] [--node-gpus 8] [--gangs] [--resources] [--trees] [--out DIR] [--parallel 1]
        [--record FILE] [--kubeconfig PATH --state-dir DIR]

Each scenario comes from ``bench/scenario_generator.py`` (seeded: seed N is the same scenario on
every machine) and runs through the ``validate_scenario`` module, as a site's validation runs it.
A scenario *agrees* when, after every step, each queue's GPUs match the model's prediction (the
module's ``/model/`` checks) and the workloads evicted at each step are the ones the model evicts
(its disruption table). Every scenario that disagrees is written to ``--out`` as a scenario file
that replays as it is (``validate_scenario scenario_file=...``), with what differed as comments.

``--record FILE`` appends, per scenario judged, what the engine did (a JSON line: the engine and
its pinned version, the seed, the site, and per step each project's GPUs and the workloads the step
evicted), so that the model can be held to it later without the engine:
``tests/unit/test_differential_records.py`` replays every record under tests/unit/fixtures/differential.

Prints per scenario its seed, verdict and seconds, then the agreement in percent and the time the
bench took. Brings up a sandbox of its own (``--nodes`` of ``--node-gpus``, with the scheduler), or
``--parallel`` of them that take scenarios side by side, unless given one (``--kubeconfig`` and
``--state-dir`` of a running sandbox), and takes them down.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import json
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(REPO))

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions  # noqa: E402
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate.scenario_runner import RunOptions  # noqa: E402
from bench.sandbox_bench import generated_inventory  # noqa: E402
from bench.scenario_generator import Site, generate  # noqa: E402
from tests.e2e.conftest import ad_hoc, module_result, own_sandbox  # noqa: E402

# Seconds a step may take to settle: the scenario runner's default step_timeout.
STEP_TIMEOUT = RunOptions.step_timeout


def _evicted(cell: str) -> set[str]:
    """``"b-4-gg (2), c-4-gg (2)"`` -> {"b-4-gg", "c-4-gg"}; "none" and "—" -> nothing."""
    if cell in ("none", "—"):
        return set()
    return {part.rsplit(" (", 1)[0] for part in cell.split(", ")}


def differences(section: dict[str, Any]) -> list[str]:
    """What differs between the engine and the model in one scenario's report section."""
    found = [
        f"{check['title']}: engine {check['observed']}, model {check['expected']}"
        for check in section["checks"]
        if ("/model/" in check["id"] or check["id"].endswith("/settled")) and check["status"] == "fail"
    ]
    for table in section["tables"]:
        if table["id"].endswith("-disruption"):
            for row in table["rows"]:
                if row[5] != "—" and _evicted(row[4]) != _evicted(row[5]):
                    found.append(f"{row[0]}: the engine evicted {row[4]}, the model {row[5]}")
    return found


def engine_outcome(section: dict[str, Any], steps: int) -> list[dict[str, Any]]:
    """Per step of one scenario's report section, what the engine did: each project's GPUs (the
    observed side of its ``/model/`` checks) and the workloads the step evicted (the observed side
    of the disruption table), as a record holds them."""
    outcome: list[dict[str, Any]] = [{"allocated": {}, "evicted": []} for _ in range(steps)]
    for check in section["checks"]:
        parts = check["id"].split("/")
        # scenario/<name>/<step>/model/<project>; a Deployment's replicas are /model/replicas/<name>
        if len(parts) == 5 and parts[0] == "scenario" and parts[3] == "model":
            outcome[int(parts[2]) - 1]["allocated"][parts[4]] = float(check["observed"])
    for table in section["tables"]:
        if table["id"].endswith("-disruption"):
            for index, row in enumerate(table["rows"][:steps]):
                outcome[index]["evicted"] = sorted(_evicted(row[4]))
    return outcome


def record_line(scheduler: str, seed: int, site: Site, verdict: str, outcome: list[dict[str, Any]]) -> str:
    """One line of a ``--record`` file: the engine and its pinned version, the scenario (seed and
    site, which ``scenario_generator.generate`` makes again), the verdict and the engine's outcome."""
    pin = versions.KAI_SCHEDULER if scheduler == "kai" else versions.KUEUE
    line = {
        "scheduler": scheduler,
        "version": pin.version,
        "seed": seed,
        "site": dataclasses.asdict(site),
        "verdict": verdict,
        "steps": outcome,
    }
    return json.dumps(line, sort_keys=True)


def run_one(
    seed: int,
    site: Site,
    scheduler: str,
    kubeconfig: Path,
    state_dir: Path,
    out: Path,
    node_names: list[str] | None = None,
) -> dict[str, Any]:
    """Scenario ``seed`` on the engine: its verdict (agrees, differs, skipped, error), seconds and
    differences, and for one judged, the engine's ``outcome`` per step (``engine_outcome``); a
    scenario that differs is written to ``out``. ``node_names``: the sandbox's GPU nodes (default:
    the bench's own, gpu-0000 ...), ``site.node_gpus`` GPUs each."""
    scenario = generate(seed, site)
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as file:
        yaml.safe_dump(scenario, file, sort_keys=False)
        path = Path(file.name)
    names = node_names or site.node_names
    nodes: list[dict[str, Any]] = [{"name": name, "gpu_count": site.node_gpus} for name in names]
    if site.resources:  # the model divides CPU and memory fair shares over what the nodes offer
        nodes = [{**node, "cpu_cores": site.node_cpus, "memory_gib": site.node_memory_gib} for node in nodes]
    args = {
        "scenario_file": str(path),
        "nodes": nodes,
        "scheduler": scheduler,
        "kubeconfig": str(kubeconfig),
        "sandbox_state_dir": str(state_dir),
        "step_timeout": STEP_TIMEOUT,
    }
    # Each step waits at most STEP_TIMEOUT for the engine to settle, twice where it deletes (the
    # freed GPUs taken, then the new workloads placed); beyond that and its clean-up the module is stuck.
    waits = sum(2 if step.get("delete") else 1 for step in scenario["steps"])
    started = time.monotonic()
    try:
        done = ad_hoc("clusterproof.gpu.validate_scenario", args, timeout=waits * STEP_TIMEOUT + 300)
    except subprocess.TimeoutExpired as error:
        return {"seed": seed, "verdict": "error", "seconds": time.monotonic() - started, "differences": [str(error)]}
    finally:
        path.unlink()
    seconds = time.monotonic() - started
    result = module_result(done)
    if done.returncode != 0:
        return {"seed": seed, "verdict": "error", "seconds": seconds, "differences": [str(result.get("msg"))]}
    if result.get("skip_reason"):
        return {"seed": seed, "verdict": "skipped", "seconds": seconds, "differences": [result["skip_reason"]]}
    found = differences(result["section"])
    if found:
        out.mkdir(parents=True, exist_ok=True)
        header = "".join(f"# {line}\n" for line in [f"{scheduler} differs from the model:", *found])
        (out / f"{scheduler}-seed-{seed}.yml").write_text(header + yaml.safe_dump(scenario, sort_keys=False))
    return {
        "seed": seed,
        "verdict": "differs" if found else "agrees",
        "seconds": seconds,
        "differences": found,
        "outcome": engine_outcome(result["section"], len(scenario["steps"])),
    }


@contextlib.contextmanager
def sandboxes_for(args: argparse.Namespace, site: Site, directory: Path) -> Iterator[list[tuple[Path, Path]]]:
    """The sandboxes the scenarios run on: the one given, or ``--parallel`` of the bench's own (each
    on free ports, in a directory of its own), all taken down after."""
    if args.kubeconfig:
        yield [(Path(args.kubeconfig), Path(args.state_dir))]
        return
    with contextlib.ExitStack() as stack:
        found = []
        for index in range(args.parallel):
            own = directory / str(index)
            own.mkdir()
            inventory = generated_inventory(
                own / "hosts.yml",
                site.nodes,
                node_gpus=site.node_gpus,
                scheduler=args.scheduler,
                site_name=f"differential-{args.scheduler}-{index}",
                node_cpus=site.node_cpus if site.resources else None,
                node_memory_gib=site.node_memory_gib if site.resources else None,
            )
            sandbox = stack.enter_context(own_sandbox(inventory, own / "state"))
            found.append((sandbox.kubeconfig, sandbox.state_dir))
        yield found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheduler", choices=["kai", "kueue"], default="kai")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument(
        "--seeds",
        help="comma-separated seeds to run instead of --first-seed/--count (replaying those that differed)",
    )
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--node-gpus", type=int, default=8)
    parser.add_argument("--gangs", action="store_true", help="some jobs are gangs (KAI only); other scenarios per seed")
    parser.add_argument(
        "--resources",
        action="store_true",
        help="CPU and memory quotas and requests beside the GPUs (KAI only); other scenarios per seed",
    )
    parser.add_argument(
        "--trees",
        action="store_true",
        help="the queues are leaves under departments (KAI only); other scenarios per seed",
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "differences")
    parser.add_argument(
        "--record",
        type=Path,
        help="append what the engine did in each scenario judged to this file (JSON lines)",
    )
    parser.add_argument("--kubeconfig")
    parser.add_argument("--state-dir")
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="sandboxes of the bench's own that run scenarios side by side (a scenario mostly waits)",
    )
    args = parser.parse_args()
    if args.parallel < 1 or (args.kubeconfig and args.parallel != 1):
        parser.error("--parallel: expected 1 or more, and 1 with --kubeconfig, found %d" % args.parallel)
    if args.gangs and args.scheduler != "kai":
        parser.error("--gangs: gangs run on KAI scheduler only, not %s" % args.scheduler)
    if args.resources and args.scheduler != "kai":
        parser.error("--resources: CPU and memory quotas are modelled for KAI scheduler only, not %s" % args.scheduler)
    if args.trees and args.scheduler != "kai":
        parser.error("--trees: departments run on KAI scheduler only, not %s" % args.scheduler)
    if args.trees and args.resources:
        parser.error("--trees with --resources: CPU and memory quotas are modelled for flat projects only")
    try:
        chosen = [int(seed) for seed in args.seeds.split(",")] if args.seeds else []
    except ValueError:
        parser.error(f"--seeds: expected whole numbers separated by commas, found {args.seeds!r}")
    site = Site(
        args.nodes,
        args.node_gpus,
        fractions=args.scheduler == "kai",
        gangs=args.gangs,
        resources=args.resources,
        trees=args.trees,
    )

    started = time.monotonic()
    results = []
    seeds: queue.SimpleQueue[int] = queue.SimpleQueue()
    for seed in chosen or range(args.first_seed, args.first_seed + args.count):
        seeds.put(seed)
    printing = threading.Lock()
    # Set on Ctrl-C or SIGTERM: no scenario starts after it (those under way end as their module
    # does on the signal, removing what they made), then the bench's sandboxes go down.
    stopping = threading.Event()

    def work(kubeconfig: Path, state: Path) -> None:
        """Scenarios, one after another, on one sandbox, until none is left or the bench stops."""
        while not stopping.is_set():
            try:
                seed = seeds.get_nowait()
            except queue.Empty:
                return
            outcome = run_one(seed, site, args.scheduler, kubeconfig, state, args.out)
            with printing:
                results.append(outcome)
                if args.record and "outcome" in outcome:
                    line = record_line(args.scheduler, seed, site, outcome["verdict"], outcome["outcome"])
                    with args.record.open("a") as record:
                        record.write(line + "\n")
                print(f"seed {seed}: {outcome['verdict']} ({outcome['seconds']:.0f} s)", flush=True)
                for line in outcome["differences"]:
                    print(f"    {line}", flush=True)

    with tempfile.TemporaryDirectory() as directory, sandboxes_for(args, site, Path(directory)) as sandboxes:
        up = time.monotonic() - started
        print(f"{len(sandboxes)} sandbox(es) ready in {up:.0f} s", flush=True)
        previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            with concurrent.futures.ThreadPoolExecutor(len(sandboxes)) as pool:
                running = [pool.submit(work, kubeconfig, state) for kubeconfig, state in sandboxes]
                try:
                    for done in running:
                        done.result()
                except KeyboardInterrupt:
                    stopping.set()
                    print("stopping: no new scenario starts; those under way end and clean up", flush=True)
                    raise
        finally:
            signal.signal(signal.SIGTERM, previous)
    results.sort(key=lambda result: result["seed"])
    judged = [result for result in results if result["verdict"] in ("agrees", "differs")]
    agreed = sum(1 for result in judged if result["verdict"] == "agrees")
    total = time.monotonic() - started
    print(
        f"{args.scheduler}: {agreed} of {len(judged)} scenarios agree with the model "
        f"({100.0 * agreed / max(1, len(judged)):.0f} %); "
        f"{sum(1 for r in results if r['verdict'] == 'skipped')} skipped, "
        f"{sum(1 for r in results if r['verdict'] == 'error')} errors; "
        f"{total:.0f} s in all ({args.parallel} side by side), "
        f"{sum(r['seconds'] for r in results) / max(1, len(results)):.0f} s per scenario"
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("stopped: the scenarios under way were cleaned up and the bench's sandboxes are down", flush=True)
        sys.exit(130)
