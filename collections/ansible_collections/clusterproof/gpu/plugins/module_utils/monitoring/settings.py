"""The inventory's monitoring settings, checked: ``clusterproof_monitoring`` (the stage's switch, a
boolean the schema checks with the other switches), ``clusterproof_monitoring_retention`` (how
long Prometheus keeps its samples), ``clusterproof_monitoring_storage_size`` (its claim, on a
kubeadm site), and for a site that runs the Prometheus Operator
``clusterproof_monitoring_rule_labels`` (the labels its operator selects rules by) and
``clusterproof_monitoring_prometheus_url`` (its Prometheus, for the validator's checks).

Pure. Imports ``tenancy.names`` (Kubernetes' label syntax, which the inventory's node labels follow too).
Touches nothing.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Collection, Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import names

SITE_VARIABLES = {
    "clusterproof_monitoring": "whether the monitoring stage installs Prometheus and its rules (false unless set true)",
    "clusterproof_monitoring_retention": "how long Prometheus keeps samples, a Prometheus duration (15d unless set)",
    "clusterproof_monitoring_rule_labels": "labels for the PrometheusRules, those the site's Prometheus Operator "
    "selects rules by (none unless set)",
    "clusterproof_monitoring_prometheus_url": "the site's own Prometheus (http or https URL) the validator checks, "
    "where clusterproof runs none (the sandbox's unless set)",
    "clusterproof_monitoring_storage_size": "the size of Prometheus's claim on the default storage class, on a kubeadm "
    "site (10Gi unless set)",
    "clusterproof_monitoring_gpu_operator_namespace": "the namespace the GPU operator (and DCGM's exporter) runs in, "
    "where someone else installed it (gpu-operator unless set, where clusterproof installs it)",
}
RETENTION_DEFAULT = "15d"
# Prometheus's duration syntax (its model.ParseDuration): units from years down, each at most once, in order.
_DURATION = re.compile(r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
_UNIT_SECONDS = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)
# The GPULost rule compares a node's GPUs with the last hour's: a shorter retention would blind it.
RETENTION_LEAST_SECONDS = 3600


def duration_seconds(text: str) -> float | None:
    """Seconds of a Prometheus duration ("15d", "1w2d", "90m"), or None if it is not one."""
    match = _DURATION.fullmatch(text)
    if not text or match is None:
        return None
    return sum(int(amount) * unit for amount, unit in zip(match.groups(), _UNIT_SECONDS, strict=True) if amount)


RETENTION_EXPECTED = "a Prometheus duration of at least 1h, such as 15d, 12h or 2w"


def retention_problem(value: Any) -> str | None:
    """What was expected, when ``value`` is no retention Prometheus accepts of at least an hour."""
    seconds = duration_seconds(value) if isinstance(value, str) else None
    if seconds is None or seconds < RETENTION_LEAST_SECONDS:
        return RETENTION_EXPECTED
    return None


def namespace_problem(value: Any) -> str | None:
    """What was expected, when ``value`` is no Kubernetes namespace name."""
    return None if names.is_dns_label(value) else "a namespace name (a DNS label: lower-case letters, digits and '-')"


def label_problems(labels: Any, field: str, reserved: Collection[str] = ()) -> list[tuple[str, str, Any]]:
    """What is wrong with ``labels`` as a Kubernetes object's labels (a mapping of label names to
    values, none of them ``reserved``): (the field or its entry, what was expected, what was found)."""
    if not isinstance(labels, Mapping):
        return [(field, "a mapping of label names to values", labels)]
    problems = []
    for key, value in labels.items():
        if not names.is_label_key(key):
            problems.append((field, "label names (name or prefix/name, the name 63 characters at most)", key))
        elif key in reserved:
            problems.append((field, "labels of the site's own, not clusterproof's", key))
        elif not names.is_label_value(value):
            expected = "a label value (at most 63 letters, digits, '-', '_' or '.')"
            problems.append(("%s.%s" % (field, key), expected, value))
    return problems


def said(problems: list[tuple[str, str, Any]]) -> str:
    """Problems as one message: "<field>: expected <what>, found <what>; ..."."""
    return "; ".join("%s: expected %s, found %r" % problem for problem in problems)


PROMETHEUS_URL_EXPECTED = "an http or https URL of the site's Prometheus, such as http://prometheus.example:9090"


def prometheus_url_problem(value: Any) -> str | None:
    """What was expected, when ``value`` is not an http(s) URL with a host."""
    if not isinstance(value, str):
        return PROMETHEUS_URL_EXPECTED
    parsed = urllib.parse.urlsplit(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return PROMETHEUS_URL_EXPECTED
    return None


STORAGE_SIZE_EXPECTED = "a storage size in binary units of at least 1Gi, such as 10Gi or 1Ti"
# A Kubernetes quantity in the binary units a claim is written in.
_STORAGE_SIZE = re.compile(r"([1-9][0-9]*)(Gi|Ti)")


def storage_size_problem(value: Any) -> str | None:
    """What was expected, when ``value`` is no claim size of at least a GiB (10Gi, 1Ti)."""
    if not isinstance(value, str) or _STORAGE_SIZE.fullmatch(value) is None:
        return STORAGE_SIZE_EXPECTED
    return None
