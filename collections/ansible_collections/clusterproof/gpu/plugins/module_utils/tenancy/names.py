"""The one naming rule of tenants: a Kubernetes DNS label; and Kubernetes' other names an inventory
declares (object names as DNS subdomains, label keys and values). Pure.

Projects, quota-tree nodes, namespaces and scenario names all become names of namespaces or of
scheduler objects, so they all follow RFC 1123's label: lower-case letters, digits and ``-``,
starting and ending with a letter or digit, at most 63 characters. Nodes' names, node labels and
taints, and the monitoring's rule labels follow apimachinery's validation, below.
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


# Kubernetes' syntax (apimachinery validation), matched whole (fullmatch: no trailing newline slips
# through a "$"); the lengths are checked beside the patterns.
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*")
DNS_SUBDOMAIN_MAX = 253
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def is_dns_subdomain(value: Any) -> bool:
    """A Kubernetes object name such as a node's: lower-case DNS labels joined by dots, at most 253."""
    return isinstance(value, str) and len(value) <= DNS_SUBDOMAIN_MAX and bool(_DNS_SUBDOMAIN.fullmatch(value))


def is_label_key(value: Any) -> bool:
    """A label (or taint) key: ``[prefix/]name``, the prefix a DNS subdomain, the name at most 63."""
    if not isinstance(value, str):
        return False
    prefix, slash, name = value.rpartition("/")
    return (not slash or is_dns_subdomain(prefix)) and bool(_LABEL_NAME.fullmatch(name))


def is_label_value(value: Any) -> bool:
    """A label (or taint) value: empty, or at most 63 of [A-Za-z0-9_.-], alphanumeric at both ends."""
    return isinstance(value, str) and bool(_LABEL_VALUE.fullmatch(value))
