"""Whole numbers of steps, decided on the decimal written (common.steps): no float tolerance."""

from __future__ import annotations

from decimal import Decimal

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.common import steps
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads


@pytest.mark.parametrize("value", [0, 4, 0.25, 0.29, 0.57, 1.1, 99.99, Decimal("0.01")])
def test_hundredths_as_written_are_whole_even_where_binary_floats_miss(value):
    assert steps.whole_steps(value, 100)


@pytest.mark.parametrize("value", [1e-9, 4 + 1e-9, 0.001, 0.125, 0.500000001])
def test_anything_else_is_not_a_hundredth_however_close(value):
    assert not steps.whole_steps(value, 100)


def test_mib_are_exact_steps_of_a_gib_and_a_hair_less_is_refused():
    assert steps.whole_steps(0.0009765625, 1024) and steps.whole_steps(1.5, 1024)
    assert workloads.check_amount("w", "memory", 0.0009765625) == Decimal("0.0009765625")
    with pytest.raises(workloads.WorkloadError, match="workload w: memory: expected a number of GiB in MiB"):
        workloads.check_amount("w", "memory", 0.0009765626)
    with pytest.raises(workloads.WorkloadError, match="workload w: cpu: expected a number of CPU cores in thousandths"):
        workloads.check_amount("w", "cpu", 0.0005)
