"""The one naming rule of tenants: a Kubernetes DNS label. Pure.

Projects, quota-tree nodes, namespaces and scenario names all become names of namespaces or of
scheduler objects, so they all follow RFC 1123's label: lower-case letters, digits and ``-``,
starting and ending with a letter or digit, at most 63 characters.
"""

from __future__ import annotations

import re
from typing import Any

DNS_LABEL_MAX = 63
# Anchored, for checks that take a pattern (the inventory's); the length is part of it.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


def is_dns_label(name: Any, max_length: int = DNS_LABEL_MAX) -> bool:
    """Whether ``name`` is a DNS label of at most ``max_length`` characters (shorter where a
    prefix is added to it, as a scenario's namespaces are)."""
    return isinstance(name, str) and len(name) <= max_length and bool(DNS_LABEL.match(name))
