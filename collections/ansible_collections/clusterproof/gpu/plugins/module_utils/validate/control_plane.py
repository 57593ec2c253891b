"""The control plane of a kubeadm site judged: etcd's members, quorum, leader and lag, every API server,
the API through the site's endpoint, and the endpoint among the API server certificate's names.

Pure: it judges what each control-plane host read (module ``control_plane_status``, as plain data)
against the declared control planes (``{host, name}``: the inventory's ``kube_control_plane`` hosts and
their node names, which kubeadm gives their etcd members), and returns the report's section
``control-plane``. A host that could not be reached (or whose read failed) is a failed check naming it;
the other checks are judged on what the others read, so a control plane powered off in a three-member
etcd fails the members check, naming its member, while quorum passes with two of three.

etcd is judged on one view: the member list, statuses and health as one host read them, in the same
second (the host whose view has the most members answering, the first declared on a tie), so that the
raft indices compared for lag were read together.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check, Section, Table

SECTION_ID = "control-plane"
TITLE = "Control plane (etcd and API servers)"
# A member whose applied raft index trails the leader's by more than this many entries is lagging: a
# healthy member applies within milliseconds, so a lasting gap means a slow disk or a broken link.
LAG_ENTRIES = 1000
CATEGORY = "configuration"
ETCDCTL = (
    "etcdctl --endpoints https://127.0.0.1:2379 --cacert /etc/kubernetes/pki/etcd/ca.crt "
    "--cert /etc/kubernetes/pki/etcd/server.crt --key /etc/kubernetes/pki/etcd/server.key"
)
REJOIN = (
    "kubeadm reset on the host, then join it again as a control plane (ansible-playbook playbooks/cluster.yml "
    "runs kubeadm join --control-plane)"
)


def _check(name: str, title: str, status: str, **fields: Any) -> Check:
    if status in ("fail", "warn"):
        fields.setdefault("category", CATEGORY)
    return Check("%s/%s" % (SECTION_ID, name), title, status, **fields)


def _member_label(member: Mapping[str, Any]) -> str:
    return "%s (id %s)" % (member["name"], member["id"]) if member["name"] else "unstarted member %s" % member["id"]


def member_problem(member: Mapping[str, Any]) -> str:
    """Why a member does not answer as a healthy member should; empty when it does."""
    if member.get("status") is None:
        return member.get("status_error") or "its status was not read"
    errors = member["status"].get("errors") or []
    if errors:
        return "it reports %s" % "; ".join(errors)
    if member.get("health") is not True:
        return "its /health says %s" % (member.get("health_reason") or "not healthy")
    return ""


def _view(declared: Sequence[Mapping[str, str]], readings: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The host whose etcd view is judged and its members; ("", []) when no host read a member list."""
    best, best_members, best_answering = "", [], -1
    for entry in declared:
        etcd = (readings.get(entry["host"]) or {}).get("etcd") or {}
        if etcd.get("members") is None:
            continue
        answering = sum(1 for member in etcd["members"] if not member_problem(member))
        if answering > best_answering:
            best, best_members, best_answering = entry["host"], list(etcd["members"]), answering
    return best, best_members


def _members_check(declared: Sequence[Mapping[str, str]], members: list[dict[str, Any]], seen_by: str) -> Check:
    names = {entry["name"]: entry["host"] for entry in declared}
    member_names = {member["name"] for member in members if member["name"]}
    missing = [entry for entry in declared if entry["name"] not in member_names]
    silent = [(member, member_problem(member)) for member in members if member["name"] in names]
    silent = [(member, problem) for member, problem in silent if problem]
    undeclared = [member for member in members if member["name"] not in names]
    learners = [member for member in members if member["name"] in names and member["learner"]]
    failures, warnings, actions = [], [], []
    for entry in missing:
        failures.append("%s (host %s) is no member of etcd" % (entry["name"], entry["host"]))
    if missing:
        actions.append(
            "for %s: %s; or, if it is no control plane any more, take it out of kube_control_plane"
            % (", ".join(entry["host"] for entry in missing), REJOIN)
        )
    for member, problem in silent:
        failures.append("member %s does not answer: %s" % (_member_label(member), problem))
    if silent:
        actions.append(
            "bring %s back (power, network, the etcd static pod: crictl ps -a --name etcd on the host); if it is "
            "gone for good, remove its member (%s member remove %s) and take it out of kube_control_plane (or, for "
            "a new host in its place, %s)"
            % (
                ", ".join(names[member["name"]] for member, _ in silent),
                ETCDCTL,
                " ".join(member["id"] for member, _ in silent),
                REJOIN,
            )
        )
    for member in undeclared:
        urls = ", ".join(member["peer_urls"]) or "no peer URL"
        warnings.append("member %s (%s) is no declared control plane" % (_member_label(member), urls))
    if undeclared:
        actions.append(
            "if the member's host is gone (or a join stopped halfway), remove it: %s member remove %s; otherwise "
            "declare its host in kube_control_plane" % (ETCDCTL, " ".join(member["id"] for member in undeclared))
        )
    for member in learners:
        warnings.append(
            "%s is still a learner (not voting): kubeadm join promotes it once it has caught up" % member["name"]
        )
    if learners:
        actions.append("a learner that stays one means its join stopped halfway: %s" % REJOIN)
    status = "fail" if failures else "warn" if warnings else "pass"
    answering = len(members) - len(silent)
    return _check(
        "etcd-members",
        "Every declared control plane is an etcd member that answers",
        status,
        expected=sorted(names),
        observed=sorted(member["name"] or "(unstarted %s)" % member["id"] for member in members),
        message=(
            "; ".join(failures + warnings) + " (as read from %s)" % seen_by
            if failures or warnings
            else "%d members, all declared, all answer (as read from %s)" % (answering, seen_by)
        ),
        action="; ".join(actions) if actions else None,
    )


def _quorum_check(members: list[dict[str, Any]], seen_by: str) -> Check:
    voting = [member for member in members if not member["learner"]]
    healthy = [member for member in voting if not member_problem(member)]
    needed = len(voting) // 2 + 1
    silent = [member["name"] or member["id"] for member in voting if member_problem(member)]
    return _check(
        "etcd-quorum",
        "A majority of etcd's voting members is healthy",
        "pass" if len(healthy) >= needed else "fail",
        expected=">= %d of %d voting members healthy" % (needed, len(voting)),
        observed=len(healthy),
        message="%d of %d voting members healthy, %d needed%s (as read from %s)"
        % (len(healthy), len(voting), needed, "; unhealthy: %s" % ", ".join(silent) if silent else "", seen_by),
        action=None
        if len(healthy) >= needed
        else "etcd refuses every write without a majority, and the API server with it: bring back the unhealthy "
        "members (%s); if they cannot come back, restore etcd from a snapshot on one control plane and join "
        "the others again" % ", ".join(silent),
    )


def _leader(members: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str]:
    """The member all members with a status follow, or None and why there is none."""
    following = {(member["name"] or member["id"]): member["status"]["leader"] for member in members if member["status"]}
    if not following:
        return None, "no member's status could be read"
    leaders = set(following.values()) - {""}
    if not leaders:
        return None, "no member follows a leader: etcd has lost quorum or is electing one"
    if len(leaders) > 1 or "" in following.values():
        said = ", ".join("%s follows %s" % (name, leader or "none") for name, leader in sorted(following.items()))
        return None, "the members disagree on the leader: %s" % said
    (leader_id,) = leaders
    by_id = {member["id"]: member for member in members}
    if leader_id not in by_id:
        return None, "the members follow %s, which is no member of the list" % leader_id
    return by_id[leader_id], ""


def _leader_check(members: list[dict[str, Any]], seen_by: str) -> Check:
    leader, why = _leader(members)
    read = sum(1 for member in members if member["status"])
    return _check(
        "etcd-leader",
        "etcd has one leader that every member follows",
        "pass" if leader else "fail",
        expected="one leader",
        observed=_member_label(leader) if leader else why,
        message=(
            "%s leads; the %d members whose status was read follow it (as read from %s)"
            % (_member_label(leader), read, seen_by)
            if leader
            else "%s (as read from %s)" % (why, seen_by)
        ),
        action=None
        if leader
        else "see the quorum and members checks: a leader is elected once a majority of members answer each other "
        "(a network partition between control planes keeps them apart: check that each reaches the others' port "
        "2380)",
    )


def _lag_check(members: list[dict[str, Any]], lag_entries: int, seen_by: str) -> Check:
    title = "No etcd member trails the leader by more than %d entries" % lag_entries
    leader, why = _leader(members)
    if leader is None or leader["status"] is None:
        return _check("etcd-lag", title, "skip", message="nothing to compare with: %s" % (why or "no leader status"))
    applied = leader["status"]["raft_applied_index"]
    behind = {
        (member["name"] or member["id"]): applied - member["status"]["raft_applied_index"]
        for member in members
        if member["status"] and member is not leader
    }
    lagging = {name: gap for name, gap in behind.items() if gap > lag_entries}
    most = max(behind.items(), key=lambda item: item[1], default=None)
    return _check(
        "etcd-lag",
        title,
        "fail" if lagging else "pass",
        expected="<= %d entries behind the leader's applied index %d" % (lag_entries, applied),
        observed=behind,
        message=(
            "; ".join(
                "%s is %d entries behind %s" % (name, gap, _member_label(leader)) for name, gap in lagging.items()
            )
            if lagging
            else "every member within %d entries of the leader%s"
            % (lag_entries, " (the furthest behind: %s, %d entries)" % most if most else "")
        )
        + " (as read from %s)" % seen_by,
        action=(
            "look at the lagging member's host: its disk (etcd wants fast fsync: etcd's wal_fsync_duration metric), "
            "its load and its link to the leader (port 2380); if it does not catch up, remove the member and %s"
            % REJOIN
        )
        if lagging
        else None,
    )


def _endpoint_host(address: str) -> str:
    host = address.rsplit(":", 1)[0] if address.count(":") == 1 or address.startswith("[") else address
    return host.strip("[]")


def endpoint_in_sans(address: str, sans: Mapping[str, Any]) -> bool:
    """Whether the endpoint's host is among the certificate's names: an IP among its addresses, a name
    among its DNS names (a ``*.`` name covers one label, as TLS clients match it)."""
    host = _endpoint_host(address)
    try:
        return str(ipaddress.ip_address(host)) in {str(ipaddress.ip_address(ip)) for ip in sans.get("ips") or []}
    except ValueError:
        pass
    host = host.lower().rstrip(".")
    for name in (str(name).lower().rstrip(".") for name in sans.get("dns") or []):
        if name == host or (name.startswith("*.") and host.partition(".")[2] == name[2:] and "." in host):
            return True
    return False


def _endpoint_check(declared: Sequence[Mapping[str, str]], readings: Mapping[str, Any]) -> Check:
    tried = {entry["host"]: readings[entry["host"]]["endpoint"] for entry in declared if entry["host"] in readings}
    addresses = sorted({read.get("address") or "?" for read in tried.values()})
    failed = {host: read.get("error") or "not ready" for host, read in tried.items() if not read.get("ok")}
    status = "fail" if failed or not tried else "pass"
    return _check(
        "endpoint",
        "The API answers through the control-plane endpoint",
        status,
        expected="/readyz ok through %s from every control plane reached" % ", ".join(addresses),
        observed={host: "ok" if host not in failed else failed[host] for host in tried},
        message=(
            "no control plane was reached to try the endpoint"
            if not tried
            else "; ".join("from %s: %s" % item for item in failed.items())
            if failed
            else "%s answers from %s" % (", ".join(addresses), ", ".join(tried))
        ),
        action=(
            "check what serves the endpoint (the load balancer or virtual IP in front of the API servers, and its "
            "health checks) and that every API server behind it answers; with no endpoint declared it is the first "
            "control plane's address (clusterproof_control_plane_endpoint)"
        )
        if status == "fail"
        else None,
    )


def _host_checks(host: str, reading: Mapping[str, Any]) -> list[Check]:
    apiserver = reading.get("apiserver") or {}
    endpoint = reading.get("endpoint") or {}
    sans = reading.get("sans") or {}
    checks = [
        _check(
            "%s/apiserver" % host,
            "%s: its API server is ready" % host,
            "pass" if apiserver.get("ok") else "fail",
            expected="/readyz ok",
            observed="ok" if apiserver.get("ok") else apiserver.get("error") or "not ready",
            message="%s: %s" % (apiserver.get("url") or apiserver.get("address") or "the API server", "ok")
            if apiserver.get("ok")
            else apiserver.get("error") or "not ready",
            action=None
            if apiserver.get("ok")
            else "look at the API server's static pod on %s (crictl ps -a --name kube-apiserver; crictl logs <id>) "
            "and /etc/kubernetes/manifests/kube-apiserver.yaml" % host,
        )
    ]
    address = endpoint.get("address") or ""
    title = "%s: the API server's certificate names the endpoint" % host
    if sans.get("error") or not address:
        why = sans.get("error") or "the endpoint is not known: %s" % (endpoint.get("error") or "not read")
        checks.append(_check("%s/apiserver-sans" % host, title, "fail", message=why))
        return checks
    named = endpoint_in_sans(address, sans)
    names = ["DNS:%s" % name for name in sans.get("dns") or []] + ["IP:%s" % ip for ip in sans.get("ips") or []]
    checks.append(
        _check(
            "%s/apiserver-sans" % host,
            title,
            "pass" if named else "fail",
            expected=_endpoint_host(address),
            observed=names,
            message="%s is among the certificate's names" % _endpoint_host(address)
            if named
            else "%s is not among the names of %s's API server certificate: clients reaching the API through the "
            "endpoint refuse it" % (_endpoint_host(address), host),
            action=None
            if named
            else "add the endpoint to apiServer.certSANs of kubeadm's ClusterConfiguration, then on %s move "
            "/etc/kubernetes/pki/apiserver.{crt,key} aside, run kubeadm init phase certs apiserver --config <that "
            "configuration> and restart the API server" % host,
        )
    )
    return checks


def _members_table(members: list[dict[str, Any]], seen_by: str) -> Table:
    leader, _ = _leader(members)
    applied = leader["status"]["raft_applied_index"] if leader and leader["status"] else None
    rows, row_status = [], []
    for member in members:
        status = member["status"] or {}
        problem = member_problem(member)
        index = status.get("raft_applied_index")
        rows.append(
            [
                member["name"] or "(unstarted)",
                member["id"],
                ", ".join(member["client_urls"]),
                "learner" if member["learner"] else "voting",
                "leader" if member is leader else "",
                "" if index is None else index,
                "" if index is None or applied is None else applied - index,
                "" if not status else status.get("db_size", ""),
                problem or "healthy",
            ]
        )
        row_status.append("fail" if problem else "pass")
    return Table(
        SECTION_ID + "/etcd-members",
        "etcd members as %s read them" % seen_by,
        ["Member", "ID", "Client URL", "Vote", "Leader", "Applied index", "Behind leader", "DB bytes", "State"],
        rows,
        row_status,
    )


def section(
    declared: Sequence[Mapping[str, str]],
    readings: Mapping[str, Mapping[str, Any]],
    unread: Mapping[str, str] | None = None,
    lag_entries: int = LAG_ENTRIES,
    skipped: str = "",
) -> Section:
    """The report's ``control-plane`` section. ``declared``: the control planes, ``{host, name}``, the
    first first; ``readings``: host -> what ``control_plane_status`` returned there; ``unread``: host ->
    why nothing was read there; ``skipped``: why nothing was read at all (a site kubeadm did not make)."""
    if skipped:
        return Section(SECTION_ID, TITLE, [_check("read", "control plane read", "skip", message=skipped)])
    unread = dict(unread or {})
    for entry in declared:
        if entry["host"] not in readings and entry["host"] not in unread:
            unread[entry["host"]] = "the validation has no result from it"
    readings = {host: reading for host, reading in readings.items() if host not in unread}
    checks: list[Check] = []
    tables: list[Table] = []
    seen_by, members = _view(declared, readings)
    member_ids = {member["name"]: member["id"] for member in members if member["name"]}
    if seen_by:
        checks += [
            _members_check(declared, members, seen_by),
            _quorum_check(members, seen_by),
            _leader_check(members, seen_by),
            _lag_check(members, lag_entries, seen_by),
        ]
        tables.append(_members_table(members, seen_by))
    else:
        why = (
            "; ".join(
                "%s: %s" % (host, ((readings[host].get("etcd") or {}).get("error") or "not read")) for host in readings
            )
            or "no control plane was reached"
        )
        action = (
            "etcd does not answer on any control plane: look at its static pod (crictl ps -a --name etcd; crictl "
            "logs <id>) and its certificates under /etc/kubernetes/pki/etcd"
        )
        for name, title in (
            ("etcd-members", "Every declared control plane is an etcd member that answers"),
            ("etcd-quorum", "A majority of etcd's voting members is healthy"),
            ("etcd-leader", "etcd has one leader that every member follows"),
        ):
            checks.append(_check(name, title, "fail", message="no member list read: %s" % why, action=action))
        checks.append(_check("etcd-lag", "No etcd member lags the leader", "skip", message="no member list read"))
    checks.append(_endpoint_check(declared, readings))
    for entry in declared:
        host = entry["host"]
        if host in unread:
            checks.append(
                _check(
                    "%s/reached" % host,
                    "%s: the control plane was reached" % host,
                    "fail",
                    expected="reached",
                    observed="unreachable",
                    message="%s is unreachable: %s" % (host, unread[host]),
                    action="power the host on or restore its network, then validate again; if it is gone for good, "
                    "remove its etcd member (%s member remove %s) and take it out of kube_control_plane"
                    % (ETCDCTL, member_ids.get(entry["name"], "<its id: etcd-members table>")),
                )
            )
            continue
        checks += _host_checks(host, readings[host])
    return Section(SECTION_ID, TITLE, checks, tables)
