"""How large a value is once its shared references are expanded. Pure.

Ansible loads the inventory itself, so a YAML anchor bomb there (``a: &a [x, x, ...]``,
``b: &b [*a, *a, ...]``, ...) reaches clusterproof as a small graph of shared lists that any walk,
``str()`` or template expands to billions of values. ``expanded_size`` counts what a walk would
visit without walking it: each distinct container is sized once (memoised by identity), so the
count takes time in proportion to the graph, not to its expansion, and stops at ``limit``.

May import: the standard library only. Touches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Limits that more than one layer checks (the inventory's schema, the modules' runner).
# Priorities and time limits become int32 fields of Kubernetes objects.
INT32_MAX = 2**31 - 1
# The sandbox's ports: base .. base + SANDBOX_PORTS - 1, all on loopback (sandbox/control_plane.py
# PORT_TABLE; a unit test keeps the two equal). Below 1024 needs root.
SANDBOX_PORTS = 27
PORT_MIN, PORT_MAX = 1024, 65535
PORT_BASE_MAX = PORT_MAX - SANDBOX_PORTS + 1

# Values (scalars and containers) one variable of the inventory may hold, its aliases expanded: far
# above any real site's projects or quota tree (a thousand projects of fifty users is 60,000).
MAX_VALUES = 100_000


def expanded_size(value: Any, limit: int = MAX_VALUES, memo: dict[int, int] | None = None) -> int:
    """The number of values in ``value`` counted as a walk would visit them (shared containers
    once per reference), or ``limit + 1`` as soon as it is known to exceed ``limit``.

    ``memo`` (identity of a container -> its size) may be shared between calls on values that
    share containers; the caller keeps those values alive meanwhile. A container that contains
    itself counts as over the limit."""
    memo = {} if memo is None else memo
    over = limit + 1
    # An explicit stack, not recursion: deep nesting must not raise RecursionError.
    # Entries: (container, its children, index of the next child, running total).
    if not isinstance(value, (Mapping, list, tuple, set, frozenset)):
        return 1
    in_progress: set[int] = set()
    stack: list[tuple[Any, list[Any], int, int]] = []

    def children(container: Any) -> list[Any]:
        if isinstance(container, Mapping):
            return [item for pair in container.items() for item in pair]
        return list(container)

    def push(container: Any) -> None:
        in_progress.add(id(container))
        stack.append((container, children(container), 0, 1))

    push(value)
    result = 0
    while stack:
        container, items, index, total = stack[-1]
        if total > limit:
            for entry in stack:
                memo[id(entry[0])] = over
            return over
        if index == len(items):
            stack.pop()
            in_progress.discard(id(container))
            memo[id(container)] = total
            result = total
            if stack:
                parent, parent_items, parent_index, parent_total = stack[-1]
                stack[-1] = (parent, parent_items, parent_index, parent_total + total)
            continue
        child = items[index]
        stack[-1] = (container, items, index + 1, total)
        if not isinstance(child, (Mapping, list, tuple, set, frozenset)):
            stack[-1] = (container, items, index + 1, total + 1)
        elif id(child) in memo:
            stack[-1] = (container, items, index + 1, total + memo[id(child)])
        elif id(child) in in_progress:
            return over  # a container inside itself expands without end
        else:
            push(child)
    return min(result, over)
