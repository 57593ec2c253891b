"""Prometheus's HTTP API, as the validator reads it: active targets, loaded rules, instant and range
queries.

Prometheus is named by its URL (urllib: the sandbox's, beside the controller, or a site's own), or
by an ``Endpoint`` whose ``fetch`` reaches it otherwise: clusterproof's Prometheus on a kubeadm
site, through the API server's proxy (the client layer's ``service_proxy``). Standard library only.
What it touches: Prometheus's API, read only.
"""

from __future__ import annotations

import dataclasses
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

# GET a path of Prometheus's with a query: the body, or an exception whose message says why not.
Fetch = Callable[[str, dict[str, str], float], bytes]


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """A Prometheus reached by ``fetch``; ``address``: where it is, as the report names it."""

    address: str
    fetch: Fetch

    def __str__(self) -> str:
        return self.address


Prometheus = str | Endpoint


def endpoint(url: str, fetch: Fetch | None) -> Prometheus:
    """Prometheus at ``url``, fetched from by ``fetch`` where given (else by urllib)."""
    return Endpoint(url, fetch) if fetch else url


class PrometheusError(RuntimeError):
    """Prometheus could not be asked, or answered with an error; the message says which request."""


def _get(base: Prometheus, path: str, params: dict[str, str] | None = None, timeout: float = 10.0) -> Any:
    if isinstance(base, Endpoint):
        url = base.address + path
        try:
            body = json.loads(base.fetch(path, params or {}, timeout))
        except (RuntimeError, OSError, ValueError) as error:
            raise PrometheusError("GET %s: %s" % (url, error)) from error
    else:
        url = base.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
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


def active_targets(base_url: Prometheus) -> list[dict[str, Any]]:
    """Every active target: labels (job, instance, ...), health, lastError, lastScrape, scrapeUrl."""
    return list(_get(base_url, "/api/v1/targets", {"state": "active"})["activeTargets"])


def rule_groups(base_url: Prometheus) -> list[dict[str, Any]]:
    """The loaded rule groups, each with its rules (name, health, lastError)."""
    return list(_get(base_url, "/api/v1/rules")["groups"])


def query(base_url: Prometheus, expr: str) -> list[tuple[dict[str, str], float]]:
    """An instant query's samples: (labels, value)."""
    data = _get(base_url, "/api/v1/query", {"query": expr})
    if data.get("resultType") != "vector":
        raise PrometheusError("query %r: expected a vector, found %s" % (expr, data.get("resultType")))
    return [(sample["metric"], float(sample["value"][1])) for sample in data["result"]]


def query_range(
    base_url: Prometheus, expr: str, start: float, end: float, step: float
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
