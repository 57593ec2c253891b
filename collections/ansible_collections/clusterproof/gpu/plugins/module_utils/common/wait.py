"""Waiting in one place: look until what is looked at holds, or the time runs out.

:func:`wait_until` calls ``look`` every ``interval`` seconds until ``holds`` says yes of what it
returned, or ``timeout`` seconds have passed, and returns a :class:`Waited`: the last value seen,
whether it held, and how long the wait took. When the time runs out the last value seen is the
reason, and the caller words it (its own error, its own message): a wait never guesses what a
caller's timeout means. ``look`` is always called at least once, and once more after the last
sleep before the wait gives up, so that the answer is never older than one interval. An exception
from ``look`` ends the wait (a process that died while being waited for).

Pure apart from the time: ``clock`` and ``sleep`` default to ``time.monotonic`` and ``time.sleep``,
looked up at each call; a unit test passes its own.

May import: the standard library only. Touches nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Waited(Generic[T]):
    """How a wait ended: ``value`` is what ``look`` returned last; ``held`` is False when the time
    ran out first (``value`` then says why); ``waited_s`` is the time from the start to the end."""

    value: T
    held: bool
    waited_s: float

    @property
    def timed_out(self) -> bool:
        return not self.held


def wait_until(
    look: Callable[[], T],
    holds: Callable[[T], object] = bool,
    *,
    timeout: float,
    interval: float,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], object] | None = None,
) -> Waited[T]:
    """Call ``look`` every ``interval`` seconds until ``holds(value)`` is true (by default: the
    value itself is true), or ``timeout`` seconds have passed since the call; see the module."""
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    started = clock()
    deadline = started + timeout
    while True:
        value = look()
        if holds(value):
            return Waited(value, True, clock() - started)
        now = clock()
        if now >= deadline:
            return Waited(value, False, now - started)
        sleep(interval)
