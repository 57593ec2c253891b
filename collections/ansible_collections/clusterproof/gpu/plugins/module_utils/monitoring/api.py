"""Prometheus's HTTP API, as the validator reads it: active targets, loaded rules, instant and range
queries.

Standard library only (urllib): the validator runs on the controller, beside Prometheus on the
sandbox. What it touches: Prometheus's API, read only.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class PrometheusError(RuntimeError):
    """Prometheus could not be asked, or answered with an error; the message says which request."""


def _get(base_url: str, path: str, params: dict[str, str] | None = None, timeout: float = 10.0) -> Any:
    url = base_url.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - an http(s) URL we were given
            body = json.load(response)
    except urllib.error.HTTPError as error:
        detail = error.read()[:300].decode(errors="replace")
        raise PrometheusError("GET %s: HTTP %d %s" % (url, error.code, detail)) from error
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise PrometheusError("GET %s: %s" % (url, getattr(error, "reason", error))) from error
    if body.get("status") != "success":
        raise PrometheusError("GET %s: %s %s" % (url, body.get("errorType", ""), body.get("error", body)))
    return body["data"]


def active_targets(base_url: str) -> list[dict[str, Any]]:
    """Every active target: labels (job, instance, ...), health, lastError, lastScrape, scrapeUrl."""
    return list(_get(base_url, "/api/v1/targets", {"state": "active"})["activeTargets"])


def rule_groups(base_url: str) -> list[dict[str, Any]]:
    """The loaded rule groups, each with its rules (name, health, lastError)."""
    return list(_get(base_url, "/api/v1/rules")["groups"])


def query(base_url: str, expr: str) -> list[tuple[dict[str, str], float]]:
    """An instant query's samples: (labels, value)."""
    data = _get(base_url, "/api/v1/query", {"query": expr})
    if data.get("resultType") != "vector":
        raise PrometheusError("query %r: expected a vector, found %s" % (expr, data.get("resultType")))
    return [(sample["metric"], float(sample["value"][1])) for sample in data["result"]]


def query_range(
    base_url: str, expr: str, start: float, end: float, step: float
) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    """A range query's series from ``start`` to ``end`` (seconds since the epoch) every ``step``
    seconds: (labels, [(time, value), ...])."""
    params = {"query": expr, "start": "%.3f" % start, "end": "%.3f" % end, "step": "%g" % step}
    data = _get(base_url, "/api/v1/query_range", params)
    if data.get("resultType") != "matrix":
        raise PrometheusError("query_range %r: expected a matrix, found %s" % (expr, data.get("resultType")))
    return [
        (series["metric"], [(float(t), float(value)) for t, value in series["values"]]) for series in data["result"]
    ]


def by_label(samples: list[tuple[dict[str, str], float]], label: str) -> dict[str, float]:
    """Samples keyed by one label's value (a sample without it is left out)."""
    return {labels[label]: value for labels, value in samples if label in labels}
