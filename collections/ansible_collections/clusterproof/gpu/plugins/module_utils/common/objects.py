"""Comparing an object as clusterproof wants it with what the API server holds. Pure."""

from __future__ import annotations

from typing import Any


def is_subset(wanted: Any, actual: Any) -> bool:
    """Whether every field of ``wanted`` has the same value in ``actual`` (extra fields in
    ``actual``, such as those the API server or controllers add, do not count). Pure."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(is_subset(value, actual.get(key)) for key, value in wanted.items())
    if isinstance(wanted, list):
        return (
            isinstance(actual, list)
            and len(wanted) == len(actual)
            and all(is_subset(item, other) for item, other in zip(wanted, actual, strict=True))
        )
    if isinstance(wanted, bool) or isinstance(actual, bool):
        return wanted is actual
    if isinstance(wanted, (int, float)) and isinstance(actual, (int, float)):
        return float(wanted) == float(actual)
    return wanted == actual
