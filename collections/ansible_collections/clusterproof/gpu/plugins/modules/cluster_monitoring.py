#!/usr/bin/python
"""Run Prometheus and kube-state-metrics as pods of a kubeadm site, from the bundle's images."""

DOCUMENTATION = r"""
module: cluster_monitoring
short_description: Run Prometheus, with clusterproof's rules, and kube-state-metrics as pods of a kubeadm site
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Makes, in the namespace C(clusterproof-monitoring) (Pod Security C(restricted)), Prometheus and
    kube-state-metrics as Deployments with their Services, service accounts and the cluster roles that let them read
    what they need; Prometheus's configuration and the rule files (O(rules)) as ConfigMaps; its samples on a
    claim of O(storage_size) on the site's default storage class, kept for O(retention).
  - Prometheus scrapes the API server, each control plane's kube-scheduler (C(/metrics/resources), port 10259),
    kube-state-metrics, the GPU scheduler's own metrics Services (O(scheduler)), NVIDIA's DCGM exporter where the GPU
    operator runs one in O(gpu_operator_namespace), and itself (docs/monitoring.md). It finds them by DNS (Debian's
    Prometheus has no Kubernetes discovery), so the module makes the headless Services C(clusterproof-kube-scheduler) in
    C(kube-system) and, where O(gpu_operator_namespace) exists, C(clusterproof-dcgm-exporter) in it.
  - The images are upstream's references (C(docker.io/prom/prometheus), C(registry.k8s.io/kube-state-metrics)), which
    the offline bundle holds and the site's containerd pulls from its mirror.
  - A changed configuration or rule file restarts Prometheus (the pod template carries their checksum); the same, no
    change. Waits up to O(timeout) seconds for both to be rolled out, and fails saying why not (the claim unbound,
    the pod unscheduled, an image not pulled), naming the pod.
  - Idempotent; supports check mode (nothing is made, nothing waited for).
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
  - clusterproof.gpu.rule_files
options:
  scheduler:
    description: The site's GPU scheduler (kai, kueue, none), whose own metrics are scraped.
    type: str
    required: true
  retention:
    description: How long Prometheus keeps samples (C(--storage.tsdb.retention.time)), as the inventory checked it.
    type: str
    default: 15d
  storage_size:
    description: The size of Prometheus's claim on the default storage class (a Kubernetes quantity, C(10Gi)).
    type: str
    default: 10Gi
  gpu_operator_namespace:
    description: Where the GPU operator runs DCGM's exporter (real GPUs); no target elsewhere.
    type: str
    default: gpu-operator
  timeout:
    description: Seconds to wait for Prometheus and kube-state-metrics to be rolled out.
    type: int
    default: 300
"""

EXAMPLES = r"""
- name: Run Prometheus on the site
  clusterproof.gpu.cluster_monitoring:
    rules: "{{ query('clusterproof.gpu.rule_files', 'roles/monitoring/files/rules') | first }}"
    scheduler: kai
    retention: 15d
    kubeconfig: "{{ clusterproof_active_kubeconfig }}"
"""

RETURN = r"""
prometheus_url:
  description: Where Prometheus answers, through the API server's proxy (with the kubeconfig's credentials).
  returned: always
  type: str
changed_objects:
  description: Objects created or changed (kind/name).
  returned: always
  type: list
  elements: str
"""

import json

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import cluster, config, operator

OPTIONS = {
    **runner.RULES_ARG_SPEC,
    "scheduler": {"type": "str", "required": True},
    "retention": {"type": "str", "default": "15d"},
    "storage_size": {"type": "str", "default": "10Gi"},
    "gpu_operator_namespace": {"type": "str", "default": "gpu-operator"},
    "timeout": {"type": "int", "default": 300},
}


def _problems(changes):
    """Why each Deployment is not rolled out yet (empty when both are)."""
    core = kube.core_v1(changes.applier.api)
    claim = changes.applier.get(
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _named(cluster.DATA_CLAIM)}
    )
    found = []
    for name in cluster.deployments():
        deployment = changes.applier.get({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _named(name)})
        raw = core.list_namespaced_pod(
            config.NAMESPACE, label_selector="app.kubernetes.io/name=%s" % name, _preload_content=False
        )
        pods = json.loads(raw.data)["items"]
        problem = cluster.rollout_problem(deployment, pods, claim if name == config.PROMETHEUS else None)
        if problem:
            found.append(problem)
    return found


def _named(name):
    return {"name": name, "namespace": config.NAMESPACE}


def _work(module):
    params = module.params
    try:
        rule_files = operator.given_rule_files(params["rules"], params["rules_dir"])
        settings = cluster.ClusterMonitoring(
            params["scheduler"],
            rule_files,
            retention=params["retention"],
            storage_size=params["storage_size"],
            gpu_operator_namespace=params["gpu_operator_namespace"],
        )
        cluster.targets(settings)  # an unknown scheduler refused before anything is asked of the cluster
    except (ValueError, KeyError) as error:
        raise runner.ModuleError("%s; nothing was changed" % error) from error
    try:
        changes = kube.Changes.connect(params["kubeconfig"], params["context"], module.check_mode)
        gpu_operator = changes.applier.get(cluster.gpu_operator_namespace(settings)) is not None
        changes.apply(cluster.objects(settings, gpu_operator=gpu_operator))
        address, _ = kube.service_proxy(
            changes.applier.api, config.NAMESPACE, config.PROMETHEUS, cluster.PROMETHEUS_PORT
        )
        if not module.check_mode:
            waited = wait_until(
                lambda: _problems(changes), lambda found: not found, timeout=params["timeout"], interval=3
            )
            if waited.timed_out:
                raise runner.ModuleError(
                    "monitoring not running after %d s: %s" % (params["timeout"], "; ".join(waited.value))
                )
    except kube.ApiException as error:
        runner.fail_from_exception(module, error, "the monitoring in %s" % config.NAMESPACE)
    return {"changed": changes.changed, "prometheus_url": address, "changed_objects": changes.applied}


def main():
    runner.run_cluster_module(OPTIONS, work=_work, doing="running Prometheus on the site")


if __name__ == "__main__":
    main()
