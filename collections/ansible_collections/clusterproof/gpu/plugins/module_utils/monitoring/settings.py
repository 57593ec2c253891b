"""The inventory's monitoring settings, checked: ``clusterproof_monitoring`` (the stage's switch, a
boolean the schema checks with the other switches) and ``clusterproof_monitoring_retention`` (how
long Prometheus keeps its samples).

Pure. Imports nothing of the collection. Touches nothing.
"""

from __future__ import annotations

import re
from typing import Any

SITE_VARIABLES = {
    "clusterproof_monitoring": "whether the monitoring stage installs Prometheus and its rules (false unless set true)",
    "clusterproof_monitoring_retention": "how long Prometheus keeps samples, a Prometheus duration (15d unless set)",
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
