"""Issue 35: clusterproof's rules as the Prometheus Operator's PrometheusRules (monitoring.operator),
and the inventory's settings for a site that runs the operator (monitoring.settings, the schema)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory import schema
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import cluster, operator, settings

ROOT = Path(__file__).resolve().parents[4]
RULES_DIR = ROOT / "roles" / "monitoring" / "files" / "rules"


def shipped():
    return operator.rule_objects(operator.rule_files(RULES_DIR), {"release": "kube-prometheus-stack"})


def test_each_shipped_rule_file_is_one_prometheus_rule_with_its_groups_and_the_site_s_labels():
    files = operator.rule_files(RULES_DIR)
    (rule,) = shipped()
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    assert rule["metadata"]["name"] == "clusterproof-rules"
    assert rule["metadata"]["namespace"] == "clusterproof-monitoring"
    assert rule["metadata"]["labels"] == {
        "release": "kube-prometheus-stack",
        "app.kubernetes.io/managed-by": "clusterproof",
        "clusterproof.io/rules": "shipped",
    }
    assert rule["spec"]["groups"] == yaml.safe_load((RULES_DIR / "clusterproof.rules.yml").read_text())["groups"]
    # The same rules the validator checks Prometheus for.
    names = operator.rule_names(files)
    assert "project:gpus_allocated:sum" in names and "GPULost" in names and None not in names


def test_rule_names_follow_the_file_names():
    assert operator.rule_name("clusterproof.rules.yml") == "clusterproof-rules"
    assert operator.rule_name("some/dir/GPU_Alerts.yaml") == "gpu-alerts"


def test_a_folder_without_rule_files_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match="rules_dir: expected a folder with rule files \\(\\*.yml\\), found none in"):
        operator.rule_files(tmp_path)


def test_an_object_as_shipped_passes_and_every_difference_is_named():
    (wanted,) = shipped()
    name = wanted["metadata"]["name"]
    as_held = copy.deepcopy(wanted)
    as_held["metadata"]["uid"] = "1"  # what the API server adds is not a difference
    check = operator.rules_check([wanted], {name: as_held}, "")
    assert check.status == "pass" and check.observed == {name: "as shipped"}
    assert "clusterproof_monitoring_prometheus_url" in check.message

    missing = operator.rules_check([wanted], {name: None}, "http://prometheus:9090")
    assert missing.status == "fail" and missing.observed == {name: "missing"}
    assert "PrometheusRule clusterproof-monitoring/clusterproof-rules is missing" in missing.message

    drifted = copy.deepcopy(wanted)
    first, *rest = drifted["spec"]["groups"]
    drifted["spec"]["groups"] = rest
    rest[0]["rules"] = rest[0]["rules"][1:]
    del drifted["metadata"]["labels"]["release"]
    said = operator.differences(wanted, drifted)
    assert "PrometheusRule clusterproof-monitoring/clusterproof-rules has no group %s" % first["name"] in said
    assert (
        "PrometheusRule clusterproof-monitoring/clusterproof-rules's group %s is not as shipped" % rest[0]["name"]
        in said
    )
    assert (
        "PrometheusRule clusterproof-monitoring/clusterproof-rules's label release is None, not 'kube-prometheus-stack'"
        in said
    )
    failed = operator.rules_check([wanted], {name: drifted}, "")
    assert (
        failed.status == "fail"
        and failed.observed == {name: "differs"}
        and "run playbooks/monitoring.yml" in failed.action
    )


def test_labels_for_the_rules_are_refused_with_the_field_what_was_expected_and_what_was_found():
    assert operator.label_problems({"release": "kube-prometheus-stack", "example.com/team": "gpu"}, "labels") == ""
    said = operator.label_problems({"bad key!": "x"}, "labels")
    assert (
        said == "labels: expected label names (name or prefix/name, the name 63 characters at most), found 'bad key!'"
    )
    assert "labels.release: expected a label value" in operator.label_problems({"release": "has space"}, "labels")
    assert "found 5" in operator.label_problems({"release": 5}, "labels")
    assert operator.label_problems({"clusterproof.io/rules": "mine"}, "labels") == (
        "labels: expected labels of the site's own, not clusterproof's, found 'clusterproof.io/rules'"
    )
    assert operator.label_problems(["release"], "labels") == (
        "labels: expected a mapping of label names to values, found ['release']"
    )


def test_the_site_s_prometheus_must_be_an_http_url_with_a_host():
    assert settings.prometheus_url_problem("http://prometheus.monitoring:9090") is None
    assert settings.prometheus_url_problem("https://prom.example/prefix") is None
    for bad in ("prometheus:9090", "ftp://prom", "http://", 9090):
        assert settings.prometheus_url_problem(bad) == settings.PROMETHEUS_URL_EXPECTED


def _site_errors(**variables):
    site = {"clusterproof_site_name": "s", "clusterproof_cluster_mode": "sandbox", **variables}
    hostvars = {"cp": dict(site), "gpu-1": {**site, "gpu_count": 8}}
    groups = {"all": list(hostvars), "kube_control_plane": ["cp"], "gpu_nodes": ["gpu-1"]}
    _, errors = schema.validate_site(groups, hostvars)
    return [(error.field, error.expected, error.found) for error in errors]


def test_the_inventory_names_the_monitoring_field_that_is_wrong():
    assert _site_errors(clusterproof_monitoring_rule_labels={"release": "x"}) == []
    assert _site_errors(clusterproof_monitoring_prometheus_url="http://prometheus:9090") == []
    assert _site_errors(clusterproof_monitoring_prometheus_url="prometheus:9090") == [
        ("clusterproof_monitoring_prometheus_url", settings.PROMETHEUS_URL_EXPECTED, "'prometheus:9090'")
    ]
    assert _site_errors(clusterproof_monitoring_rule_labels={"release": "a b"}) == [
        (
            "clusterproof_monitoring_rule_labels.release",
            "a label value (at most 63 letters, digits, '-', '_' or '.')",
            "'a b'",
        )
    ]


def test_rule_files_given_as_text_are_the_folder_s_parsed_for_a_module_on_another_host():
    folder = ROOT / "roles/monitoring/files/rules"
    texts = operator.rule_file_texts(folder)
    assert operator.given_rule_files(texts, None) == operator.rule_files(folder)
    # The text wins: the folder is the controller's and need not exist where the module runs.
    assert operator.given_rule_files(texts, "/nowhere") == operator.rule_files(folder)


@pytest.mark.parametrize(
    ("texts", "said"),
    [
        ({}, "rules: expected rule files (name.yml: their text), found none"),
        ({"rules.txt": "groups: []"}, "rules: expected rule files named *.yml, found 'rules.txt'"),
        ({"a.yml": "groups: [\n"}, "rules.a.yml: expected a rule file (YAML), found: "),
        (
            {"a.yml": "- just a list"},
            "rules.a.yml: expected a rule file (a mapping with groups), found '- just a list'",
        ),
    ],
)
def test_rule_files_given_as_text_that_are_none_are_refused_naming_them(texts, said):
    with pytest.raises(ValueError) as raised:
        operator.parse_rule_files(texts)
    assert str(raised.value).startswith(said)


def test_no_rule_files_at_all_is_refused():
    with pytest.raises(ValueError, match="rules or rules_dir: expected the shipped rule files, found neither"):
        operator.given_rule_files(None, None)


def monitors(scheduler="kai"):
    site = cluster.ClusterMonitoring(scheduler, operator.rule_files(RULES_DIR))
    return operator.monitor_objects(operator.monitor_targets(site), {"release": "kube-prometheus-stack"})


def test_each_scrape_source_the_rules_need_is_a_service_monitor_of_the_service_clusterproof_s_prometheus_uses():
    made = {obj["metadata"]["name"]: obj for obj in monitors()}
    assert sorted(made) == [
        "clusterproof-dcgm-exporter",
        "clusterproof-kai-queuecontroller",
        "clusterproof-kai-scheduler",
        "clusterproof-kube-scheduler-resources",
    ]
    for obj in made.values():
        assert obj["apiVersion"] == "monitoring.coreos.com/v1" and obj["kind"] == "ServiceMonitor"
        assert obj["metadata"]["namespace"] == "clusterproof-monitoring"
        assert obj["metadata"]["labels"] == {
            "release": "kube-prometheus-stack",
            "app.kubernetes.io/managed-by": "clusterproof",
            "clusterproof.io/monitors": "shipped",
        }
    scheduler = made["clusterproof-kube-scheduler-resources"]["spec"]
    assert scheduler["namespaceSelector"] == {"matchNames": ["kube-system"]}
    (endpoint,) = scheduler["endpoints"]
    assert endpoint["port"] == "https-metrics" and endpoint["path"] == "/metrics/resources"
    assert endpoint["scheme"] == "https" and endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    # The one Service clusterproof makes, named as its rules know the job; no scheduler label on
    # kube-scheduler's series (they carry pods' own node and namespace).
    assert endpoint["relabelings"] == [
        {"action": "keep", "sourceLabels": ["__meta_kubernetes_service_name"], "regex": "clusterproof-kube-scheduler"},
        {"action": "replace", "targetLabel": "job", "replacement": "kube-scheduler-resources"},
    ]
    queue_controller = made["clusterproof-kai-queuecontroller"]["spec"]
    assert queue_controller["namespaceSelector"] == {"matchNames": ["kai-scheduler"]}
    (endpoint,) = queue_controller["endpoints"]
    assert endpoint["scheme"] == "http" and "tlsConfig" not in endpoint and "bearerTokenFile" not in endpoint
    assert {"action": "replace", "targetLabel": "clusterproof_role", "replacement": "scheduler"} in endpoint[
        "relabelings"
    ]
    dcgm = made["clusterproof-dcgm-exporter"]["spec"]
    assert dcgm["namespaceSelector"] == {"matchNames": ["gpu-operator"]}
    assert dcgm["endpoints"][0]["port"] == "gpu-metrics"


def test_kueue_s_metrics_are_scraped_over_tls_with_the_token_and_labelled_as_the_scheduler_s():
    made = {obj["metadata"]["name"]: obj for obj in monitors("kueue")}
    assert "clusterproof-kai-scheduler" not in made
    (endpoint,) = made["clusterproof-kueue"]["spec"]["endpoints"]
    assert endpoint["scheme"] == "https" and endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    assert endpoint["bearerTokenFile"] and endpoint["relabelings"][-1]["targetLabel"] == "clusterproof_role"


def test_the_services_the_monitors_find_kube_scheduler_and_dcgm_by_are_made_dcgm_s_where_the_operator_runs():
    site = cluster.ClusterMonitoring("kai", operator.rule_files(RULES_DIR))
    assert [obj["metadata"]["name"] for obj in operator.monitor_services(site, gpu_operator=False)] == [
        "clusterproof-kube-scheduler"
    ]
    assert [
        (obj["metadata"]["namespace"], obj["metadata"]["name"])
        for obj in operator.monitor_services(site, gpu_operator=True)
    ] == [("kube-system", "clusterproof-kube-scheduler"), ("gpu-operator", "clusterproof-dcgm-exporter")]


def test_a_monitor_as_made_passes_what_the_api_server_adds_aside_and_every_difference_is_named():
    wanted = monitors()
    found = {obj["metadata"]["name"]: copy.deepcopy(obj) for obj in wanted}
    held = found["clusterproof-kai-scheduler"]
    held["metadata"]["uid"] = "1"
    held["spec"]["endpoints"][0]["honorLabels"] = False  # a default the API server may fill in
    check = operator.monitors_check(wanted, found)
    assert check.status == "pass" and set(check.observed.values()) == {"as shipped"}
    assert check.id == "monitoring/operator-monitors"
    assert "kube-scheduler-resources, kai-scheduler, kai-queuecontroller, dcgm-exporter" in check.message

    found["clusterproof-kai-queuecontroller"] = None
    held["spec"]["endpoints"][0]["port"] = "metrics"
    del held["metadata"]["labels"]["release"]
    failed = operator.monitors_check(wanted, found)
    assert failed.status == "fail" and "run playbooks/monitoring.yml" in failed.action
    assert failed.observed["clusterproof-kai-queuecontroller"] == "missing"
    assert failed.observed["clusterproof-kai-scheduler"] == "differs"
    assert failed.message == (
        "ServiceMonitor clusterproof-monitoring/clusterproof-kai-scheduler is not as clusterproof makes it; "
        "ServiceMonitor clusterproof-monitoring/clusterproof-kai-scheduler's label release is None, not "
        "'kube-prometheus-stack'; ServiceMonitor clusterproof-monitoring/clusterproof-kai-queuecontroller is missing"
    )


def test_clusterproof_s_own_monitor_label_is_not_the_site_s_to_set():
    assert operator.label_problems({"clusterproof.io/monitors": "mine"}, "labels") == (
        "labels: expected labels of the site's own, not clusterproof's, found 'clusterproof.io/monitors'"
    )
