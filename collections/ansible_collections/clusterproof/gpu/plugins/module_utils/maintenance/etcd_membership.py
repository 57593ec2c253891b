"""Removing a member of kubeadm's stacked etcd from a control plane that stays, through etcd's JSON
gateway (the reads of ``control_plane_status``), so that no etcdctl is needed on the host.

``kubeadm reset`` on a control plane removes its own etcd member; a control plane whose host is out of
reach cannot, so its member is removed by another: ``POST /v3/cluster/member/list``, then
``POST /v3/cluster/member/remove`` with the member's ID. etcd accepts the removal only while the
members that answer keep a quorum, and says why when not.

``member_to_remove`` is pure (the decision, and the refusals: the member of the host it runs on, the
last member); ``remove_member`` does the reads and the removal through the ``Reader`` it is given.

May import: the standard library, ``maintenance.control_plane_status`` (the reader and the parsers of
the gateway's answers). Touches: the network (etcd's client URL), only through the reader.
"""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import control_plane_status
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance.control_plane_status import Reader


def member_to_remove(members: list[dict[str, Any]], name: str, local_id: str) -> str | None:
    """The ID of the member named ``name`` among ``members`` (``members_of``'s), None when there is none
    (already removed: nothing to do). ValueError when it is the member of the host asked to remove it
    (that host's own ``kubeadm reset`` removes it), or the last member."""
    if not name:
        raise ValueError("name: expected the etcd member's name (the control plane's node name); found ''")
    matching = [member for member in members if member["name"] == name]
    if not matching:
        return None
    member_id = matching[0]["id"]
    if member_id == local_id:
        raise ValueError(
            "name: %r is the etcd member of the host this runs on; remove a member from another control plane "
            "(or run kubeadm reset on its own host)" % name
        )
    if len(members) == 1:
        raise ValueError("name: %r is etcd's last member: removing it would end the cluster" % name)
    return member_id


def remove_member(read: Reader, url: str, name: str, check_mode: bool = False) -> dict[str, Any]:
    """Remove the member named ``name`` through the etcd at ``url``. Returns ``changed``, ``removed``
    (the member's ID, empty when there was none) and ``members`` (the names listed before).
    ReadFailed when etcd does not answer or refuses (a lost quorum), ValueError as ``member_to_remove``."""
    base = url.rstrip("/")
    members = control_plane_status.members_of(read(base + "/v3/cluster/member/list", b"{}"))
    local = control_plane_status.status_of(read(base + "/v3/maintenance/status", b"{}"))
    member_id = member_to_remove(members, name, local["member_id"])
    names = sorted(member["name"] or "(unstarted %s)" % member["id"] for member in members)
    if member_id is None:
        return {"changed": False, "removed": "", "members": names}
    if not check_mode:
        read(base + "/v3/cluster/member/remove", json.dumps({"ID": member_id}).encode())
    return {"changed": True, "removed": member_id, "members": names}
