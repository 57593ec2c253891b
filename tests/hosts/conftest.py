"""GPU host suites: testinfra against the hosts of an inventory, never against this machine.

    .venv/bin/pytest tests/hosts --hosts='ansible://gpu_nodes' --ansible-inventory=inventories/<site> [--sudo]

Without --hosts every test here is skipped, with that reason: the machines that run the normal suite
(developers', CI) have no GPU, and the tests would otherwise run against them through testinfra's
local backend.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SKIP_REASON = (
    "GPU host suite: runs against an inventory's GPU hosts only, e.g. "
    "pytest tests/hosts --hosts='ansible://gpu_nodes' --ansible-inventory=inventories/<site>; no --hosts given"
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu_host: needs a GPU host, reached through --hosts (tests/hosts)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if HERE in item.path.parents]
    for item in ours:
        item.add_marker(pytest.mark.gpu_host)
        if not config.getoption("hosts", default=None):
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))
