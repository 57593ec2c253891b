"""Fixtures the module_utils tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import prometheus_package


@pytest.fixture(scope="session")
def promtool() -> Path:
    """The pinned promtool (Debian's package, fetched into the monitoring cache by the code the stage
    uses). Where it cannot be had, the tests that need it fail saying why; they do not skip."""
    try:
        programs, _ = prometheus_package.fetch()
    except prometheus_package.PrometheusFetchError as error:
        pytest.fail("the pinned promtool could not be had: %s" % error)
    return programs.promtool
