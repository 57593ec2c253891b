"""clusterproof's rules and scrape sources as the Prometheus Operator's objects, for a site that
runs the operator.

Where the API server serves ``monitoring.coreos.com/v1`` ``PrometheusRule`` (the operator's CRD,
kube-prometheus-stack's among others), the monitoring stage makes one PrometheusRule per rule file
clusterproof ships, in ``NAMESPACE``, with the file's ``groups`` as they are and the labels the
site's operator selects rules by (its ``ruleSelector``: kube-prometheus-stack's ``release: <name>``,
say). The site's own Prometheus then evaluates them; clusterproof runs no Prometheus there.

Where it serves ``ServiceMonitor`` too, the stage makes one per scrape source the rules need that a
Prometheus Operator's stack does not scrape already (``monitor_targets``): each control plane's
kube-scheduler ``/metrics/resources``, the GPU scheduler's own metrics (labelled as the
scheduler's, for ``SchedulerMetricsDown``) and DCGM's exporter; the same Services and ports
clusterproof's own Prometheus finds them by on a kubeadm site (``cluster.targets``), with the same
labels as the PrometheusRules (kube-prometheus-stack selects both by ``release``).

Pure but for :func:`rule_files`, which reads the rule files it is given: rule files in (as parsed
YAML), manifests and report checks out. Touches nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import cluster, config, settings
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check

API_VERSION = "monitoring.coreos.com/v1"
RULE_KIND = "PrometheusRule"
# The namespace the sandbox's Prometheus identity lives in, too.
NAMESPACE = config.NAMESPACE
# Every PrometheusRule clusterproof makes carries it: what an earlier run made and this one does not
# want (a rule file removed) is found by it and removed.
RULES_LABEL = "clusterproof.io/rules"
RULES_LABEL_VALUE = "shipped"
MANAGED_BY = {"app.kubernetes.io/managed-by": "clusterproof", RULES_LABEL: RULES_LABEL_VALUE}
CHECK_ID = "monitoring/operator-rules"
MONITOR_KIND = "ServiceMonitor"
# The ServiceMonitors' own label, as RULES_LABEL is the PrometheusRules'.
MONITORS_LABEL = "clusterproof.io/monitors"
MONITORS_MANAGED_BY = {"app.kubernetes.io/managed-by": "clusterproof", MONITORS_LABEL: RULES_LABEL_VALUE}
MONITORS_CHECK_ID = "monitoring/operator-monitors"
MONITOR_PREFIX = "clusterproof-"


def label_problems(labels: Any, field: str) -> str:
    """What is wrong with ``labels`` for the PrometheusRules, as one message ("" when nothing):
    ``settings.label_problems``, and none of clusterproof's own labels."""
    return settings.said(settings.label_problems(labels, field, reserved={**MANAGED_BY, **MONITORS_MANAGED_BY}))


def rule_file_texts(rules_dir: str | Path) -> dict[str, str]:
    """The rule files (``*.yml``) of ``rules_dir``, by file name, as text; a folder without any is
    refused, naming it."""
    files = sorted(Path(rules_dir).glob("*.yml"))
    if not files:
        raise ValueError("rules_dir: expected a folder with rule files (*.yml), found none in %s" % rules_dir)
    return {path.name: path.read_text() for path in files}


def parse_rule_files(texts: Mapping[str, str], field: str = "rules") -> dict[str, dict[str, Any]]:
    """Rule files given as text (file name: text), parsed; none, a name that is no ``*.yml`` or
    text that is no YAML mapping is refused, naming it."""
    if not texts:
        raise ValueError("%s: expected rule files (name.yml: their text), found none" % field)
    parsed = {}
    for name, text in sorted(texts.items()):
        if not str(name).endswith(".yml"):
            raise ValueError("%s: expected rule files named *.yml, found %r" % (field, name))
        try:
            rules = yaml.safe_load(text) if isinstance(text, str) else None
        except yaml.YAMLError as error:
            raise ValueError("%s.%s: expected a rule file (YAML), found: %s" % (field, name, error)) from None
        if not isinstance(rules, dict):
            raise ValueError("%s.%s: expected a rule file (a mapping with groups), found %r" % (field, name, text))
        parsed[name] = rules
    return parsed


def rule_files(rules_dir: str | Path) -> dict[str, dict[str, Any]]:
    """The rule files (``*.yml``) of ``rules_dir``, by file name, parsed."""
    return parse_rule_files(rule_file_texts(rules_dir), "rules_dir")


def given_rule_files(rules: Mapping[str, str] | None, rules_dir: str | None) -> dict[str, dict[str, Any]]:
    """The rule files a module was given: as text (``rules``, read on the controller, so that a
    module on a site's host has them) or as the folder they are in on the module's host."""
    if rules:
        return parse_rule_files(rules)
    if rules_dir:
        return rule_files(rules_dir)
    raise ValueError("rules or rules_dir: expected the shipped rule files, found neither")


def rule_names(files: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every rule's name (its ``record`` or ``alert``) in ``files``."""
    return [
        rule.get("record") or rule.get("alert")
        for rules in files.values()
        for group in rules.get("groups") or ()
        for rule in group.get("rules") or ()
    ]


def rule_name(file_name: str) -> str:
    """The PrometheusRule of a rule file: ``clusterproof.rules.yml`` is ``clusterproof-rules``."""
    stem = file_name.rsplit("/", 1)[-1].removesuffix(".yml").removesuffix(".yaml")
    return re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")


def rule_objects(rule_files: Mapping[str, Mapping[str, Any]], labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """One PrometheusRule per rule file (name -> parsed YAML), its groups as the file has them, in
    ``NAMESPACE``, labelled with the site's ``labels`` and clusterproof's own."""
    return [
        {
            "apiVersion": API_VERSION,
            "kind": RULE_KIND,
            "metadata": {
                "name": rule_name(file_name),
                "namespace": NAMESPACE,
                "labels": {**dict(labels), **MANAGED_BY},
            },
            "spec": {"groups": list(rules.get("groups") or [])},
        }
        for file_name, rules in sorted(rule_files.items())
    ]


def namespace_object() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"app.kubernetes.io/managed-by": "clusterproof"}},
    }


def _groups(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return {group.get("name"): group for group in ((obj or {}).get("spec") or {}).get("groups") or ()}


def differences(wanted: Mapping[str, Any], found: Mapping[str, Any] | None) -> list[str]:
    """How ``found`` (the object as the API server holds it, or None) differs from ``wanted``: it is
    missing, a group is missing or not as shipped, or a label is missing or other."""
    name = "%s %s/%s" % (RULE_KIND, NAMESPACE, wanted["metadata"]["name"])
    if found is None:
        return ["%s is missing" % name]
    said = []
    want_groups, found_groups = _groups(wanted), _groups(found)
    for group, rules in want_groups.items():
        if group not in found_groups:
            said.append("%s has no group %s" % (name, group))
        elif found_groups[group] != rules:
            said.append("%s's group %s is not as shipped" % (name, group))
    return said + _label_differences(name, wanted, found)


def _objects_check(
    check_id: str,
    title: str,
    wanted: Sequence[Mapping[str, Any]],
    found: Mapping[str, Mapping[str, Any] | None],
    differences_of: Callable[[Mapping[str, Any], Mapping[str, Any] | None], list[str]],
    passed: str,
) -> Check:
    """A check that each of ``wanted`` is on the site as clusterproof makes it (``found`` by name)."""
    expected = {obj["metadata"]["name"]: "as shipped" for obj in wanted}
    observed = {}
    said = []
    for obj in wanted:
        name = obj["metadata"]["name"]
        differs = differences_of(obj, found.get(name))
        said += differs
        observed[name] = "missing" if found.get(name) is None else "differs" if differs else "as shipped"
    if said:
        return Check(
            check_id,
            title,
            "fail",
            expected,
            observed,
            "; ".join(said),
            action="run playbooks/monitoring.yml again (it makes the objects as shipped)",
        )
    return Check(check_id, title, "pass", expected, observed, passed)


def rules_check(
    wanted: Sequence[Mapping[str, Any]], found: Mapping[str, Mapping[str, Any] | None], prometheus_url: str
) -> Check:
    """``monitoring/operator-rules``: each shipped rule file is a PrometheusRule as shipped (``found``
    by name), for the site's Prometheus Operator to load."""
    where = (
        "the checks of Prometheus's numbers run against %s" % prometheus_url
        if prometheus_url
        else "name the site's Prometheus (clusterproof_monitoring_prometheus_url) to check its numbers too"
    )
    return _objects_check(
        CHECK_ID,
        "clusterproof's rules are PrometheusRules for the site's Prometheus Operator (%s)" % NAMESPACE,
        wanted,
        found,
        differences,
        "the site serves the Prometheus Operator's PrometheusRule: its Prometheus loads these objects; %s" % where,
    )


def monitors_check(wanted: Sequence[Mapping[str, Any]], found: Mapping[str, Mapping[str, Any] | None]) -> Check:
    """``monitoring/operator-monitors``: each scrape source the rules need is a ServiceMonitor as
    clusterproof makes it (``found`` by name), for the site's Prometheus Operator to scrape."""
    return _objects_check(
        MONITORS_CHECK_ID,
        "What the rules need is scraped through ServiceMonitors for the site's Prometheus Operator (%s)" % NAMESPACE,
        wanted,
        found,
        monitor_differences,
        "the site serves the Prometheus Operator's ServiceMonitor: its Prometheus scrapes %s"
        % ", ".join(obj["metadata"]["name"].removeprefix(MONITOR_PREFIX) for obj in wanted),
    )


def monitor_targets(site: cluster.ClusterMonitoring) -> list[config.DnsTarget]:
    """The scrape sources the rules need that a Prometheus Operator's stack does not scrape already:
    those clusterproof's own Prometheus finds by a Service's named port (kube-scheduler's pod
    resources, the GPU scheduler's own metrics, DCGM's exporter). The API server, kube-state-metrics
    and Prometheus itself are the stack's own jobs (docs/monitoring.md names what they must export)."""
    return [target for target in cluster.targets(site) if isinstance(target, config.DnsTarget)]


def monitor_name(job: str) -> str:
    """The ServiceMonitor of a job: ``kai-scheduler``'s is ``clusterproof-kai-scheduler``."""
    return MONITOR_PREFIX + job


def _endpoint(target: config.DnsTarget) -> dict[str, Any]:
    """How the operator's Prometheus scrapes ``target``: the Service's named port, as clusterproof's
    own Prometheus does (TLS, the pod's token), keeping the one Service (a selector of labels would
    depend on labels other charts set) and naming the job as clusterproof's rules know it."""
    endpoint: dict[str, Any] = {
        "port": target.port,
        "path": target.path,
        "scheme": "https" if target.tls else "http",
        "interval": "%ds" % config.SCRAPE_INTERVAL_SECONDS,
    }
    if target.tls:
        endpoint["tlsConfig"] = {"insecureSkipVerify": True} if target.insecure_tls else {"caFile": config.IN_POD_CA}
    if target.token:
        # The operator's Prometheus pod's own token, as kube-prometheus scrapes kube-scheduler.
        endpoint["bearerTokenFile"] = config.IN_POD_TOKEN
    endpoint["relabelings"] = [
        {"action": "keep", "sourceLabels": ["__meta_kubernetes_service_name"], "regex": target.service},
        {"action": "replace", "targetLabel": "job", "replacement": target.job},
        *(
            {"action": "replace", "targetLabel": label, "replacement": value}
            for label, value in sorted(target.labels.items())
        ),
    ]
    return endpoint


def monitor_objects(targets: Sequence[config.DnsTarget], labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """One ServiceMonitor per target, in ``NAMESPACE``, watching the target's namespace, labelled with
    the site's ``labels`` (its operator's ``serviceMonitorSelector``) and clusterproof's own."""
    return [
        {
            "apiVersion": API_VERSION,
            "kind": MONITOR_KIND,
            "metadata": {
                "name": monitor_name(target.job),
                "namespace": NAMESPACE,
                "labels": {**dict(labels), **MONITORS_MANAGED_BY},
            },
            "spec": {
                "namespaceSelector": {"matchNames": [target.namespace]},
                "selector": {},
                "endpoints": [_endpoint(target)],
            },
        }
        for target in targets
    ]


def monitor_services(site: cluster.ClusterMonitoring, gpu_operator: bool) -> list[dict[str, Any]]:
    """The headless Services the ServiceMonitors find kube-scheduler and DCGM's exporter by (as on a
    kubeadm site without the operator); DCGM's only where the GPU operator's namespace is."""
    return [cluster.scheduler_service(), *([cluster.dcgm_service(site)] if gpu_operator else [])]


def _holds(found: Any, wanted: Any) -> bool:
    """Whether ``found`` holds everything ``wanted`` says (a mapping may have more keys: the API
    server's defaults)."""
    if isinstance(wanted, Mapping):
        return isinstance(found, Mapping) and all(_holds(found.get(key), value) for key, value in wanted.items())
    if isinstance(wanted, list):
        return (
            isinstance(found, list)
            and len(found) == len(wanted)
            and all(_holds(item, value) for item, value in zip(found, wanted, strict=True))
        )
    return found == wanted


def _label_differences(name: str, wanted: Mapping[str, Any], found: Mapping[str, Any]) -> list[str]:
    found_labels = (found.get("metadata") or {}).get("labels") or {}
    return [
        "%s's label %s is %r, not %r" % (name, key, found_labels.get(key), value)
        for key, value in wanted["metadata"]["labels"].items()
        if found_labels.get(key) != value
    ]


def monitor_differences(wanted: Mapping[str, Any], found: Mapping[str, Any] | None) -> list[str]:
    """How ``found`` (the ServiceMonitor as the API server holds it, or None) differs from
    ``wanted``: it is missing, its spec is not as clusterproof makes it, or a label is missing or other."""
    name = "%s %s/%s" % (MONITOR_KIND, NAMESPACE, wanted["metadata"]["name"])
    if found is None:
        return ["%s is missing" % name]
    said = [] if _holds(found.get("spec"), wanted["spec"]) else ["%s is not as clusterproof makes it" % name]
    return said + _label_differences(name, wanted, found)
