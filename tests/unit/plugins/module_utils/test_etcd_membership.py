"""The removal of a stacked etcd member from a control plane that stays (maintenance/etcd_membership.py
and the etcd_member module): the decision on what a real three-member etcd v3.6.8 answered
(fixtures/control_plane/etcd/three_members), the requests made, check mode, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import control_plane_status as status
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import etcd_membership
from tests.conftest import run_module_file

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "control_plane" / "etcd" / "three_members"
MODULE = (
    Path(__file__).resolve().parents[4]
    / "collections/ansible_collections/clusterproof/gpu/plugins/modules/etcd_member.py"
)
URL = "https://127.0.0.1:23791"
# The recorded members' ids (three_members/member_list.json); cp-1 answers (status_cp-1.json).
IDS = {"cp-1": "4622673857392870152", "cp-2": "7468050939385520108", "cp-3": "7793697766324755982"}


class Etcd:
    """cp-1's gateway as recorded; a removal takes the member out of later lists."""

    def __init__(self) -> None:
        self.listing = json.loads((RECORDED / "member_list.json").read_text())
        self.requests: list[tuple[str, dict | None]] = []

    def __call__(self, url: str, body: bytes | None = None) -> str:
        self.requests.append((url.removeprefix(URL), json.loads(body) if body else None))
        if url == URL + "/v3/cluster/member/list":
            return json.dumps(self.listing)
        if url == URL + "/v3/maintenance/status":
            return (RECORDED / "status_cp-1.json").read_text()
        if url == URL + "/v3/cluster/member/remove":
            removed = json.loads(body)["ID"]
            self.listing["members"] = [m for m in self.listing["members"] if m["ID"] != removed]
            return json.dumps({"members": self.listing["members"]})
        raise status.ReadFailed("%s: timed out" % url)


def members() -> list[dict]:
    return status.members_of((RECORDED / "member_list.json").read_text())


def test_the_member_named_is_found_by_its_name():
    assert etcd_membership.member_to_remove(members(), "cp-3", IDS["cp-1"]) == IDS["cp-3"]


def test_a_name_no_member_has_is_nothing_to_remove():
    assert etcd_membership.member_to_remove(members(), "cp-9", IDS["cp-1"]) is None


def test_the_member_of_the_host_that_removes_is_refused_with_the_field_and_what_to_do():
    with pytest.raises(ValueError, match=r"^name: 'cp-1' is the etcd member of the host this runs on"):
        etcd_membership.member_to_remove(members(), "cp-1", IDS["cp-1"])


def test_etcd_s_last_member_is_refused():
    (last,) = [m for m in members() if m["name"] == "cp-2"]
    with pytest.raises(ValueError, match="etcd's last member"):
        etcd_membership.member_to_remove([last], "cp-2", IDS["cp-1"])


def test_an_empty_name_is_refused_naming_the_field():
    with pytest.raises(ValueError, match=r"^name: expected the etcd member's name"):
        etcd_membership.member_to_remove(members(), "", IDS["cp-1"])


def test_a_removal_posts_the_member_s_id_and_a_second_run_changes_nothing():
    etcd = Etcd()
    first = etcd_membership.remove_member(etcd, URL, "cp-3")
    assert first == {"changed": True, "removed": IDS["cp-3"], "members": ["cp-1", "cp-2", "cp-3"]}
    assert ("/v3/cluster/member/remove", {"ID": IDS["cp-3"]}) in etcd.requests
    etcd.requests.clear()
    second = etcd_membership.remove_member(etcd, URL, "cp-3")
    assert second == {"changed": False, "removed": "", "members": ["cp-1", "cp-2"]}
    assert all(path != "/v3/cluster/member/remove" for path, _ in etcd.requests)


def test_check_mode_says_a_member_would_go_and_removes_nothing():
    etcd = Etcd()
    assert etcd_membership.remove_member(etcd, URL, "cp-2", check_mode=True)["changed"] is True
    assert [path for path, _ in etcd.requests] == ["/v3/cluster/member/list", "/v3/maintenance/status"]
    assert len(etcd.listing["members"]) == 3


def test_a_refused_removal_is_the_error_etcd_gave():
    def refusing(url: str, body: bytes | None = None) -> str:
        if url.endswith("/remove"):
            raise status.ReadFailed("%s answered HTTP 503: etcdserver: unhealthy cluster" % url)
        return Etcd()(url, body)

    with pytest.raises(status.ReadFailed, match="unhealthy cluster"):
        etcd_membership.remove_member(refusing, URL, "cp-3")


def test_the_module_refuses_a_timeout_of_zero_naming_the_field():
    result = run_module_file(MODULE, {"name": "cp-3", "timeout": 0})
    assert result["failed"] and "timeout: expected a number from 1 to 86400, found 0" in result["msg"]


def test_the_module_without_kubeadm_s_certificates_fails_naming_the_files():
    # This machine is no control plane: the health-check client's files are not there.
    result = run_module_file(MODULE, {"name": "cp-3"})
    assert result["failed"] and status.ETCD_CA in result["msg"], result
