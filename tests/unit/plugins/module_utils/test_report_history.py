"""What changed since an earlier run, earlier runs found by name, the baseline, and site_report's
two-run flow (the site's benchmark verdicts against the baseline or the previous run)."""

from __future__ import annotations

import copy
import json
import types
from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import history
from ansible_collections.clusterproof.gpu.plugins.modules import site_report
from tests.unit.plugins.module_utils.helpers import recorded_benchmark
from tests.unit.plugins.module_utils.report_samples import health_section, history_sections, node_row, site_state


def test_the_state_a_report_found():
    state = site_state(history_sections(nodes=[node_row("dgx1-1", 8), node_row("dgx1-3", 0, present=False)]))
    assert state["nodes"] == {
        "dgx1-1": {"gpus": 8.0, "product": "Tesla-V100-SXM2-32GB", "ready": "yes", "kubelet": None}
    }
    assert state["projects"] == {"team-a": {"quota": 4.0, "weight": 4.0}, "team-b": {"quota": 2.0, "weight": 2.0}}
    assert state["storage_classes"] == {"local-path": {"default": True}}


def test_storage_is_compared_only_between_runs_that_looked_at_storage_classes():
    looked, not_looked = site_state(history_sections()), site_state(history_sections(classes=()))
    assert not_looked["storage_classes"] is None
    for before, after in ((looked, not_looked), (not_looked, looked)):
        changes = history.compare(before, after)
        assert changes["storage_classes_gone"] == [] and changes["default_storage_class"] is None
    # Declared and no longer found: every class gone, and the default with them.
    missing = history_sections()
    missing[2]["tables"][0]["rows"][0][5] = "no"
    changes = history.compare(looked, site_state(missing))
    assert changes["storage_classes_gone"] == ["local-path"]
    assert changes["default_storage_class"] == {"before": ["local-path"], "after": []}


def test_the_same_state_twice_changes_nothing_and_every_check_passes():
    changes = history.compare(site_state(history_sections()), site_state(history_sections()))
    assert not any(changes[key] for key in changes)
    section = history.changes_section(changes, "the run 20261124T100000Z")
    assert section.title == "What changed since the run 20261124T100000Z"
    assert {check.status for check in section.checks} == {"pass"}


def test_a_node_gone_fewer_gpus_a_quota_changed_and_the_default_class_moved_are_regressions():
    before = site_state(history_sections(nodes=[node_row("dgx1-1", 8), node_row("dgx1-2", 8)]))
    # dgx1-2 is still declared: gone from the cluster, not removed.
    after = site_state(history_sections(nodes=[node_row("dgx1-1", 6), node_row("dgx1-2", 0, present=False),
                                               node_row("dgx1-3", 8)], quota_b=3,
                              classes=(("local-path", False), ("nfs", True))))  # fmt: skip
    changes = history.compare(before, after)
    assert changes["nodes_gone"] == ["dgx1-2"] and changes["nodes_added"] == ["dgx1-3"]
    assert changes["gpu_counts"] == [{"node": "dgx1-1", "before": 8.0, "after": 6.0}]
    assert changes["quotas"] == [{"project": "team-b", "before": 2.0, "after": 3.0}]
    assert changes["default_storage_class"] == {"before": ["local-path"], "after": ["nfs"]}
    section = history.changes_section(changes, "the run X")
    failed = {check.id: check for check in section.checks if check.status == "fail"}
    assert set(failed) == {"changes/nodes-gone", "changes/gpu-counts", "changes/quotas", "changes/storage-classes"}
    assert failed["changes/nodes-gone"].message == "gone since the run X: dgx1-2"
    assert failed["changes/nodes-gone"].category == "capacity"
    assert failed["changes/quotas"].message == "team-b: 2.0 -> 3.0 (in the cluster)"
    assert failed["changes/quotas"].category == "configuration"
    assert failed["changes/gpu-counts"].message == "dgx1-1: 8 -> 6 GPUs"
    added = next(check for check in section.checks if check.id == "changes/nodes-added")
    assert added.status == "pass" and added.observed == ["dgx1-3"]


def test_a_node_no_longer_declared_was_removed_as_declared_and_is_no_regression():
    before = site_state(history_sections(nodes=[node_row("dgx1-1", 8), node_row("dgx1-2", 8)]))
    after = site_state(history_sections(nodes=[node_row("dgx1-1", 8)]))
    assert after["declared_nodes"] == ["dgx1-1"]
    changes = history.compare(before, after)
    assert changes["nodes_gone"] == [] and changes["nodes_removed"] == ["dgx1-2"]
    section = history.changes_section(changes, "the run X")
    assert {check.status for check in section.checks} == {"pass"}
    removed = next(check for check in section.checks if check.id == "changes/nodes-removed")
    assert removed.observed == ["dgx1-2"] and removed.message == "dgx1-2"
    # A later run that names no declared nodes (an older report format) counts every node gone as gone.
    changes = history.compare(before, {**after, "declared_nodes": None})
    assert changes["nodes_gone"] == ["dgx1-2"] and changes["nodes_removed"] == []


def test_an_upgrade_s_kubelet_versions_are_shown_and_are_no_regression():
    before = site_state(history_sections(nodes=[node_row("dgx1-1", 8), node_row("dgx1-2", 8)]))
    after = site_state(history_sections(nodes=[node_row("dgx1-1", 8), node_row("dgx1-2", 8)]))
    before["nodes"]["dgx1-1"]["kubelet"] = "v1.30.2"
    after["nodes"]["dgx1-1"]["kubelet"] = "v1.31.0"
    changes = history.compare(before, after)
    assert changes["kubelets"] == [{"node": "dgx1-1", "before": "v1.30.2", "after": "v1.31.0"}]
    section = history.changes_section(changes, "the run X")
    assert {check.status for check in section.checks} == {"pass"}
    shown = next(check for check in section.checks if check.id == "changes/kubelet-versions")
    assert shown.message == "dgx1-1: v1.30.2 -> v1.31.0"


def test_benchmark_figures_are_listed_with_their_change():
    before = {"benchmarks": {"n1/gpu0/matmul_bf16": 600.0, "n1/gpu0/copy": 3000.0}}
    after = {"benchmarks": {"n1/gpu0/matmul_bf16": 450.0, "n1/gpu0/copy": 3000.5}}
    changes = history.compare(before, after)
    assert changes["benchmarks"] == [
        {"figure": "n1/gpu0/matmul_bf16", "before": 600.0, "after": 450.0, "change_pct": -25.0}
    ]
    table = history.changes_section(changes, "the run X").tables[0]
    assert table.rows == [["n1/gpu0/matmul_bf16", 600.0, 450.0, "-25.0%"]]


def test_nothing_to_compare_with_is_a_skip_and_an_unreadable_run_a_warning():
    assert history.changes_section(None, "", "no earlier run for site s").checks[0].status == "skip"
    assert history.changes_section(None, "", "cannot read the run X").checks[0].status == "warn"


def write_run(root: Path, stamp: str, data: dict) -> Path:
    run = root / stamp
    run.mkdir(parents=True)
    (run / "report.json").write_text(json.dumps(data))
    return run


def test_earlier_runs_by_name_and_a_newer_schema_is_not_read(tmp_path):
    site = tmp_path / "s"
    write_run(site, "20261124T100000Z", {"schema_version": 2, "site_state": {}})
    write_run(site, "20261124T110000Z", {"schema_version": 99})
    (site / "latest").symlink_to("20261124T110000Z")
    assert history.resolve_run(tmp_path, "s", "baseline") is None
    latest = history.resolve_run(tmp_path, "s", "latest")
    data, why = history.load_run(latest)
    assert data is None and "schema_version 99 is not one this reader knows (1 to 2)" in why
    data, name = history.load_run(history.resolve_run(tmp_path, "s", "20261124T100000Z"))
    assert name == "20261124T100000Z" and data["schema_version"] == 2
    with pytest.raises(history.HistoryError, match=r"compare_with: expected latest, baseline, a run of site s "
                       r"\(20261124T100000Z, 20261124T110000Z\) or a report.json path, found 'yesterday'"):  # fmt: skip
        history.resolve_run(tmp_path, "s", "yesterday")


def test_a_baseline_is_a_relative_link_to_a_run_of_the_site(tmp_path):
    site = tmp_path / "s"
    write_run(site, "20261124T100000Z", {"schema_version": 2})
    write_run(site, "20261124T110000Z", {"schema_version": 2})
    (site / "latest").symlink_to("20261124T110000Z")
    assert history.set_baseline(tmp_path, "s").name == "20261124T110000Z"
    assert (site / "baseline").readlink() == Path("20261124T110000Z")
    history.set_baseline(tmp_path, "s", "20261124T100000Z")
    assert (site / "baseline").readlink() == Path("20261124T100000Z")
    with pytest.raises(history.HistoryError, match="run: expected latest or a run of site s"):
        history.set_baseline(tmp_path, "s", "../elsewhere")


# --- site_report: two runs of one site -------------------------------------------------------------


def run_site_report(tmp_path, data, **options):
    params = {"site": "s", "cluster_mode": "sandbox", "reports_dir": str(tmp_path), "sections": copy.deepcopy(data),
              "started": None, "fail_on_failed_checks": False, "compare_with": "latest",
              "benchmark_tolerance": 0.05, "straggler_tolerance": 0.05, "stopped": None, **options}  # fmt: skip
    result = site_report.run(types.SimpleNamespace(params=params, check_mode=False))
    return json.loads(Path(result["paths"]["json"]).read_text()), result


def benchmark_section(path: Path) -> dict:
    recorded = json.loads(path.read_text())
    return (
        next(s for s in recorded["sections"] if s["id"].startswith("gpu-benchmark-"))
        if "sections" in recorded
        else recorded
    )


def test_the_second_run_shows_what_changed_first_and_fails_on_a_regression(tmp_path, monkeypatch):
    monkeypatch.setattr(site_report.datetime, "datetime", FixedClock(["20261124T100000", "20261124T110000"]))
    first, _ = run_site_report(tmp_path, history_sections())
    assert first["sections"][0]["id"] == "changes"
    assert first["sections"][0]["checks"][0]["message"] == "no earlier run for site s"
    assert first["changes"] is None and first["site_state"]["nodes"]["dgx1-2"]["gpus"] == 8.0
    second, result = run_site_report(
        tmp_path, history_sections(nodes=[node_row("dgx1-1", 8), node_row("dgx1-2", 0, present=False)], quota_b=3)
    )
    assert second["changes"]["against"] == "20261124T100000Z"
    assert second["changes"]["nodes_gone"] == ["dgx1-2"]
    assert second["sections"][0]["title"] == "What changed since the run 20261124T100000Z"
    assert {"changes/nodes-gone", "changes/quotas"} <= set(result["failed_checks"])
    assert second["verdict"] == "fail"


def test_an_unknown_run_to_compare_with_stops_before_anything_is_written(tmp_path):
    with pytest.raises(runner.ModuleError, match="compare_with: expected latest, baseline"):
        run_site_report(tmp_path, history_sections(), compare_with="last-tuesday")
    assert not (tmp_path / "s").exists()


class FixedClock:
    """datetime.datetime with now() answering the given stamps in turn."""

    def __init__(self, stamps):
        import datetime

        self._stamps = [datetime.datetime.strptime(s, "%Y%m%dT%H%M%S").replace(tzinfo=datetime.UTC) for s in stamps]

    def now(self, tz=None):
        return self._stamps.pop(0)


def test_a_degraded_gpu_is_caught_against_the_site_s_baseline(tmp_path, monkeypatch):
    stamps = ["20261124T100000", "20261124T110000", "20261124T120000"]
    monkeypatch.setattr(site_report.datetime, "datetime", FixedClock(stamps))
    healthy = [*history_sections(), recorded_benchmark("benchmark-h100.json")]
    first, _ = run_site_report(tmp_path, healthy)
    site_section = next(s for s in first["sections"] if s["id"] == "gpu-benchmark-site")
    assert not [c for c in site_section["checks"] if c["status"] == "fail"]
    history.set_baseline(tmp_path, "s")
    again, _ = run_site_report(tmp_path, healthy)  # the same figures: no false alarm
    assert not [
        c for s in again["sections"] if s["id"] == "gpu-benchmark-site" for c in s["checks"] if c["status"] == "fail"
    ]
    degraded, result = run_site_report(
        tmp_path, [*history_sections(), recorded_benchmark("benchmark-h100-degraded.json")]
    )
    site_section = next(s for s in degraded["sections"] if s["id"] == "gpu-benchmark-site")
    fallen = [c for c in site_section["checks"] if c["status"] == "fail"]
    assert fallen and all("baseline of 20261124T100000Z" in c["message"] for c in fallen)
    assert {c["category"] for c in fallen} == {"performance"}
    assert degraded["changes"]["benchmarks"] and all(
        c["change_pct"] == -25.0 for c in degraded["changes"]["benchmarks"]
    )


def test_a_new_driver_is_a_warning_in_what_changed():
    before = site_state(
        history_sections() + [health_section("dgx1-1", "580.159.04"), health_section("dgx1-2", "580.159.04")]
    )
    after = site_state(
        history_sections() + [health_section("dgx1-1", "580.172.01"), health_section("dgx1-2", "580.159.04")]
    )
    assert before["drivers"] == {"dgx1-1": "580.159.04", "dgx1-2": "580.159.04"}
    changes = history.compare(before, after)
    assert changes["drivers"] == [{"node": "dgx1-1", "before": "580.159.04", "after": "580.172.01"}]
    checks = {check.id: check for check in history.changes_section(changes, "the run X").checks}
    drivers = checks["changes/drivers"]
    assert (drivers.status, drivers.category) == ("warn", "configuration")
    assert drivers.message == "dgx1-1: 580.159.04 -> 580.172.01"
    assert {check.status for check_id, check in checks.items() if check_id != "changes/drivers"} == {"pass"}
    # An earlier report without drivers (written before they were recorded) compares as no change.
    assert history.compare({k: v for k, v in before.items() if k != "drivers"}, after)["drivers"] == []
