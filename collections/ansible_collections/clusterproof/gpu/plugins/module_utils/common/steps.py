"""Whether an amount is a whole number of steps (hundredths of a GPU, millicores, MiB in GiB),
decided exactly on the decimal the admin wrote, never within a float tolerance: 0.29 is 29
hundredths although 0.29 * 100 is 28.999999999999996 in binary, and 1e-9 is no hundredth however
close it is to zero.

May import: the standard library. Touches nothing.
"""

from __future__ import annotations

import decimal
from typing import Any


def as_written(value: Any) -> decimal.Decimal:
    """The decimal an int, a float (its shortest repr, which is what YAML or the admin wrote) or a
    Decimal stands for."""
    if isinstance(value, decimal.Decimal):
        return value
    if isinstance(value, float):
        return decimal.Decimal(repr(value))
    return decimal.Decimal(int(value))


def whole_steps(value: Any, per: int) -> bool:
    """Whether ``value`` is a whole number of 1/``per`` (``per`` = 100: hundredths)."""
    return (as_written(value) * per) % 1 == 0
