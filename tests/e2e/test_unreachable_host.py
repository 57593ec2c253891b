"""A GPU host that cannot be reached, or that fails its tests, ends up in the report as failed checks
with the reason; it neither ends the playbook before the report nor vanishes from it.

validate.yml on an existing-mode inventory over the session's sandbox (its KWOK nodes dgx1-1 and
dgx1-2 are the declared GPU nodes), without the scheduler stage: dgx1-1 is reached at a name that
never resolves (.invalid, RFC 6761); dgx1-2 is this machine (local connection), which has no NVIDIA
driver, so the GPU host suite really runs there through testinfra and its driver tests fail, and
its passive GPU health is read there and lists none of its declared GPUs.
"""

from __future__ import annotations

import json

import pytest

from ..conftest import HOST_SUITE_TESTS
from .conftest import run_playbook

pytestmark = pytest.mark.sandbox
SUITE_TESTS = set(HOST_SUITE_TESTS)


def _checks_of(report: dict, section_id: str) -> dict[str, dict]:
    sections = {section["id"]: section for section in report["sections"]}
    assert section_id in sections, f"no section {section_id} in the report: {sorted(sections)}"
    return {check["id"].rsplit("/", 1)[1]: check for check in sections[section_id]["checks"]}


def test_unreachable_and_failing_gpu_hosts_become_failed_checks_in_a_written_report(sandbox, tmp_path):
    reports = tmp_path / "reports"
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    kube_control_plane:\n      hosts:\n        localhost:\n"
        "          ansible_connection: local\n          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
        "    gpu_nodes:\n      hosts:\n"
        "        dgx1-1:\n          gpu_count: 8\n          ansible_host: dgx1-1.invalid\n"
        "        dgx1-2:\n          gpu_count: 8\n          ansible_connection: local\n"
        "          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
        # The gpu_* variables of the roles, per host: the inventory check leaves them to the roles.
        # No container test (on a machine with docker it would pull an image), two quick benchmarks.
        "          gpu_host_tests_pytest_args: ['-k', 'not a_container_sees_the_gpus']\n"
        "          gpu_benchmark_benchmarks: [copy, dcgm]\n"
        "  vars:\n    clusterproof_site_name: unreachable-site\n    clusterproof_cluster_mode: existing\n"
        "    clusterproof_scheduler: none\n"
        "    clusterproof_kubeconfig: %s\n    clusterproof_reports_dir: %s\n" % (sandbox.kubeconfig, reports)
    )
    run = run_playbook("playbooks/validate.yml", inventory=inventory, timeout=600)

    # site_report fails the run, after writing the report; nothing before it ended the playbook.
    assert run.returncode != 0
    assert "Write the site validation report" in run.output, run.tail(4000)
    assert run.recap("dgx1-1")["unreachable"] == 0, "the unreachable host must be recorded, not dropped"
    assert run.recap("dgx1-1")["rescued"] == 3, run.tail(4000)
    report = json.loads((reports / "unreachable-site" / "latest" / "report.json").read_text())
    assert report["verdict"] == "fail"

    # The cluster side of dgx1-1 (its KWOK node) is fine; only the host could not be reached.
    nodes = {check["id"]: check for section in report["sections"] for check in section["checks"]}
    assert nodes["gpu-nodes/dgx1-1/present"]["status"] == "pass"

    (health,) = _checks_of(report, "gpu-health-dgx1-1").values()
    assert (health["status"], health["category"]) == ("fail", "hardware"), health
    assert health["message"].startswith("dgx1-1 could not be reached: "), health
    assert health["action"].startswith("reach the node"), health

    benchmarks = _checks_of(report, "gpu-benchmark-dgx1-1")
    assert benchmarks, "the unreachable host's benchmarks are missing from the report"
    for check in benchmarks.values():
        assert check["status"] == "fail", check
        assert check["message"].startswith("dgx1-1 could not be reached: "), check
        assert "dgx1-1.invalid" in check["message"], check

    host_tests = _checks_of(report, "host-tests-dgx1-1")
    assert set(host_tests) == SUITE_TESTS
    for check in host_tests.values():
        assert check["status"] == "fail", check
        assert check["observed"] == "not run"
        assert check["message"].startswith("dgx1-1 could not be reached: "), check
        assert "dgx1-1.invalid" in check["message"], check

    # dgx1-2 was reached: the suite ran there for real, one check per test, and this machine has no
    # NVIDIA driver, so the driver test fails with the suite's own message.
    ran = _checks_of(report, "host-tests-dgx1-2")
    assert set(ran) == SUITE_TESTS - {"a-container-sees-the-gpus"}
    assert all(check["observed"] != "not run" for check in ran.values()), ran
    driver = ran["driver-is-loaded-and-of-the-pinned-branch"]
    assert driver["status"] == "fail"
    assert driver["message"].startswith("the nvidia kernel module is not loaded on dgx1-2"), driver
    assert set(_checks_of(report, "gpu-benchmark-dgx1-2")) == {"memory-bandwidth", "dcgm-diag"}
    # Its passive health was read for real too: the driver lists none of the 8 GPUs declared.
    visible = _checks_of(report, "gpu-health-dgx1-2")["gpus-visible"]
    assert (visible["status"], visible["category"], visible["observed"]) == ("fail", "capacity", 0), visible
    assert "nvidia-smi not found on PATH" in visible["message"], visible
