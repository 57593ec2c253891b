"""The monitoring stage on a kubeadm site (``monitoring.cluster``): the objects it makes, the scrape
configuration (checked by the pinned promtool, as Prometheus would load it), and why a rollout is not
done; how the validator reaches Prometheus through a fetch (``monitoring.api.Endpoint``) and fails a
discovered job that found nothing; the bundle's images of it."""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import contents
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import (
    api,
    checks,
    cluster,
    config,
    operator,
    settings,
)
from tests.conftest import REPO

RULES = operator.rule_files(REPO / "roles/monitoring/files/rules")


def monitoring(scheduler: str = "kai", **options) -> cluster.ClusterMonitoring:
    return cluster.ClusterMonitoring(scheduler, RULES, **options)


def by_kind(objects):
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in objects}


def test_prometheus_and_kube_state_metrics_run_as_nobody_under_pod_security_restricted():
    objects = by_kind(cluster.objects(monitoring()))
    namespace = objects[("Namespace", config.NAMESPACE)]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for name in (config.PROMETHEUS, config.KUBE_STATE_METRICS):
        pod = objects[("Deployment", name)]["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 65534
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        (container,) = pod["containers"]
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert "limits" in container["resources"] and "requests" in container["resources"]
    images = {
        name: objects[("Deployment", name)]["spec"]["template"]["spec"]["containers"][0]["image"]
        for name in (config.PROMETHEUS, config.KUBE_STATE_METRICS)
    }
    assert images == {
        config.PROMETHEUS: versions.PROMETHEUS_IMAGE,
        config.KUBE_STATE_METRICS: versions.KUBE_STATE_METRICS_IMAGE,
    }
    assert images[config.PROMETHEUS] == "docker.io/prom/prometheus:v2.42.0"


def test_prometheus_keeps_its_samples_on_a_claim_of_the_default_class_for_the_retention():
    objects = by_kind(cluster.objects(monitoring(retention="30d", storage_size="50Gi")))
    claim = objects[("PersistentVolumeClaim", cluster.DATA_CLAIM)]
    assert "storageClassName" not in claim["spec"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"
    deployment = objects[("Deployment", config.PROMETHEUS)]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--storage.tsdb.retention.time=30d" in args
    assert "--storage.tsdb.path=%s" % cluster.DATA_DIR in args
    assert "--query.lookback-delta=%ds" % config.LOOKBACK_DELTA_SECONDS in args


def test_the_rules_travel_in_a_config_map_and_a_changed_rule_restarts_prometheus():
    objects = by_kind(cluster.objects(monitoring()))
    rules = objects[("ConfigMap", cluster.RULES_CONFIG_MAP)]["data"]
    assert {name: yaml.safe_load(text) for name, text in rules.items()} == RULES
    before = objects[("Deployment", config.PROMETHEUS)]["spec"]["template"]["metadata"]["annotations"]
    assert (
        before
        == by_kind(cluster.objects(monitoring()))[("Deployment", config.PROMETHEUS)]["spec"]["template"]["metadata"][
            "annotations"
        ]
    )
    changed = json.loads(json.dumps(RULES))
    changed["clusterproof.rules.yml"]["groups"][0]["interval"] = "30s"
    after = by_kind(cluster.objects(cluster.ClusterMonitoring("kai", changed)))[("Deployment", config.PROMETHEUS)]
    assert after["spec"]["template"]["metadata"]["annotations"] != before


def test_prometheus_may_read_metrics_endpoints_and_nothing_else():
    objects = by_kind(cluster.objects(monitoring()))
    rules = objects[("ClusterRole", cluster.PROMETHEUS_ROLE)]["rules"]
    assert rules == [{"nonResourceURLs": ["/metrics", "/metrics/resources"], "verbs": ["get"]}]
    state = objects[("ClusterRole", cluster.KUBE_STATE_METRICS_ROLE)]["rules"]
    assert state == [{"apiGroups": [""], "resources": ["namespaces", "nodes", "pods"], "verbs": ["list", "watch"]}]
    binding = objects[("ClusterRoleBinding", cluster.PROMETHEUS_ROLE)]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": config.SERVICE_ACCOUNT, "namespace": config.NAMESPACE}
    ]


def jobs(scheduler: str) -> dict[str, dict]:
    loaded = yaml.safe_load(cluster.prometheus_yaml(monitoring(scheduler)))
    return {job["job_name"]: job for job in loaded["scrape_configs"]}


def srv(job: dict) -> str:
    (sd,) = job["dns_sd_configs"]
    assert sd["type"] == "SRV"
    (name,) = sd["names"]
    return name


def test_each_kube_scheduler_is_found_by_dns_through_a_headless_service_with_no_label_of_its_own():
    job = jobs("kai")[config.SCHEDULER_RESOURCES_JOB]
    assert job["metrics_path"] == "/metrics/resources" and job["scheme"] == "https"
    assert srv(job) == "_https-metrics._tcp.clusterproof-kube-scheduler.kube-system.svc"
    # kube_pod_resource_request carries node, namespace and pod of its own: a target label would rename them.
    assert "relabel_configs" not in job
    assert job["authorization"]["credentials_file"] == config.IN_POD_TOKEN
    service = by_kind(cluster.objects(monitoring()))[("Service", cluster.KUBE_SCHEDULER_SERVICE)]
    assert service["metadata"]["namespace"] == "kube-system" and service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {"component": "kube-scheduler", "tier": "control-plane"}
    assert service["spec"]["ports"][0]["name"] == "https-metrics" and service["spec"]["ports"][0]["port"] == 10259


def test_kai_s_services_and_kueue_s_are_found_by_their_ports_names_as_the_scheduler_s():
    kai = jobs("kai")
    assert srv(kai["kai-scheduler"]) == "_http-metrics._tcp.kai-scheduler-default.kai-scheduler.svc"
    assert srv(kai["kai-queuecontroller"]) == "_metrics._tcp.queue-controller.kai-scheduler.svc"
    for job in ("kai-scheduler", "kai-queuecontroller"):
        assert kai[job]["scheme"] == "http"
        assert kai[job]["relabel_configs"] == [
            {"target_label": config.ROLE_LABEL, "replacement": config.SCHEDULER_ROLE}
        ]
    kueue = jobs("kueue")["kueue"]
    assert kueue["scheme"] == "https" and kueue["tls_config"] == {"insecure_skip_verify": True}
    assert srv(kueue) == "_https._tcp.kueue-controller-manager-metrics-service.kueue-system.svc"
    assert "kai-scheduler" not in jobs("kueue") and not {"kai-scheduler", "kueue"} & set(jobs("none"))


def test_dcgm_is_scraped_where_the_gpu_operator_runs_and_not_required_where_it_does_not():
    assert srv(jobs("kai")[cluster.DCGM_JOB]) == "_gpu-metrics._tcp.clusterproof-dcgm-exporter.gpu-operator.svc"
    expected = cluster.expected_jobs(monitoring())
    assert cluster.DCGM_JOB not in expected
    assert set(expected) == set(jobs("kai")) - {cluster.DCGM_JOB}
    # Its headless Service goes beside the operator's exporter, only where the operator's namespace is.
    assert ("Service", cluster.DCGM_SERVICE) not in by_kind(cluster.objects(monitoring()))
    service = by_kind(cluster.objects(monitoring(), gpu_operator=True))[("Service", cluster.DCGM_SERVICE)]
    assert service["metadata"]["namespace"] == "gpu-operator"
    assert service["spec"]["selector"] == {"app": "nvidia-dcgm-exporter"} and service["spec"]["clusterIP"] == "None"


@pytest.mark.parametrize("scheduler", ["kai", "kueue", "none"])
def test_the_pinned_prometheus_loads_the_configuration(promtool, tmp_path, scheduler):
    # The pod's paths, moved into a folder of the test's: promtool opens the rule, CA and token files. Debian's
    # build has no Kubernetes discovery (kubernetes_sd_configs is refused): the targets are found by DNS.
    text = cluster.prometheus_yaml(monitoring(scheduler))
    for path in (cluster.RULES_DIR, config.IN_POD_CA, config.IN_POD_TOKEN):
        text = text.replace(path, str(tmp_path / Path(path).name))
    (tmp_path / "rules").mkdir()
    for name, rules in cluster.rule_data(monitoring(scheduler)).items():
        (tmp_path / "rules" / name).write_text(rules)
    (tmp_path / "ca.crt").write_text("")
    (tmp_path / "token").write_text("token")
    (tmp_path / "prometheus.yml").write_text(text)
    done = subprocess.run(
        [str(promtool), "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def deployment(ready: int, generation: int = 2, observed: int = 2) -> dict:
    return {
        "metadata": {"name": config.PROMETHEUS, "generation": generation},
        "spec": {"replicas": 1},
        "status": {
            "observedGeneration": observed,
            "replicas": 1,
            "updatedReplicas": 1,
            "availableReplicas": ready,
        },
    }


def pod(**status) -> dict:
    return {"metadata": {"name": "prometheus-abc"}, "status": status}


def test_a_rolled_out_deployment_has_no_problem_and_an_older_generation_has_one():
    assert cluster.rollout_problem(deployment(1), []) is None
    assert "not rolled out" in cluster.rollout_problem(deployment(1, generation=3, observed=2), [])
    assert cluster.rollout_problem(None, []) == "the Deployment is missing"


def test_why_prometheus_is_not_rolled_out_names_the_claim_the_scheduler_and_the_image():
    claim = {"metadata": {"name": cluster.DATA_CLAIM}, "status": {"phase": "Pending"}}
    unscheduled = pod(
        conditions=[{"type": "PodScheduled", "status": "False", "message": "0/3 nodes are available: unbound claims"}]
    )
    said = cluster.rollout_problem(deployment(0), [unscheduled], claim)
    assert said == (
        "clusterproof-monitoring/prometheus is not rolled out: its claim prometheus-data is Pending (is there a "
        "default storage class?); pod prometheus-abc is not scheduled: 0/3 nodes are available: unbound claims"
    )
    pulling = pod(
        containerStatuses=[
            {
                "name": "prometheus",
                "ready": False,
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}},
            }
        ]
    )
    bound = {"metadata": {"name": cluster.DATA_CLAIM}, "status": {"phase": "Bound"}}
    assert cluster.rollout_problem(deployment(0), [pulling], bound).endswith(
        "pod prometheus-abc: container prometheus is waiting, ImagePullBackOff: not found"
    )


def test_a_prometheus_reached_by_a_fetch_is_asked_through_it_and_named_by_its_address():
    asked = []

    def fetch(path, params, timeout):
        asked.append((path, params))
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()

    endpoint = api.endpoint("https://api:6443/api/v1/namespaces/m/services/prometheus:9090/proxy", fetch)
    assert str(endpoint) == "https://api:6443/api/v1/namespaces/m/services/prometheus:9090/proxy"
    assert api.query(endpoint, "up") == []
    assert asked == [("/api/v1/query", {"query": "up"})]
    assert api.endpoint("http://127.0.0.1:9090", None) == "http://127.0.0.1:9090"


def test_a_fetch_that_fails_is_a_prometheus_error_naming_the_request():
    def fetch(path, params, timeout):
        raise RuntimeError("HTTP 503 no endpoints available for service prometheus")

    with pytest.raises(api.PrometheusError, match=r"GET https://api/proxy/api/v1/rules: HTTP 503 no endpoints"):
        api.rule_groups(api.Endpoint("https://api/proxy", fetch))


def test_a_discovered_job_that_found_no_target_fails_and_one_that_did_passes():
    since = datetime.datetime(2026, 11, 28, tzinfo=datetime.UTC)
    up = {"labels": {"job": "kube-state-metrics"}, "health": "up", "lastScrape": "2026-11-28T00:00:05Z"}
    found = {check.id: check for check in checks.target_checks([up], since, ["kube-state-metrics", "kai-scheduler"])}
    assert found["monitoring/target/kube-state-metrics"].status == "pass"
    missing = found["monitoring/target/kai-scheduler"]
    assert missing.status == "fail" and missing.observed == "no target found"
    assert "nothing to scrape for kai-scheduler" in missing.message


@pytest.mark.parametrize("size", ["10Gi", "1Gi", "2Ti"])
def test_claim_sizes_accepted(size):
    assert settings.storage_size_problem(size) is None


@pytest.mark.parametrize("size", ["10G", "0Gi", "500Mi", 10, "", "10 Gi"])
def test_claim_sizes_refused_say_what_was_expected(size):
    assert settings.storage_size_problem(size) == settings.STORAGE_SIZE_EXPECTED


def test_the_bundle_holds_both_images_as_upstream_lays_them_out():
    specs = {spec.ref.ref: spec for spec in contents.monitoring_image_specs()}
    prometheus = specs[versions.PROMETHEUS_IMAGE]
    assert prometheus.files == (("prometheus", "/bin/prometheus"),) and prometheus.entrypoint == ("/bin/prometheus",)
    # Debian's build is linked against glibc: the Debian base.
    assert prometheus.base == "debian" and prometheus.user == "65534:65534"
    state = specs[versions.KUBE_STATE_METRICS_IMAGE]
    assert state.files == (("kube-state-metrics", "/kube-state-metrics"),) and state.base == "scratch"
    assert {spec.ref.host for spec in specs.values()} <= set(contents.MIRRORED_REGISTRIES)
