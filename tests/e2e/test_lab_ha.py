"""A lab site whose control plane survives a host (issue 34, docs/ha.md): three control planes behind
the virtual IP clusterproof installs (keepalived and haproxy on each, ``clusterproof_control_plane_vip``),
stacked etcd with three members, two workers joined through the endpoint, the site's stages on it.

Then the faults, each a failed check with its cause and never a hang, and the next run clean: the
control plane holding the VIP powered off (the API answers again through the VIP within the time
docs/ha.md states; the validation names the missing member, etcd keeps its quorum; the host powered
on with its disk, the next validation passes); etcd restored from the last snapshot after a
project's namespace and queue were deleted (the project is back, the validation passes); and, last as
it changes the site, the VIP's holder crashed for good (its machine killed, no word to its peers) and
removed by force, its etcd member with it (issue 33): the site validates without it.

Its own lab of five hosts on a bridge and subnet of its own (tests/e2e/lab_ha.py), installed once, in an
xdist group of its own.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import build
from tests.e2e import lab_etcd_steps, lab_ha, lab_site
from tests.e2e.conftest import run_playbook
from tests.e2e.lab_ha import CONTROL_PLANE, ENDPOINT, PLAYBOOKS, HaLab

# Run on demand (CLUSTERPROOF_LAB_HA=1), not yet in CI: in the lab group it would add its 23 minutes to
# CI's longest group, and started beside that group's labs, every lab's up failed (docs/ha.md, "Tests").
pytestmark = [
    pytest.mark.xdist_group("lab-ha"),
    pytest.mark.skipif(
        not os.environ.get("CLUSTERPROOF_LAB_HA"),
        reason="the five-host HA lab runs with CLUSTERPROOF_LAB_HA=1 (about 23 minutes; not in CI yet, docs/ha.md)",
    ),
]

# docs/ha.md: the API answers through the VIP again within this many seconds of its holder going
# (keepalived's three missed adverts at one a second, then haproxy's health checks of the backends).
FAILOVER_BOUND_S = 20


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HaLab]:
    layout = build.Layout(build.default_cache(), build.default_cache() / "out")
    build.build(layout, progress=lambda message: print("[bundle]", message, flush=True))
    site = HaLab(tmp_path_factory.mktemp("ha-lab"), layout.out)
    available_before = lab_ha.memory_available_mib()
    try:
        lab_ha.install(site, say=lambda line: print(line, flush=True))
        site.first_report = site.report()
        held = available_before - lab_ha.memory_available_mib()
        print("[ha lab] memory the five installed hosts hold: %d MiB (%d MiB a host)" % (held, held / 5), flush=True)
        yield site
    finally:
        lab_ha.bring_down(site)


def test_three_control_planes_hold_etcd_and_one_of_them_the_vip(lab: HaLab) -> None:
    assert set(lab_ha.ADDRESSES) <= lab_ha.nodes_ready(lab)
    assert len(lab.vip_holders()) == 1, lab.vip_holders()
    # Every kubeconfig kubeadm wrote goes through the endpoint, the workers' too.
    for host in ("ha-cp-2", "ha-worker-1"):
        config = "admin.conf" if host in CONTROL_PLANE else "kubelet.conf"
        server = lab.ssh(host, "grep -h 'server:' /etc/kubernetes/%s" % config).stdout.split()
        assert server == ["server:", ENDPOINT], (host, server)
    checks = lab_site.report_checks(lab.first_report)
    control_plane = {key: check for key, check in checks.items() if key.startswith("control-plane/")}
    assert control_plane and all(check["status"] == "pass" for check in control_plane.values()), control_plane
    members = checks["control-plane/etcd-members"]
    assert all(host in json.dumps(members) for host in CONTROL_PLANE), members
    assert lab_ha.api_answers()


def test_a_second_cluster_run_changes_nothing_on_the_endpoint(lab: HaLab) -> None:
    again = run_playbook(str(PLAYBOOKS / "cluster.yml"), inventory=lab.inventory, timeout=900)
    assert again.returncode == 0, again.tail(4000)
    assert again.changed_tasks() == {}


def test_the_vip_s_holder_powered_off_the_api_answers_again_and_the_report_names_the_missing_member(
    lab: HaLab,
) -> None:
    holder, failover_s = lab_ha.failover(lab, "powered off")
    print(
        "[ha lab] the VIP's holder %s powered off: the API answered through the VIP after %.1f s" % (holder, failover_s)
    )
    try:
        assert failover_s <= FAILOVER_BOUND_S, failover_s
        assert len(lab.vip_holders()) == 1
        # The probes' pods go to the nodes Ready at the start: once the node controller says so.
        lab_ha.wait_for("%s NotReady" % holder, lambda: holder not in lab_ha.nodes_ready(lab), timeout=180)
        started = time.monotonic()
        validated = run_playbook(
            str(PLAYBOOKS / "validate.yml"), *lab_site.quick_validation(), inventory=lab.inventory, timeout=900
        )
        print("[ha lab] validation with %s off: %.0f s" % (holder, time.monotonic() - started))
        assert validated.returncode != 0
        checks = lab_site.report_checks(lab.report())
        # The control plane's section names the host that went; etcd keeps its quorum, the endpoint answers.
        # (Not asserted: that every other check passes. With a control plane gone, the isolation reach
        # probe's pods failed their DNS lookups, "bad address", on the first run of this test: issue 34's
        # note.)
        assert checks["control-plane/%s/reached" % holder]["status"] == "fail"
        members = checks["control-plane/etcd-members"]
        assert members["status"] == "fail" and holder in members["message"], members
        assert checks["control-plane/etcd-quorum"]["status"] == "pass", checks["control-plane/etcd-quorum"]
        assert checks["control-plane/endpoint"]["status"] == "pass"
    finally:
        back = lab_ha.power_on_and_settle(lab, holder)
        print(
            "[ha lab] %s powered on: Ready %.0f s, its etcd and API server %.0f s, the workloads %.0f s"
            % (holder, *back)
        )
    again = run_playbook(
        str(PLAYBOOKS / "validate.yml"), *lab_site.quick_validation(), inventory=lab.inventory, timeout=900
    )
    assert again.returncode == 0, again.tail(4000)
    assert lab.report()["verdict"] == "pass"


def test_a_project_deleted_by_mistake_comes_back_with_the_latest_etcd_snapshot(lab: HaLab, tmp_path: Path) -> None:
    figures = lab_etcd_steps.backup_delete_restore_validate(lab, tmp_path / "etcd", lab_site.quick_validation())
    print("[ha lab] etcd on three members: %s" % ", ".join("%s %.0f s" % item for item in figures.items()))


def test_the_vip_s_holder_crashed_for_good_is_removed_by_force_and_the_site_validates_without_it(lab: HaLab) -> None:
    """Last: the site has two control planes after it."""
    holder, failover_s = lab_ha.failover(lab, "power cut")
    print("[ha lab] the VIP's holder %s crashed: the API answered through the VIP after %.1f s" % (holder, failover_s))
    assert failover_s <= FAILOVER_BOUND_S, failover_s
    lab_ha.wait_for("%s NotReady" % holder, lambda: holder not in lab_ha.nodes_ready(lab), timeout=180)

    started = time.monotonic()

    def remove():  # its host is gone: SSH gives up after 5 s
        arguments = ("-e", "node=" + holder, "-e", "ansible_ssh_timeout=5")
        return run_playbook(str(PLAYBOOKS / "remove_node.yml"), *arguments, inventory=lab.inventory)

    removed = remove()
    print("[ha lab] %s removed by force: %.0f s" % (holder, time.monotonic() - started))
    assert removed.returncode == 0, removed.tail(4000)
    assert "is removed by force" in removed.output
    again = remove()
    assert again.returncode == 0 and again.changed_tasks() == {}, again.tail(3000)

    remaining = {host: address for host, address in CONTROL_PLANE.items() if host != holder}
    without = lab.declare("hosts-without-%s.yml" % holder, remaining)
    started = time.monotonic()
    validated = run_playbook(
        str(PLAYBOOKS / "validate.yml"), *lab_site.quick_validation(), inventory=without, timeout=900
    )
    print("[ha lab] validation with two control planes: %.0f s" % (time.monotonic() - started))
    assert validated.returncode == 0, validated.tail(5000)
    report = lab.report()
    assert report["verdict"] == "pass", [c for s in report["sections"] for c in s["checks"] if c["status"] == "fail"]
    # "What changed" names the control plane removed as declared (its etcd member gone, its host out
    # of the inventory), no regression; no GPU node is gone.
    assert report["changes"]["nodes_gone"] == [], report["changes"]
    assert report["changes"]["control_planes_removed"] == [holder], report["changes"]
    assert report["changes"]["control_planes_gone"] == [], report["changes"]
    # etcd has the two members that stay, each answering: the crashed one's member went with its removal.
    members = lab_site.report_checks(report)["control-plane/etcd-members"]
    assert members["status"] == "pass" and holder not in json.dumps(members), members
    assert all(host in json.dumps(members) for host in remaining), members
