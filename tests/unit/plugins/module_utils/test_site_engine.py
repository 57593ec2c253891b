"""The site's engine as the playbooks and roles see it: ``clusterproof_site.engine``, settled once by
the site inventory from the engine's backend (``scheduler.registry.site_engine``), so that adding an
engine is its backend file and one registry line, and no playbook or role names it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory import schema
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry

ROOT = Path(__file__).resolve().parents[4]
FACTS = {"name", "display_name", "install_role", "has_queues", "gpu_agent", "sandbox_stop_roles"}


def _settled(scheduler: str, mode: str = "sandbox") -> dict:
    """The settled site (``clusterproof_site``) of a one-node site with ``scheduler`` in ``mode``."""
    site = {
        "clusterproof_site_name": "engines",
        "clusterproof_cluster_mode": mode,
        "clusterproof_scheduler": scheduler,
        "clusterproof_projects": [{"name": "team-a", "gpu_quota": 4}],
    }
    if mode == "existing":
        site["clusterproof_kubeconfig"] = "/etc/kubeconfig"
    hostvars = {"localhost": site, "gpu-1": {**site, "gpu_count": 8}}
    groups = {"all": list(hostvars), "kube_control_plane": ["localhost"], "gpu_nodes": ["gpu-1"]}
    declaration, errors = schema.validate_site(groups, hostvars)
    assert errors == []
    return declaration.to_dict()


def test_each_schedulers_facts_are_what_the_playbooks_compared_names_for():
    # Before: scheduler == 'kai' (KAI's role, the GPU agent), == 'kueue' (Kueue's role),
    # in ['kai', 'kueue'] (projects, admission, quota tree, isolation, scenarios), and Kueue stopped
    # on the sandbox where the scheduler != 'kueue'.
    assert _settled("kai")["engine"] == {
        "name": "kai",
        "display_name": "KAI scheduler",
        "install_role": "kai_scheduler",
        "has_queues": True,
        "gpu_agent": True,
        "sandbox_stop_roles": ["kueue_scheduler"],
    }
    assert _settled("kueue")["engine"] == {
        "name": "kueue",
        "display_name": "Kueue",
        "install_role": "kueue_scheduler",
        "has_queues": True,
        "gpu_agent": False,
        "sandbox_stop_roles": [],
    }
    assert _settled("none")["engine"] == {
        "name": "none",
        "display_name": "no scheduler",
        "install_role": "",
        "has_queues": False,
        "gpu_agent": False,
        "sandbox_stop_roles": ["kueue_scheduler"],
    }


# Mode kubeadm needs its own settings (test_kubeadm_config.py); the engine's facts do not depend on the mode.
@pytest.mark.parametrize("mode", ["sandbox", "existing"])
@pytest.mark.parametrize("scheduler", schema.schedulers())
def test_every_fact_is_defined_for_every_scheduler_and_mode(scheduler, mode):
    assert set(_settled(scheduler, mode)["engine"]) == FACTS


def test_every_engine_fact_a_playbook_or_role_reads_is_settled():
    used = set()
    for folder in ("playbooks", "roles"):
        for path in (ROOT / folder).rglob("*.yml"):
            used |= set(re.findall(r"clusterproof_site\.engine\.(\w+)", path.read_text()))
    assert used and used <= FACTS


@pytest.mark.parametrize(("mode", "sandbox"), [("sandbox", True), ("existing", False)])
def test_whether_the_site_is_the_sandbox_is_settled_once(mode, sandbox):
    # Before, ten role defaults compared the mode themselves, three of them the inventory's raw
    # clusterproof_cluster_mode with a default of their own.
    assert _settled("kai", mode)["sandbox"] is sandbox


def test_every_site_field_a_playbook_or_role_reads_is_settled():
    used = set()
    for folder in ("playbooks", "roles"):
        for path in (ROOT / folder).rglob("*.yml"):
            used |= set(re.findall(r"clusterproof_site\.(\w+)", path.read_text()))
    assert {"engine", "sandbox"} <= used
    assert used <= set(_settled("kai")), sorted(used - set(_settled("kai")))


def test_every_engines_roles_exist():
    for name in registry.names():
        engine = registry.site_engine(name)
        assert (ROOT / "roles" / engine["install_role"] / "tasks/main.yml").is_file(), name
        for role in engine["sandbox_stop_roles"]:
            assert (ROOT / "roles" / role / "tasks/absent.yml").is_file(), role
            specs = yaml.safe_load((ROOT / "roles" / role / "meta/argument_specs.yml").read_text())
            assert "absent" in specs["argument_specs"], role


def test_an_unknown_scheduler_has_no_facts():
    with pytest.raises(ValueError, match="unknown scheduler 'slurm'"):
        registry.site_engine("slurm")


class _Fake(type(registry.backend("kueue"))):
    """An engine that exists only in its backend: it behaves as Kueue's, under facts of its own."""

    name = "fake"
    display_name = "Fake scheduler"
    install_role = "fake_scheduler"
    gpu_agent = True
    sandbox_leftovers = True
    sandbox_processes = ("fake-scheduler",)


@pytest.fixture
def fake_engine(monkeypatch):
    """The registry with one more engine: the one line a new engine adds there."""
    monkeypatch.setitem(registry._BACKENDS, _Fake.name, _Fake())


def test_a_registered_engine_is_settled_from_its_backend_alone(fake_engine):
    assert "fake" in registry.names() and "fake" in schema.schedulers()
    site = _settled("fake")
    assert site["scheduler"] == "fake"
    assert site["engine"] == {
        "name": "fake",
        "display_name": "Fake scheduler",
        "install_role": "fake_scheduler",
        "has_queues": True,
        "gpu_agent": True,
        # Kueue's leftovers go on the sandbox, as for any scheduler but Kueue.
        "sandbox_stop_roles": ["kueue_scheduler"],
    }
    # The other engines now stop its leftovers and its processes in turn.
    assert "fake_scheduler" in _settled("kai")["engine"]["sandbox_stop_roles"]
    assert "fake_scheduler" in _settled("kueue")["engine"]["sandbox_stop_roles"]
    assert "fake-scheduler" in registry.sandbox_processes(other_than="kai")
    assert "fake-scheduler" not in registry.sandbox_processes(other_than="fake")
