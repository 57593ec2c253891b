"""A declared field that breaks a rule: the field, what was expected, the value found. Pure.

Every declaration check (a project's quotas, the GPU device layer, ...) returns these, so that the
inventory's error messages name the field, the expectation and the value the same way everywhere.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class FieldProblem:
    """``field``: where in the declaration; ``expected``: what the rule wants; ``found``: the value."""

    field: str
    expected: str
    found: Any
