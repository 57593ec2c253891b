"""The one waiter (common/wait.py): until what is looked at holds, or the time runs out."""

from __future__ import annotations

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.common import wait


class FakeTime:
    """A clock that only moves when the waiter sleeps; records each sleep."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def counting(values):
    """A look that returns ``values`` in turn (the last one from then on), counting its calls."""
    seen = list(values)
    calls = []

    def look():
        calls.append(len(calls))
        return seen[min(len(calls) - 1, len(seen) - 1)]

    return look, calls


def test_a_value_that_holds_at_once_returns_without_sleeping():
    fake = FakeTime()
    look, calls = counting([True])
    waited = wait.wait_until(look, timeout=10, interval=1, clock=fake.clock, sleep=fake.sleep)
    assert waited == wait.Waited(True, True, 0.0)
    assert not waited.timed_out
    assert (len(calls), fake.sleeps) == (1, [])


def test_looks_every_interval_until_it_holds_and_returns_the_value_that_held():
    fake = FakeTime()
    look, calls = counting([1, 2, 3, 5, 8])
    waited = wait.wait_until(look, lambda n: n >= 5, timeout=10, interval=0.5, clock=fake.clock, sleep=fake.sleep)
    assert (waited.value, waited.held, waited.waited_s) == (5, True, 1.5)
    assert fake.sleeps == [0.5, 0.5, 0.5]
    assert len(calls) == 4


def test_the_time_running_out_returns_the_last_value_seen_as_the_reason():
    fake = FakeTime()
    look, calls = counting(["starting", "starting", "still starting", "ready"])
    waited = wait.wait_until(look, lambda s: s == "ready", timeout=2, interval=1, clock=fake.clock, sleep=fake.sleep)
    assert (waited.value, waited.held, waited.timed_out) == ("still starting", False, True)
    # Looked at 0 and 1 s, then once more when the time is up: the reason is what was seen last.
    assert len(calls) == 3 and fake.sleeps == [1, 1]
    assert waited.waited_s == 2


def test_no_time_at_all_still_looks_once():
    fake = FakeTime()
    look, calls = counting([False])
    waited = wait.wait_until(look, timeout=0, interval=1, clock=fake.clock, sleep=fake.sleep)
    assert (waited.held, len(calls)) == (False, 1)
    fake.now = 0.0
    look, calls = counting([False, True])
    fake.sleeps.clear()
    waited = wait.wait_until(look, timeout=-5, interval=1, clock=fake.clock, sleep=fake.sleep)
    assert (waited.held, len(calls), fake.sleeps) == (False, 1, [])


def test_a_look_that_raises_ends_the_wait():
    fake = FakeTime()

    def look():
        if fake.now >= 101:
            raise RuntimeError("the process exited while starting")
        return False

    with pytest.raises(RuntimeError, match="exited while starting"):
        wait.wait_until(look, timeout=10, interval=1, clock=fake.clock, sleep=fake.sleep)
    assert fake.sleeps == [1]


def test_by_default_the_real_clock_is_used():
    looks = []
    waited = wait.wait_until(lambda: looks.append(1) or len(looks) >= 2, timeout=5, interval=0.001)
    assert waited.held and len(looks) == 2 and 0 <= waited.waited_s < 5
