"""The monitoring stage on a sandbox of the tests' own, once with each engine (issue 35, first slice):
site.yml with ``clusterproof_monitoring: true`` runs Prometheus and kube-state-metrics beside the
engine, the report's monitoring section passes, a re-run and a check run change nothing; with work
running, Prometheus's GPUs per project are the pods'; with the engine's scheduler stopped,
validation fails naming its metrics endpoint and why it cannot be scraped. Prints what the checks
cost and Prometheus's memory and CPU. Last, with the Prometheus Operator's PrometheusRule and
ServiceMonitor CRDs registered (from its Go module) as a site running the operator has them: the
rules and the scrape sources they need become its objects, a re-run changes nothing, the validation
checks them and names a group removed and a monitor deleted."""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import go_modules
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import api as prometheus_api
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import checks as monitoring_checks
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import sandbox as monitoring
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads

from .conftest import (
    REPO,
    free_port_base,
    run_playbook,
    sandbox_down,
    sandbox_vars,
    two_node_site,
    two_team_scenario,
    wait_for,
)
from .listeners import off_loopback, sandbox_listeners

pytestmark = pytest.mark.sandbox

SITE = "monitored"


def inventory(scheduler: str) -> str:
    return two_node_site(
        SITE,
        "    clusterproof_scheduler: %s\n" % scheduler + "    clusterproof_monitoring: true\n"
        "    clusterproof_monitoring_retention: 2h\n"
        "    clusterproof_projects:\n      - {name: team-a, gpu_quota: 4}\n      - {name: team-b, gpu_quota: 4}\n",
    )


class Site:
    def __init__(self, base: Path, scheduler: str) -> None:
        self.base = base
        self.scheduler = scheduler
        self.backend = registry.backend(scheduler)
        self.inventory = base / "hosts.yml"
        self.inventory.write_text(inventory(scheduler))
        self.state_dir = base / "sandbox"
        self.reports = base / "reports"
        self.port_base = free_port_base()

    def vars(self, **extra) -> list[str]:
        settings = {"clusterproof_reports_dir": str(self.reports), "validate_scenarios_files": [], **extra}
        return [*sandbox_vars(self.state_dir, self.port_base), "-e", json.dumps(settings)]

    def run(self, playbook: str, *args: str):
        return run_playbook(playbook, *args, *self.vars(), inventory=self.inventory)

    def report(self) -> dict:
        return json.loads((self.reports / SITE / "latest" / "report.json").read_text())

    def section(self) -> dict:
        (found,) = [section for section in self.report()["sections"] if section["id"] == "monitoring"]
        return found

    def kubeconfig(self) -> str:
        return str(self.state_dir / "kubeconfig")


def _seconds_of(run, role: str, task_start: str) -> float:
    """Seconds the first task of ``role`` whose name starts with ``task_start`` took, from the runner's events."""
    for event in run.events:
        data = event.get("event_data") or {}
        name = str(data.get("task", "")).split(" : ")[-1]
        if event.get("event") == "runner_on_ok" and data.get("role") == role and name.startswith(task_start):
            return float(data.get("duration") or 0.0)
    raise AssertionError("no finished task %r of role %s" % (task_start, role))


@pytest.fixture(scope="module", params=registry.names())
def site(request, tmp_path_factory):
    found = Site(tmp_path_factory.mktemp("monitoring"), request.param)
    started = time.monotonic()
    run = found.run("playbooks/site.yml")
    found.first_seconds = time.monotonic() - started
    found.first = run
    try:
        yield found
    finally:
        down = sandbox_down(found.state_dir, found.port_base, found.inventory)
        assert down.returncode == 0, down.tail(3000)


def test_site_with_monitoring_passes_its_monitoring_checks(site):
    assert site.first.returncode == 0, site.first.tail(5000)
    section = site.section()
    statuses = {check["id"]: check["status"] for check in section["checks"]}
    assert statuses == {
        **{
            "monitoring/target/%s" % job: "pass"
            for job in (
                "kubernetes-apiserver",
                "kube-scheduler-resources",
                "kube-state-metrics",
                "prometheus",
                # The engine's own: KAI's scheduler and queue controller, or Kueue.
                *(endpoint.job for endpoint in site.backend.sandbox_metrics(site.port_base)),
            )
        },
        "monitoring/rules": "pass",
        "monitoring/allocation/team-a": "pass",
        "monitoring/allocation/team-b": "pass",
    }
    (table,) = section["tables"]
    assert [row[:4] for row in table["rows"]] == [["team-a", 4, 0, "0"], ["team-b", 4, 0, "0"]]
    ports = monitoring.MonitoringPorts(site.port_base)
    assert ports.prometheus_url in table["title"]
    print(
        "\n%s: site.yml with monitoring: %.0f s; the monitoring stage's task %.1f s; the monitoring checks %.1f s"
        % (
            site.scheduler,
            site.first_seconds,
            _seconds_of(site.first, "monitoring", "Run Prometheus"),
            _seconds_of(site.first, "validate_monitoring", "Check Prometheus"),
        )
    )


def test_monitoring_again_changes_nothing_and_check_mode_works(site):
    again = site.run("playbooks/monitoring.yml")
    assert again.returncode == 0, again.tail(3000)
    assert again.recap()["changed"] == 0, again.changed_tasks()
    checked = site.run("playbooks/monitoring.yml", "--check")
    assert checked.returncode == 0, checked.tail(3000)
    assert checked.recap()["changed"] == 0, checked.changed_tasks()
    longer = site.run("playbooks/monitoring.yml", "--check", "-e", "clusterproof_monitoring_retention=3h")
    assert longer.returncode == 0, longer.tail(3000)
    assert any("Run Prometheus" in task for task in longer.changed_tasks().get("localhost", [])), longer.tail(3000)


def test_the_monitoring_listens_on_loopback_only_and_its_token_reads_metrics_only(site):
    listeners = sandbox_listeners(site.state_dir)
    ports = monitoring.MonitoringPorts(site.port_base)
    assert listeners[monitoring.PROMETHEUS] == {("127.0.0.1", ports.prometheus)}
    assert listeners[monitoring.KUBE_STATE_METRICS] == {
        ("127.0.0.1", ports.kube_state_metrics),
        ("127.0.0.1", ports.kube_state_metrics_telemetry),
    }
    assert off_loopback(listeners) == {}, off_loopback(listeners)
    token = monitoring.MonitoringPaths.of(control_plane.Layout(site.state_dir)).token
    assert token.stat().st_mode & 0o777 == 0o600
    server = "https://127.0.0.1:%d" % control_plane.Ports(site.port_base).apiserver
    context = ssl.create_default_context(cafile=str(control_plane.Layout(site.state_dir).pki.ca_cert))
    headers = {"Authorization": "Bearer " + token.read_text()}
    with urllib.request.urlopen(urllib.request.Request(server + "/metrics", headers=headers), context=context) as got:
        assert got.status == 200 and b"apiserver_request_total" in got.read()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(
            urllib.request.Request(server + "/api/v1/namespaces/team-a/pods", headers=headers), context=context
        )
    assert refused.value.code == 403


def _submit(api, site: Site, name: str, gpus: int) -> None:
    """A training Job of team-a, as the engine's backend writes one (its queue, its scheduler)."""
    workload = workloads.Workload(name, "team-a", workloads.TRAINING, gpus)
    manifest = site.backend.job_manifest(workload, workloads.ProjectSettings("team-a"))
    client.BatchV1Api(api).create_namespaced_job("team-a", manifest)


def test_gpus_held_by_running_work_are_what_prometheus_records(site):
    api = config.new_client_from_config(config_file=site.kubeconfig())
    try:
        for name in ("monitoring-probe-1", "monitoring-probe-2"):
            _submit(api, site, name, 3)
        core = client.CoreV1Api(api)

        def running():
            pods = core.list_namespaced_pod("team-a").items
            return len(pods) == 2 and all(p.spec.node_name and p.status.phase == "Running" for p in pods)

        assert wait_for(running, timeout=90)
        again = site.run("playbooks/validate.yml")
        assert again.returncode == 0, again.tail(5000)
        section = site.section()
        checks = {check["id"]: check for check in section["checks"]}
        assert checks["monitoring/allocation/team-a"]["status"] == "pass"
        assert checks["monitoring/allocation/team-a"]["observed"] == "6 GPUs (project:gpus_allocated:sum)"
        (table,) = section["tables"]
        # team-a: quota 4, 6 held by pods and recorded, 2 borrowed over its quota.
        assert table["rows"][0][:4] == ["team-a", 4, 6, "6"]
        assert table["rows"][0][5] == 2
        print(
            "\n%s: the monitoring checks in validate.yml: %.1f s"
            % (site.scheduler, _seconds_of(again, "validate_monitoring", "Check Prometheus"))
        )
    finally:
        client.BatchV1Api(api).delete_collection_namespaced_job("team-a", propagation_policy="Background")
        api.close()


# Two steps whose allocation no engine can place otherwise: each step's state held until Prometheus has
# it, then charted from Prometheus over the run.
TWO_STEPS = two_team_scenario(
    "monitoring-two-steps",
    "team-a takes its quota, then team-b half of its own, as Prometheus records it",
    "clusterproof's monitoring test",
    """\
  - name: "team-a takes its quota"
    submit:
      - {name: a-1, project: team-a, kind: train, gpus: 2}
      - {name: a-2, project: team-a, kind: train, gpus: 2}
    expect:
      allocated: {team-a: 4, team-b: 0}
  - name: "team-b takes 2"
    submit:
      - {name: b-1, project: team-b, kind: train, gpus: 2}
    expect:
      allocated: {team-a: 4, team-b: 2}
""",
)


def test_each_scenario_step_is_what_prometheus_records_and_the_run_is_charted_from_its_range_queries(site):
    scenario = site.base / "two-steps.yml"
    scenario.write_text(TWO_STEPS)
    run = run_playbook(
        "playbooks/validate.yml", *site.vars(validate_scenarios_files=[str(scenario)]), inventory=site.inventory
    )
    assert run.returncode == 0, run.tail(5000)
    (section,) = [s for s in site.report()["sections"] if s["id"] == "scenario-monitoring-two-steps"]
    checks = {check["id"]: check for check in section["checks"]}
    # After each step, Prometheus's allocation of the run's projects (its namespaces) is the pods'.
    assert checks["monitoring/step/monitoring-two-steps/1"]["status"] == "pass"
    assert checks["monitoring/step/monitoring-two-steps/1"]["observed"] == {"scn-team-a": 4, "scn-team-b": 0}
    assert checks["monitoring/step/monitoring-two-steps/2"]["observed"] == {"scn-team-a": 4, "scn-team-b": 2}
    assert checks["monitoring/step/monitoring-two-steps/2"]["status"] == "pass"
    # The run over time, from Prometheus's range queries: a chart per project, the queries named.
    assert checks["monitoring/timeline/monitoring-two-steps"]["status"] == "pass"
    charts = {chart["id"]: chart for chart in section["charts"]}
    team_a = charts["scenario-monitoring-two-steps-prometheus-team-a"]
    team_b = charts["scenario-monitoring-two-steps-prometheus-team-b"]
    assert max(values.get("allocated", 0) for _, values in team_a["timeline"]) == 4
    assert max(values.get("allocated", 0) for _, values in team_b["timeline"]) == 2
    # Both steps were recorded in order: team-a held 4 while team-b held nothing, then both held.
    assert any(v.get("allocated") == 4 for t, v in team_a["timeline"])
    first_b = min(t for t, values in team_b["timeline"] if values.get("allocated") == 2)
    assert any(t < first_b and v.get("allocated") == 4 for t, v in team_a["timeline"])
    assert {values.get("quota") for _, values in team_a["timeline"]} >= {4}
    queries = [table for table in section["tables"] if table["id"].endswith("-prometheus-queries")]
    assert queries and monitoring.MonitoringPorts(site.port_base).prometheus_url in queries[0]["title"]
    html = (site.reports / SITE / "latest" / "report.html").read_text()
    assert team_a["title"] in html
    print(
        "\n%s: the Prometheus check after each step: %s; charting the run: %.1f s"
        % (
            site.scheduler,
            ", ".join(str(checks["monitoring/step/monitoring-two-steps/%d" % n]["message"]) for n in (1, 2)),
            _seconds_of(run, "validate_monitoring", "Ask Prometheus"),
        )
    )


def test_prometheus_memory_and_cpu_on_the_sandbox(site):
    layout = control_plane.Layout(site.state_dir)
    pid = control_plane.running_pid(layout, monitoring.PROMETHEUS)
    assert pid is not None
    stat = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    hertz = os.sysconf("SC_CLK_TCK")
    ticks = (int(stat[11]) + int(stat[12])) / hertz  # utime + stime
    started = float(Path("/proc/uptime").read_text().split()[0]) - int(stat[19]) / hertz
    rss_kib = next(
        int(line.split()[1])
        for line in Path("/proc/%d/status" % pid).read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    assert rss_kib < 1024 * 1024, "Prometheus on the sandbox should stay under 1 GiB"
    print(
        "\n%s: Prometheus on the sandbox: %d MiB RSS, %.1f s CPU in %.0f s (%.1f %% of a core)"
        % (site.scheduler, rss_kib // 1024, ticks, started, 100 * ticks / started)
    )


def test_a_stopped_scheduler_metrics_endpoint_fails_the_validation_with_the_cause(site):
    layout = control_plane.Layout(site.state_dir)
    # The engine's scheduler: its process and its metrics job have one name (kai-scheduler, kueue).
    stopped = site.backend.health_processes[0]
    (endpoint,) = [e for e in site.backend.sandbox_metrics(site.port_base) if e.job == stopped]
    assert control_plane.stop(layout, stopped)
    try:
        run = site.run("playbooks/validate.yml")
        assert run.returncode != 0, run.tail(3000)
        checks = {check["id"]: check for check in site.section()["checks"]}
        failed = sorted(name for name, check in checks.items() if check["status"] == "fail")
        assert failed == ["monitoring/target/%s" % stopped]
        check = checks["monitoring/target/%s" % stopped]
        assert check["title"] == "Prometheus scrapes the GPU scheduler's metrics (%s)" % stopped
        assert check["message"].startswith(
            "Prometheus cannot scrape the GPU scheduler's metrics (%s): %s down: " % (stopped, endpoint.url)
        )
        assert "connection refused" in check["message"]
        assert check["category"] == "configuration" and check["action"]
    finally:
        # Stopped on purpose, the process has no run record for the sandbox's up to heal: the
        # scheduler stage starts it again, and the next validation passes.
        healed = site.run("playbooks/scheduler.yml")
        assert healed.returncode == 0, healed.tail(3000)
    assert control_plane.running_pid(layout, stopped) is not None
    again = site.run("playbooks/validate.yml")
    assert again.returncode == 0, again.tail(3000)
    assert all(check["status"] == "pass" for check in site.section()["checks"])


def _recorded_gpus(site: Site, project: str) -> float | None:
    samples = prometheus_api.query(
        monitoring.MonitoringPorts(site.port_base).prometheus_url, monitoring_checks.ALLOCATED
    )
    return prometheus_api.by_label(samples, "project").get(project)


def _failed_checks(site: Site) -> list[tuple[str, str]]:
    return [(check["id"], check.get("message", "")) for check in site.section()["checks"] if check["status"] == "fail"]


def _validation_fails_on_alone(site: Site, extra: tuple[str, ...], check_id: str, message: str) -> None:
    """validate.yml with ``extra`` fails, and the one failed check of the monitoring section is
    ``check_id`` with ``message``."""
    validated = site.run("playbooks/validate.yml", *extra)
    assert validated.returncode != 0, validated.tail(3000)
    assert _failed_checks(site) == [(check_id, message)]


def test_prometheus_stopped_is_a_failed_check_and_the_stage_brings_it_back(site):
    # Prometheus stops while it records a running Job's GPUs, and the Job ends while it is down: the
    # pod's last samples outlive the restart (no scrape marks them stale), which the restarted
    # Prometheus must not report as GPUs held for longer than the validation waits.
    api = config.new_client_from_config(config_file=site.kubeconfig())
    batch = client.BatchV1Api(api)
    try:
        _submit(api, site, "monitoring-restart-probe", 2)
        assert wait_for(lambda: _recorded_gpus(site, "team-a") == 2, timeout=90)
        layout = control_plane.Layout(site.state_dir)
        assert control_plane.stop(layout, monitoring.PROMETHEUS)
    finally:
        batch.delete_collection_namespaced_job("team-a", propagation_policy="Background")
    core = client.CoreV1Api(api)
    assert wait_for(lambda: not core.list_namespaced_pod("team-a").items, timeout=90)
    api.close()
    run = site.run("playbooks/validate.yml")
    assert run.returncode != 0, run.tail(3000)
    (check,) = site.section()["checks"]
    assert (check["id"], check["status"]) == ("monitoring/prometheus", "fail")
    assert check["message"].startswith(
        "Prometheus does not answer: GET %s/api/v1/targets" % monitoring.MonitoringPorts(site.port_base).prometheus_url
    )
    assert "refused" in check["message"]
    # The validation went on past it: the report has the sections after the monitoring's.
    assert len(site.report()["sections"]) > 2
    again = site.run("playbooks/monitoring.yml")
    assert again.returncode == 0, again.tail(3000)
    assert control_plane.running_pid(layout, monitoring.PROMETHEUS) is not None
    passed = site.run("playbooks/validate.yml")
    assert passed.returncode == 0, (_failed_checks(site), passed.tail(3000))


def _operator_crds() -> list[dict]:
    """The Prometheus Operator's own PrometheusRule and ServiceMonitor CRDs, from its Go module at the pin."""
    pin = versions.PROMETHEUS_OPERATOR
    module = go_modules.download(pin.source, pin.version)
    return [
        yaml.safe_load((module.dir / pin.path / ("monitoring.coreos.com_%s.yaml" % plural)).read_text())
        for plural in ("prometheusrules", "servicemonitors")
    ]


def _established(extensions, name: str) -> bool:
    try:
        crd = extensions.read_custom_resource_definition(name)
    except client.ApiException:
        return False
    return any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or ()))


def test_where_the_site_serves_the_operator_s_kinds_the_rules_and_monitors_become_objects_and_are_checked(site):
    # Last in the module: the CRDs stand in for a site's Prometheus Operator and go at the end.
    if site.scheduler != "kai":
        pytest.skip("the PrometheusRules do not depend on the engine: tried once, with KAI")
    api = config.new_client_from_config(config_file=site.kubeconfig())
    extensions, custom = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
    crds = _operator_crds()
    names = [crd["metadata"]["name"] for crd in crds]
    labels = {"release": "kube-prometheus-stack"}
    extra = ("-e", json.dumps({"clusterproof_monitoring_rule_labels": labels}))
    shipped = yaml.safe_load((REPO / "roles/monitoring/files/rules/clusterproof.rules.yml").read_text())["groups"]

    def rule() -> dict:
        return custom.get_namespaced_custom_object(
            "monitoring.coreos.com", "v1", "clusterproof-monitoring", "prometheusrules", "clusterproof-rules"
        )

    def monitors() -> dict[str, dict]:
        listed = custom.list_namespaced_custom_object(
            "monitoring.coreos.com",
            "v1",
            "clusterproof-monitoring",
            "servicemonitors",
            label_selector="clusterproof.io/monitors=shipped",
        )
        return {item["metadata"]["name"]: item for item in listed["items"]}

    # Bad input first: a label value Kubernetes refuses names the field, and nothing is made.
    bad = site.run(
        "playbooks/monitoring.yml", "-e", json.dumps({"clusterproof_monitoring_rule_labels": {"release": "a b"}})
    )
    assert bad.returncode != 0 and "clusterproof_monitoring_rule_labels.release" in bad.output, bad.tail(3000)
    for crd in crds:
        extensions.create_custom_resource_definition(crd)
    try:
        assert wait_for(lambda: all(_established(extensions, name) for name in names), timeout=60)
        made = site.run("playbooks/monitoring.yml", *extra)
        assert made.returncode == 0, made.tail(3000)
        assert rule()["spec"]["groups"] == shipped
        assert rule()["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        # What the rules need scraped, as the operator's ServiceMonitors the API server admitted (its
        # schema is the operator's): kube-scheduler's pod resources through clusterproof's headless
        # Service, KAI's two metrics Services labelled as the scheduler's, DCGM's exporter.
        made_monitors = monitors()
        assert sorted(made_monitors) == [
            "clusterproof-dcgm-exporter",
            "clusterproof-kai-queuecontroller",
            "clusterproof-kai-scheduler",
            "clusterproof-kube-scheduler-resources",
        ]
        assert all(item["metadata"]["labels"]["release"] == "kube-prometheus-stack" for item in made_monitors.values())
        (endpoint,) = made_monitors["clusterproof-kai-queuecontroller"]["spec"]["endpoints"]
        assert {"action": "replace", "targetLabel": "clusterproof_role", "replacement": "scheduler"} in [
            {key: relabel[key] for key in ("action", "targetLabel", "replacement") if key in relabel}
            for relabel in endpoint["relabelings"]
        ]
        core = client.CoreV1Api(api)
        assert core.read_namespaced_service("clusterproof-kube-scheduler", "kube-system").spec.cluster_ip == "None"
        for again in (
            site.run("playbooks/monitoring.yml", *extra),
            site.run("playbooks/monitoring.yml", "--check", *extra),
        ):
            assert again.returncode == 0, again.tail(3000)
            assert again.recap()["changed"] == 0, again.changed_tasks()

        validated = site.run("playbooks/validate.yml", *extra)
        assert validated.returncode == 0, (_failed_checks(site), validated.tail(3000))
        checks = {check["id"]: check for check in site.section()["checks"]}
        assert checks["monitoring/operator-rules"]["status"] == "pass"
        assert checks["monitoring/operator-monitors"]["status"] == "pass"
        # Beside the sandbox's own Prometheus, whose checks still run.
        assert checks["monitoring/rules"]["status"] == "pass"

        # A group removed behind clusterproof's back: the validation names it, the stage puts it back.
        dropped, *kept = rule()["spec"]["groups"]
        custom.patch_namespaced_custom_object(
            "monitoring.coreos.com",
            "v1",
            "clusterproof-monitoring",
            "prometheusrules",
            "clusterproof-rules",
            {"spec": {"groups": kept}},
        )
        _validation_fails_on_alone(
            site,
            extra,
            "monitoring/operator-rules",
            "PrometheusRule clusterproof-monitoring/clusterproof-rules has no group %s" % dropped["name"],
        )
        mended = site.run("playbooks/monitoring.yml", *extra)
        assert mended.returncode == 0 and mended.recap()["changed"] > 0, mended.tail(3000)
        assert rule()["spec"]["groups"] == shipped

        # A ServiceMonitor deleted behind clusterproof's back: the same, naming it.
        custom.delete_namespaced_custom_object(
            "monitoring.coreos.com", "v1", "clusterproof-monitoring", "servicemonitors", "clusterproof-kai-scheduler"
        )
        _validation_fails_on_alone(
            site,
            extra,
            "monitoring/operator-monitors",
            "ServiceMonitor clusterproof-monitoring/clusterproof-kai-scheduler is missing",
        )
        remade = site.run("playbooks/monitoring.yml", *extra)
        assert remade.returncode == 0 and remade.recap()["changed"] > 0, remade.tail(3000)
        assert sorted(monitors()) == sorted(made_monitors)

        # A site whose GPU operator someone else installed elsewhere: one inventory setting moves DCGM's
        # monitor, and the validation expects it there (the stage and the check read the same setting).
        elsewhere = {
            "clusterproof_monitoring_rule_labels": labels,
            "clusterproof_monitoring_gpu_operator_namespace": "dcgm-elsewhere",
        }
        moved = site.run("playbooks/monitoring.yml", "-e", json.dumps(elsewhere))
        assert moved.returncode == 0 and moved.recap()["changed"] > 0, moved.tail(3000)
        dcgm = monitors()["clusterproof-dcgm-exporter"]["spec"]["namespaceSelector"]
        assert dcgm == {"matchNames": ["dcgm-elsewhere"]}
        validated = site.run("playbooks/validate.yml", "-e", json.dumps(elsewhere))
        assert validated.returncode == 0, (_failed_checks(site), validated.tail(3000))
        _validation_fails_on_alone(
            site,
            extra,
            "monitoring/operator-monitors",
            "ServiceMonitor clusterproof-monitoring/clusterproof-dcgm-exporter is not as clusterproof makes it",
        )
        back = site.run("playbooks/monitoring.yml", *extra)
        assert back.returncode == 0, back.tail(3000)
    finally:
        for name in names:
            extensions.delete_custom_resource_definition(name)
        assert wait_for(lambda: not any(_established(extensions, name) for name in names), timeout=60)
        api.close()
