"""Kueue's objects, projects and workloads as clusterproof writes them (pure)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane as sandbox
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai, kueue
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects, workloads
from tests import conftest

TEAM_A = projects.Project(**conftest.TEAM_A, gpu_lending_limit=1.5)
SETTINGS = workloads.ProjectSettings.from_namespace(projects.namespace_manifest(TEAM_A))
PORTS = kueue.KueuePorts(20000)


def gpu_quota_of(cluster_queue):
    (group,) = cluster_queue["spec"]["resourceGroups"]
    (flavor,) = group["flavors"]
    return {resource["name"]: resource for resource in flavor["resources"]}[kueue.GPU]


@pytest.mark.parametrize(("value", "text"), [(4, "4"), (4.0, "4"), (0.5, "500m"), (1.25, "1250m"), (0, "0")])
def test_quantities_are_written_as_the_api_server_returns_them(value, text):
    assert kueue.quantity(value) == text


def test_cluster_queue_carries_quota_borrowing_lending_and_weight_in_the_cohort():
    queue = kueue.cluster_queue_manifest(TEAM_A)
    assert queue["kind"] == "ClusterQueue" and queue["metadata"]["name"] == "team-a"
    spec = queue["spec"]
    assert spec["cohortName"] == kueue.COHORT
    assert gpu_quota_of(queue) == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "4",
        "borrowingLimit": "4",
        "lendingLimit": "1500m",
    }
    assert spec["fairSharing"] == {"weight": "4"}
    assert spec["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    # Every resource the queue's flavor lists is covered, and only GPUs are limited.
    assert spec["resourceGroups"][0]["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]


def test_no_limit_means_unlimited_borrowing_and_no_lending_limit_lends_all():
    queue = kueue.cluster_queue_manifest(projects.Project("team-b", 2, 3))
    assert gpu_quota_of(queue) == {"name": "nvidia.com/gpu", "nominalQuota": "2"}
    assert queue["spec"]["fairSharing"] == {"weight": "3"}


def test_weight_defaults_to_the_quota_through_the_declaration():
    project = projects.Project.from_dict({"name": "team-c", "gpu_quota": 2, "gpu_limit": 2})
    queue = kueue.cluster_queue_manifest(project)
    assert queue["spec"]["fairSharing"] == {"weight": "2"}
    assert gpu_quota_of(queue)["borrowingLimit"] == "0"


@pytest.mark.parametrize(
    ("project", "message"),
    [
        (
            projects.Project("team-a", 4, 4, gpu_lending_limit=5),
            "project team-a: gpu_lending_limit: expected a number of GPUs from 0 to gpu_quota (4), found 5",
        ),
        (
            projects.Project("team-a", 4, 4, gpu_limit=2),
            "project team-a: gpu_limit: expected a number not below gpu_quota (4), found 2",
        ),
    ],
)
def test_what_kueue_cannot_express_is_an_error_naming_the_field(project, message):
    assert kueue.check_project(project) == [message]
    with pytest.raises(kueue.KueueError, match="gpu_"):
        kueue.cluster_queue_manifest(project)


def test_queue_differences_name_each_field_that_is_not_as_declared():
    found = kueue.cluster_queue_manifest(TEAM_A)
    assert kueue.queue_differences(TEAM_A, found) == []
    # What the API server may return for the same amounts.
    gpu_quota_of(found)["nominalQuota"] = "4000m"
    assert kueue.queue_differences(TEAM_A, found) == []
    gpu_quota_of(found)["nominalQuota"] = "3"
    del gpu_quota_of(found)["lendingLimit"]
    found["spec"]["cohortName"] = "other"
    assert kueue.queue_differences(TEAM_A, found) == [
        ("nominalQuota", "4", "3"),
        ("lendingLimit", "1500m", "none"),
        ("cohortName", "clusterproof", "other"),
    ]
    assert kueue.queue_differences(TEAM_A, None) == [("ClusterQueue", "team-a", "nothing")]


def test_project_becomes_namespace_cluster_queue_local_queue_and_access():
    manifests = kueue.BACKEND.project_manifests(TEAM_A)
    assert [m["kind"] for m in manifests] == [
        "Namespace",
        "ClusterQueue",
        "LocalQueue",
        "Role",
        "RoleBinding",
        "NetworkPolicy",
        "ResourceQuota",
    ]
    local = manifests[2]
    assert local["metadata"] == {"name": "team-a", "namespace": "team-a", "labels": dict(projects.MANAGED_BY)}
    assert local["spec"] == {"clusterQueue": "team-a"}
    rules = manifests[3]["rules"]
    assert {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["workloads", "localqueues"],
        "verbs": ["get", "list", "watch"],
    } in rules
    # KAI's objects are unchanged by the seam.
    assert [m["kind"] for m in kai.BACKEND.project_manifests(TEAM_A)] == [
        "Namespace",
        "Queue",
        "Role",
        "RoleBinding",
        "NetworkPolicy",
        "ResourceQuota",
    ]


def test_a_project_without_members_binds_nobody_and_writes_no_empty_subject_list():
    # The API server drops an empty list, which would make every run report a change.
    _, binding = projects.rbac_manifests(projects.Project("team-c", 2, 2), kueue.MEMBER_RULES)
    assert "subjects" not in binding


def test_site_objects_flavor_cohort_and_priority_classes():
    site = kueue.site_manifests()
    assert [m["kind"] for m in site] == ["ResourceFlavor", "Cohort", "WorkloadPriorityClass", "WorkloadPriorityClass"]
    values = {m["metadata"]["name"]: m["value"] for m in site if m["kind"] == "WorkloadPriorityClass"}
    assert values[kueue.INTERACTIVE_PRIORITY] > values[kueue.TRAINING_PRIORITY]


def test_training_job_goes_to_the_local_queue_suspended_with_low_priority():
    job = kueue.job_manifest(workloads.Workload("a-2", "team-a", workloads.TRAINING, 2, complete_after="30s"), SETTINGS)
    labels = job["metadata"]["labels"]
    assert labels[kueue.QUEUE_NAME_LABEL] == "team-a"
    assert labels[kueue.PRIORITY_CLASS_LABEL] == kueue.TRAINING_PRIORITY
    assert kueue.MAX_EXEC_TIME_LABEL not in labels and kai.QUEUE_LABEL not in labels
    assert job["spec"]["suspend"] is True
    pod = job["spec"]["template"]
    assert "schedulerName" not in pod["spec"] and "priorityClassName" not in pod["spec"]
    assert kai.QUEUE_LABEL not in pod["metadata"]["labels"]
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    assert pod["metadata"]["annotations"][workloads.COMPLETE_AFTER_ANNOTATION] == "30s"
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["dgx1-1"]


def test_interactive_job_has_high_priority_and_kueues_maximum_execution_time():
    job = kueue.job_manifest(workloads.Workload("a-i", "team-a", workloads.INTERACTIVE, 1), SETTINGS)
    labels = job["metadata"]["labels"]
    assert labels[kueue.PRIORITY_CLASS_LABEL] == kueue.INTERACTIVE_PRIORITY
    assert labels[kueue.MAX_EXEC_TIME_LABEL] == "3600"
    assert "activeDeadlineSeconds" not in job["spec"]
    no_limit = workloads.ProjectSettings("team-b")
    job = kueue.job_manifest(workloads.Workload("b-i", "team-b", workloads.INTERACTIVE, 1), no_limit)
    assert kueue.MAX_EXEC_TIME_LABEL not in job["metadata"]["labels"]


def test_gpu_fractions_are_refused_by_name():
    with pytest.raises(kueue.KueueError, match=r"workload a-f: gpus: expected whole GPUs .* found 0.5"):
        kueue.job_manifest(workloads.Workload("a-f", "team-a", workloads.TRAINING, 0.5), SETTINGS)


def test_sandbox_configuration_listens_on_loopback_ports_after_kais():
    config = kueue.configuration(PORTS, Path("/state/kueue/webhook-certs"))
    assert config["webhook"] == {"host": "127.0.0.1", "port": 20019, "certDir": "/state/kueue/webhook-certs"}
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:20020"
    assert config["metrics"]["bindAddress"] == "127.0.0.1:20021"
    assert config["internalCertManagement"] == {"enable": False}
    # In project namespaces (labelled with their queue) a Job without a LocalQueue is Kueue's too
    # and waits; elsewhere Kueue leaves Jobs alone (issue 30).
    assert config["manageJobsWithoutQueueName"] is True
    assert config["managedJobsNamespaceSelector"] == {
        "matchExpressions": [{"key": "clusterproof.io/queue", "operator": "Exists"}]
    }
    assert kueue.helm_manager_config()["managedJobsNamespaceSelector"] == config["managedJobsNamespaceSelector"]
    assert config["fairSharing"]["preemptionStrategies"]
    assert config["integrations"]["frameworks"] == ["batch/job"]
    assert config["featureGates"] == {"VisibilityOnDemand": False}
    # Kueue's ports do not meet KAI's (base+10..18).
    kai_ports = {kai.KaiPorts(20000).port(offset) for offset in range(9)}
    assert not kai_ports & {PORTS.webhook, PORTS.health, PORTS.metrics}


UPSTREAM_WEBHOOKS = [
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [
            {
                "name": "mjob.kb.io",
                "clientConfig": {
                    "service": {"name": "webhook-service", "namespace": "system", "path": "/mutate-batch-v1-job"}
                },
                "rules": [{"apiGroups": ["batch"], "resources": ["jobs"]}],
                "failurePolicy": "Fail",
            },
            {
                "name": "mpod.kb.io",
                "clientConfig": {
                    "service": {"name": "webhook-service", "namespace": "system", "path": "/mutate--v1-pod"}
                },
                "rules": [{"apiGroups": [""], "resources": ["pods"]}],
            },
            {
                "name": "mclusterqueue.kb.io",
                "clientConfig": {
                    "service": {
                        "name": "webhook-service",
                        "namespace": "system",
                        "path": "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
                    }
                },
                "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"]}],
            },
        ],
    }
]


def test_webhooks_are_called_by_url_on_loopback_for_enabled_integrations_only():
    (configuration,) = kueue.webhook_configurations(UPSTREAM_WEBHOOKS, PORTS, b"CA PEM")
    assert configuration["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    hooks = {hook["name"]: hook for hook in configuration["webhooks"]}
    # No pod integration: its webhook would only add a call (and a failure point) to every pod.
    assert set(hooks) == {"mjob.kb.io", "mclusterqueue.kb.io"}
    assert hooks["mjob.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:20019/mutate-batch-v1-job",
        "caBundle": base64.b64encode(b"CA PEM").decode(),
    }
    assert hooks["mjob.kb.io"]["failurePolicy"] == "Fail"
    # The upstream documents are left as they were.
    assert "service" in UPSTREAM_WEBHOOKS[0]["webhooks"][0]["clientConfig"]


CHART_CRD = """---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.20.1
  name: %s
spec:
%s  group: kueue.x-k8s.io
"""
WEBHOOK_STANZA = """  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service:
          name: '{{ include "kueue.fullname" . }}-webhook-service'
"""


def test_kueue_converts_only_the_crds_its_chart_has_it_convert_and_the_api_server_the_others():
    converted = kueue.webhook_converted_crds(
        [
            CHART_CRD % ("clusterqueues.kueue.x-k8s.io", WEBHOOK_STANZA),
            CHART_CRD % ("resourceflavors.kueue.x-k8s.io", ""),
            "{{- if .Values.enableCertManager }}\n" + CHART_CRD % ("workloads.kueue.x-k8s.io", WEBHOOK_STANZA),
        ]
    )
    assert converted == {"clusterqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"}
    versions = {"versions": [{"name": "v1beta1"}, {"name": "v1beta2"}]}
    queue = {"kind": "CustomResourceDefinition", "metadata": {"name": "clusterqueues.kueue.x-k8s.io"}, "spec": versions}
    webhook = kueue.with_conversion_webhook(queue, PORTS, b"CA", converted)["spec"]["conversion"]
    assert webhook["strategy"] == "Webhook"
    assert webhook["webhook"]["clientConfig"]["url"] == "https://127.0.0.1:20019/convert"
    flavor = {**queue, "metadata": {"name": "resourceflavors.kueue.x-k8s.io"}}
    assert kueue.with_conversion_webhook(flavor, PORTS, b"CA", converted)["spec"]["conversion"] == {"strategy": "None"}
    assert "conversion" not in queue["spec"], "the CRD given is left as it was"


def test_sandbox_process_lays_its_etc_over_etc_and_is_ready_on_its_health_port(tmp_path):
    layout = sandbox.Layout(tmp_path)
    (component,) = kueue.components(layout, Path("/cache/bin/kueue"), "/usr/bin/unshare", PORTS)
    paths = kueue.SandboxPaths.of(layout)
    assert component.name == "kueue"
    assert component.argv[:4] == ("/usr/bin/unshare", "--user", "--map-root-user", "--mount")
    assert component.argv[-3:] == (str(paths.etc_overlay), "/cache/bin/kueue", str(paths.config))
    assert paths.metrics_cert_dir == paths.etc_overlay / "kueue" / "metrics" / "certs"
    assert component.ready_url == "http://127.0.0.1:20020/readyz"
    assert dict(component.env)["KUBECONFIG"] == str(layout.kubeconfig)


def test_webhook_serving_certificate_is_of_the_sandbox_ca_and_follows_a_new_ca(tmp_path):
    import ipaddress

    from cryptography import x509

    from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import pki as sandbox_pki

    pki = sandbox_pki.PkiPaths(tmp_path / "pki")
    sandbox_pki.ensure_pki(pki)
    cert, key = tmp_path / "kueue" / "tls.crt", tmp_path / "kueue" / "tls.key"
    assert sandbox_pki.ensure_serving_certificate(pki, cert, key, "kueue-webhook", ("127.0.0.1",))
    issued = x509.load_pem_x509_certificate(cert.read_bytes())
    issued.verify_directly_issued_by(x509.load_pem_x509_certificate(pki.ca_cert.read_bytes()))
    names = issued.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert key.stat().st_mode & 0o777 == 0o600
    assert not sandbox_pki.ensure_serving_certificate(pki, cert, key, "kueue-webhook", ("127.0.0.1",))
    # A sandbox brought up again has a new CA: the old certificate would not be trusted.
    pki.ca_cert.unlink()
    sandbox_pki.ensure_pki(pki)
    assert sandbox_pki.ensure_serving_certificate(pki, cert, key, "kueue-webhook", ("127.0.0.1",))
