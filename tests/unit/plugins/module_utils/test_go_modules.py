"""The one Go module download: its answer read, its failures said, and the chart sources built on it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import (
    chart_source,
    go_modules,
    gpu_charts,
    storage,
)


def fake_go(monkeypatch, stdout: str, returncode: int = 0, seen: list | None = None) -> None:
    def run(argv, **kwargs):
        if seen is not None:
            seen.append((argv, kwargs))
        return subprocess.CompletedProcess(argv, returncode, stdout=stdout, stderr="stderr words")

    monkeypatch.setattr(go_modules.subprocess, "run", run)


def test_a_download_names_the_source_and_go_mod_and_runs_outside_any_module(monkeypatch, tmp_path):
    seen: list = []
    fake_go(monkeypatch, json.dumps({"Dir": str(tmp_path / "src"), "GoMod": str(tmp_path / "go.mod")}), seen=seen)
    found = go_modules.download("example.com/a", "v1.0.0")
    assert found == go_modules.GoModule("example.com/a", "v1.0.0", tmp_path / "src", tmp_path / "go.mod")
    argv, kwargs = seen[0]
    assert argv == ["go", "mod", "download", "-json", "example.com/a@v1.0.0"]
    assert kwargs["env"]["GOTOOLCHAIN"] == "local"
    assert not (Path(kwargs["cwd"]) / "go.mod").exists()


@pytest.mark.parametrize(
    ("stdout", "words"),
    [
        (json.dumps({"Error": "not found: 404"}), "example.com/a@v1.0.0 failed: not found: 404"),
        ("", "example.com/a@v1.0.0 failed: stderr words"),
    ],
)
def test_a_failed_download_says_what_go_said(monkeypatch, stdout, words):
    fake_go(monkeypatch, stdout, returncode=1)
    with pytest.raises(go_modules.GoModuleError, match=words):
        go_modules.download("example.com/a", "v1.0.0")


def test_every_chart_source_is_one_kind_named_by_its_folder():
    sources = list(storage.CHART_SOURCES.values()) + list(gpu_charts.CHARTS.values())
    assert all(isinstance(source, chart_source.ChartSource) for source in sources)
    assert {name: source.name for name, source in gpu_charts.CHARTS.items()} == {
        name: name for name in gpu_charts.CHARTS
    }


def test_a_module_without_the_chart_is_refused(monkeypatch, tmp_path):
    fake_go(monkeypatch, json.dumps({"Dir": str(tmp_path), "GoMod": str(tmp_path / "go.mod")}))
    with pytest.raises(chart_source.ChartSourceError, match="has no chart at deploy/chart"):
        chart_source.chart_in_module(chart_source.ChartSource("example.com/a", "v1.0.0", "deploy/chart"))
