"""The fair-share model held to what the real engines did, without the engines.

Each file under fixtures/differential is what ``bench/differential_bench.py --record`` wrote while it
ran random scenarios on a sandbox's engine: per scenario (a seed and a site, which
``bench/scenario_generator.generate`` makes again) and per step, each project's GPUs and the
workloads the step evicted. Here the model predicts every recorded scenario again, as the validator
chains its steps (``validate.scenarios.predictions``), and must give what the engine gave, except
in the scenarios listed in ``KNOWN_DIFFERENCES`` (each described in docs/fairshare.md), which must
still differ: one that the model now gets right is taken off the list.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import fairshare
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import scenarios

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.scenario_generator import Site, generate  # noqa: E402

RECORDS = Path(__file__).parent / "fixtures" / "differential"
# The engines' policies, as their backends name them (Backend.policy).
POLICY = {"kai": "runai", "kueue": "kueue"}
# (file, seed): the recorded scenarios where the model still does not do what the engine did.
KNOWN_DIFFERENCES: dict[tuple[str, int], str] = {
    ("kueue-v0.17.1.jsonl", 210): "docs/fairshare.md, Kueue, seed 210: the same difference as on v0.16.2",
    ("kai-v0.12.0.jsonl", 36): "docs/fairshare.md, KAI, seeds 36, 62, 100: the model preempts, KAI waits",
}


def _records() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(RECORDS.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                found.append((path.name, json.loads(line)))
    return found


RECORDED = _records()


def _nodes(site: Site) -> list[Any]:
    """The bench's sandbox nodes (gpu-0000 ...), with the CPU and memory they offer where the site has them."""
    if site.resources:
        return [fairshare.Node(name, site.node_gpus, site.node_cpus, site.node_memory_gib) for name in site.node_names]
    return [(name, site.node_gpus) for name in site.node_names]


def model_differences(record: dict[str, Any]) -> list[str]:
    """Where the model's predictions for a recorded scenario differ from what the engine did."""
    site = Site(**record["site"])
    scenario = scenarios.load(generate(record["seed"], site), where="seed %d" % record["seed"])
    predicted = scenarios.predictions(scenario, _nodes(site), POLICY[record["scheduler"]])
    owner = scenarios.workload_of(scenario)
    found = []
    for index, (engine, model) in enumerate(zip(record["steps"], predicted, strict=True)):
        for project, gpus in sorted(engine["allocated"].items()):
            expected = model.allocated.get(project, 0.0)
            if abs(expected - gpus) > scenarios.TOLERANCE:
                found.append(
                    "step %d: %s holds %g on the engine, %g in the model" % (index + 1, project, gpus, expected)
                )
        evicted = sorted({owner.get(name, name) for name in model.preempted})
        if evicted != engine["evicted"]:
            found.append("step %d: the engine evicted %s, the model %s" % (index + 1, engine["evicted"], evicted))
    return found


def test_there_are_records_of_each_engine_to_hold_the_model_to():
    assert {record["scheduler"] for _, record in RECORDED} >= {"kueue"}, sorted(RECORDS.glob("*"))


@pytest.mark.parametrize(
    ("name", "record"),
    RECORDED,
    ids=["%s-seed-%d" % (name.removesuffix(".jsonl"), record["seed"]) for name, record in RECORDED],
)
def test_the_model_does_what_the_engine_did(name, record):
    differences = model_differences(record)
    if (name, record["seed"]) in KNOWN_DIFFERENCES:
        assert differences, "seed %d of %s now agrees: take it off KNOWN_DIFFERENCES" % (record["seed"], name)
    else:
        assert differences == [], "%s seed %d (engine %s %s)" % (
            name,
            record["seed"],
            record["scheduler"],
            record["version"],
        )


def test_an_engine_outcome_the_model_does_not_give_is_named_by_step_and_project():
    name, record = RECORDED[0]
    step = record["steps"][-1]
    project = sorted(step["allocated"])[0]
    changed = {**step, "allocated": {**step["allocated"], project: step["allocated"][project] + 1}, "evicted": ["j0"]}
    altered = {**record, "steps": [*record["steps"][:-1], changed]}
    last = len(record["steps"])
    found = model_differences(altered)
    assert any(line.startswith("step %d: %s holds" % (last, project)) for line in found), found
    assert any(line.startswith("step %d: the engine evicted ['j0']" % last) for line in found), found


def test_every_known_difference_is_a_recorded_scenario():
    recorded = {(name, record["seed"]) for name, record in RECORDED}
    assert set(KNOWN_DIFFERENCES) <= recorded, sorted(set(KNOWN_DIFFERENCES) - recorded)
