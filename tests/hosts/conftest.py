"""GPU host suites: testinfra against the hosts of an inventory, never against this machine.

    .venv/bin/pytest tests/hosts --hosts='ansible://gpu_nodes' --ansible-inventory=inventories/<site> [--sudo]

On a GPU machine itself, give it an inventory that declares that machine as it is, with Ansible's
local connection (what to expect always comes from an inventory, so the same suite checks a site and
a lone machine); tests/unit/fixtures/gpu/testinfra-h100-inventory.yml is the one it ran with on an H100:

    pytest tests/hosts --hosts='ansible://gpu_nodes' --ansible-inventory=tests/unit/fixtures/gpu/testinfra-h100-inventory.yml

ansible-inventory must be on PATH (testinfra calls it): .venv/bin first, or the bin directory of
wherever ansible-core is installed. In a site run, the gpu_host_tests role runs this suite per GPU host
and puts the results into the site report.

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
