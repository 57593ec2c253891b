"""The one sandbox install step the engine modules share: its checks, loaders, files and processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane, install
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import Component, Layout


class FakeApplier:
    """Applies by name: a manifest seen before is unchanged."""

    def __init__(self, check_mode: bool = False) -> None:
        self.check_mode = check_mode
        self.seen: set[str] = set()
        self.waited: list[str] = []

    def apply(self, manifest):
        name = kube.name_of(manifest)
        changed = name not in self.seen
        self.seen.add(name)
        return changed, None, manifest

    def wait_established(self, names, timeout):
        self.waited += names

    def wait_served(self, kinds, timeout):
        self.waited += ["%s %s" % kind for kind in kinds]


def step(tmp_path: Path, check_mode: bool = False) -> install.InstallStep:
    return install.InstallStep(Layout(tmp_path), FakeApplier(check_mode))


def crd(name: str) -> dict:
    return {
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name, "creationTimestamp": None},
        "spec": {"group": "x", "names": {"kind": "Queue"}, "versions": [{"name": "v1", "served": True}]},
    }


def test_no_sandbox_and_no_build_are_refused_saying_what_to_run(tmp_path):
    with pytest.raises(control_plane.SandboxError, match="no sandbox at .*sandbox_cluster state=up"):
        install.require_sandbox(Layout(tmp_path))
    with pytest.raises(control_plane.SandboxError, match="has no Kueue CRDs; run the sandbox build"):
        install.require_built(tmp_path, "Kueue CRDs", "crds")
    (tmp_path / "crds").mkdir()
    install.require_built(tmp_path, "Kueue CRDs", "crds")


def test_crds_are_loaded_as_the_server_keeps_them(tmp_path):
    (tmp_path / "b.yaml").write_text("kind: CustomResourceDefinition\nmetadata: {name: b, creationTimestamp: null}\n")
    (tmp_path / "a.yaml").write_text("kind: CustomResourceDefinition\nmetadata: {name: a}\n---\nkind: Namespace\n")
    assert install.load_crds(tmp_path) == [
        {"kind": "CustomResourceDefinition", "metadata": {"name": "a"}},
        {"kind": "CustomResourceDefinition", "metadata": {"name": "b"}},
    ]


def test_objects_of_new_crds_count_as_applied_in_check_mode(tmp_path):
    checking = step(tmp_path, check_mode=True)
    checking.apply_crds([crd("queues.x")], [], timeout=1)
    checking.apply_custom([{"kind": "Queue", "metadata": {"name": "root"}}])
    assert checking.applied == ["CustomResourceDefinition/queues.x", "Queue/root"]
    assert checking.applier.waited == []
    running = step(tmp_path)
    running.apply_crds([crd("queues.x")], [], timeout=1)
    assert running.applier.waited == ["queues.x", "x/v1 Queue"]


def test_a_file_is_written_once(tmp_path):
    writing = step(tmp_path)
    assert writing.write(tmp_path / "etc" / "config.yaml", "a: 1\n", private=True)
    assert not writing.write(tmp_path / "etc" / "config.yaml", "a: 1\n")
    assert writing.applied == ["file %s" % (tmp_path / "etc" / "config.yaml")]
    assert (tmp_path / "etc" / "config.yaml").stat().st_mode & 0o777 == 0o600
    assert not step(tmp_path, check_mode=True).write(tmp_path / "etc" / "config.yaml", "a: 1\n")


def test_the_result_says_what_the_step_did_and_what_the_module_adds(tmp_path):
    writing = step(tmp_path)
    assert writing.result() == {"changed": False, "applied": [], "started": [], "stopped": []}
    writing.write(tmp_path / "config.yaml", "a: 1\n")
    writing.stopped.append("kai-scheduler")
    assert writing.result(config="config.yaml") == {
        "changed": True,
        "applied": ["file %s" % (tmp_path / "config.yaml")],
        "started": [],
        "stopped": ["kai-scheduler"],
        "config": "config.yaml",
    }


def test_start_restarts_running_processes_only_when_asked(tmp_path, monkeypatch):
    running = {"engine"}
    monkeypatch.setattr(control_plane, "running_pid", lambda layout, name, argv=None: 1 if name in running else None)
    monkeypatch.setattr(control_plane, "stop", lambda layout, name: name in running and not running.discard(name))
    monkeypatch.setattr(
        control_plane,
        "run_components",
        lambda layout, wanted, timeout: [c.name for c in wanted if c.name not in running],
    )
    components = [Component("engine", ("engine",), ""), Component("agent", ("agent",), "")]
    checking = step(tmp_path, check_mode=True)
    checking.start(components, timeout=1)
    assert checking.started == ["agent"]
    checking = step(tmp_path, check_mode=True)
    checking.start(components, timeout=1, restart=True)
    assert checking.started == ["engine", "agent"]
    restarting = step(tmp_path)
    restarting.start(components, timeout=1, restart=True)
    assert (restarting.stopped, restarting.started) == (["engine"], ["engine", "agent"])
    assert restarting.changed
