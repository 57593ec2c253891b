"""Fingerprints of the fair-share model's predictions: one sha256 per family of inputs, to show that
a change of the model's code (a refactor) changes no prediction.

Not a test: run it by hand, ``.venv/bin/python bench/model_hashes.py``, before and after the change,
and compare the lines it prints. Every call of ``fairshare.predict`` the families make is recorded
(its ``repr``, which holds every field in order, or the ValueError it raised), under every policy:

``flat``
    The differential bench's generated scenarios (``bench/scenario_generator.py``), seeds 1 to 200
    on its six ``FLAT_SITES``, which ``tests/unit/test_scenario_generator.py`` draws them for too
    (1,200 scenarios), each predicted step by step as the validator chains them
    (``validate/scenarios.predictions``), for each policy. Resource sites give their nodes CPU and
    memory as the differential bench does.
``tree``
    The same with departments (``Site.trees``), seeds 1 to 200 on three sites: the default, 4 nodes
    of 4 GPUs, and with gangs (600 scenarios).
``site``
    The sites of ``bench/fairshare_bench.py`` at a fifth of its size: 2,000 projects, 20,000 jobs on
    8-GPU nodes, seeds 1 to 3, for each policy the fresh step and its follow-up step (a tenth of the
    jobs end, 4,000 arrive, the rest run where the first step put them).

Prints per family the scenarios (or sites), the predictions, the errors among them, the sha256 and
the seconds it took.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(REPO))

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import fairshare  # noqa: E402
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import scenarios  # noqa: E402
from bench.fairshare_bench import site, step_two  # noqa: E402
from bench.scenario_generator import FLAT_SITES, Site, generate  # noqa: E402

SEEDS = range(1, 201)
TREE_SITES = (Site(trees=True), Site(trees=True, nodes=4, node_gpus=4), Site(trees=True, gangs=True))
BIG_SEEDS = (1, 2, 3)
BIG_PROJECTS, BIG_JOBS = 2_000, 20_000


class Recorder:
    """Wraps ``fairshare.predict``: every prediction (or error) it gives goes into one sha256."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.predictions = 0
        self.errors = 0
        self.original = fairshare.predict

    def __call__(self, *args, **kwargs):
        try:
            prediction = self.original(*args, **kwargs)
        except ValueError as error:
            self.errors += 1
            self.digest.update(("error: %s\n" % error).encode())
            raise
        self.predictions += 1
        self.digest.update((repr(prediction) + "\n").encode())
        return prediction


def _scenario_family(sites: tuple[Site, ...], recorder: Recorder) -> int:
    count = 0
    for where in sites:
        for seed in SEEDS:
            scenario = scenarios.load(generate(seed, where), where=f"seed {seed}")
            names = ["gpu-%04d" % index for index in range(where.nodes)]
            nodes: list = [(name, where.node_gpus) for name in names]
            if where.resources:
                nodes = [
                    fairshare.Node(name, where.node_gpus, where.node_cpus, where.node_memory_gib) for name in names
                ]
            count += 1
            for policy in fairshare.POLICIES:
                recorder.digest.update(("%s seed %d %s\n" % (where, seed, policy)).encode())
                try:
                    scenarios.predictions(scenario, nodes, policy)
                except ValueError:
                    pass  # recorded
    return count


def _site_family(recorder: Recorder) -> int:
    for seed in BIG_SEEDS:
        for policy in fairshare.POLICIES:
            nodes, projects, jobs, rng = site(BIG_PROJECTS, BIG_JOBS, 8, seed)
            recorder.digest.update(("site seed %d %s\n" % (seed, policy)).encode())
            first = fairshare.predict(policy, nodes, projects, jobs)
            later = step_two(jobs, rng, len(jobs) // 5, BIG_PROJECTS)
            fairshare.predict(policy, nodes, projects, later, first.placements, first.waiting)
    return len(BIG_SEEDS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", help="flat, tree, site (default: all three)")
    args = parser.parse_args()
    runs = {
        "flat": lambda recorder: _scenario_family(FLAT_SITES, recorder),
        "tree": lambda recorder: _scenario_family(TREE_SITES, recorder),
        "site": _site_family,
    }
    unknown = [family for family in args.families if family not in runs]
    if unknown:
        parser.error("unknown families: %s (known: %s)" % (", ".join(unknown), ", ".join(runs)))
    for family in args.families or list(runs):
        recorder = Recorder()
        fairshare.predict = recorder
        started = time.perf_counter()
        try:
            count = runs[family](recorder)
        finally:
            fairshare.predict = recorder.original
        seconds = time.perf_counter() - started
        print(
            f"{family}: {count} {'sites' if family == 'site' else 'scenarios'}, {recorder.predictions} predictions, "
            f"{recorder.errors} errors, sha256 {recorder.digest.hexdigest()} ({seconds:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
