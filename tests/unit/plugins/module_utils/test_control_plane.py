"""The control plane's validation: etcd's JSON gateway read (fed the answers recorded from a real
three-member etcd v3.6.8, tests/unit/fixtures/control_plane/README.md), the readings judged into the
report's control-plane section, the filter, and the module's refusals."""

from __future__ import annotations

import http.server
import json
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.filter import control_plane as control_plane_filters
from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory.schema import validate_site
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import control_plane_status as status
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import history
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Report
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import pki as sandbox_pki
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import control_plane
from tests.conftest import run_module_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "control_plane"
MODULE = (
    Path(__file__).resolve().parents[4]
    / "collections/ansible_collections/clusterproof/gpu/plugins/modules/control_plane_status.py"
)
# The recorded members' client URLs and ids (fixtures/control_plane/etcd/*/member_list.json).
CLIENT_URLS = {"cp-1": "https://127.0.0.1:23791", "cp-2": "https://127.0.0.1:23792", "cp-3": "https://127.0.0.1:23793"}
IDS = {"cp-1": "4622673857392870152", "cp-2": "7468050939385520108", "cp-3": "7793697766324755982"}
DECLARED = [{"host": host, "name": host} for host in ("cp-1", "cp-2", "cp-3")]
ENDPOINT = "192.0.2.10:6443"
SANS = {"dns": ["cp-1", "kubernetes", "kubernetes.default"], "ips": ["10.96.0.1", "192.0.2.10"], "error": ""}


def recorded(case: str, file: str) -> str:
    return (FIXTURES / "etcd" / case / file).read_text()


class RecordedEtcd:
    """Answers the gateway's URLs with what a real etcd answered in ``case``; a member without a
    recorded answer is one that is down: its read times out, as a powered-off host's does."""

    def __init__(self, case: str):
        self.case, self.urls = case, []
        self.answers = {}
        for name, url in CLIENT_URLS.items():
            for path, file in (("/v3/maintenance/status", "status_%s.json"), ("/health", "health_%s.json")):
                if (FIXTURES / "etcd" / case / (file % name)).exists():
                    self.answers[url + path] = recorded(case, file % name)
        self.answers[CLIENT_URLS["cp-1"] + "/v3/cluster/member/list"] = recorded(case, "member_list.json")

    def __call__(self, url: str, body: bytes | None = None) -> str:
        self.urls.append(url)
        if url not in self.answers:
            raise status.ReadFailed("%s: timed out" % url)
        return self.answers[url]


def etcd_view(case: str, **changes) -> dict:
    """What read_etcd makes of a recorded case; ``changes``: member name -> status fields to change."""
    etcd = status.read_etcd(RecordedEtcd(case), CLIENT_URLS["cp-1"])
    for member in etcd["members"]:
        if member["name"] in changes:
            member["status"].update(changes[member["name"]])
    return etcd


def reading(etcd: dict, endpoint_ok: bool = True, sans: dict | None = None) -> dict:
    """One host's module result around ``etcd``: its API server ready, the endpoint as asked."""
    return {
        "etcd": etcd,
        "apiserver": {"address": "192.0.2.11:6443", "url": "https://192.0.2.11:6443/readyz", "ok": True, "error": ""},
        "endpoint": {
            "address": ENDPOINT,
            "url": "https://%s/readyz" % ENDPOINT,
            "ok": endpoint_ok,
            "error": "" if endpoint_ok else "https://%s/readyz: timed out" % ENDPOINT,
        },
        "sans": sans or SANS,
    }


def verdicts(section) -> dict[str, str]:
    return {check.id: check.status for check in section.checks}


def check(section, name: str):
    return next(c for c in section.checks if c.id == "control-plane/" + name)


# --- reading etcd's gateway ---------------------------------------------------------------------------


def test_three_healthy_members_are_read_with_their_status_and_health():
    etcd = status.read_etcd(RecordedEtcd("three_members"), CLIENT_URLS["cp-1"])
    assert etcd["error"] == ""
    assert [(m["name"], m["id"], m["client_urls"], m["learner"]) for m in etcd["members"]] == [
        (name, IDS[name], [CLIENT_URLS[name]], False) for name in ("cp-1", "cp-2", "cp-3")
    ]
    first = etcd["members"][0]
    assert first["status"] == {
        "member_id": IDS["cp-1"],
        "leader": IDS["cp-3"],
        "raft_term": 2,
        "raft_index": 8,
        "raft_applied_index": 8,
        "db_size": 24576,
        "version": "3.6.8",
        "errors": [],
    }
    assert (first["health"], first["health_reason"], first["status_error"]) == (True, "", "")


def test_a_member_that_does_not_answer_is_asked_once_and_recorded_with_the_reason():
    reader = RecordedEtcd("one_down")
    etcd = status.read_etcd(reader, CLIENT_URLS["cp-1"])
    down = next(m for m in etcd["members"] if m["name"] == "cp-2")
    assert down["status"] is None and down["health"] is None
    assert down["status_error"] == "https://127.0.0.1:23792/v3/maintenance/status: timed out"
    # One timeout per member that is down, not one per read: its health is not asked.
    assert [url for url in reader.urls if url.startswith(CLIENT_URLS["cp-2"])] == [
        CLIENT_URLS["cp-2"] + "/v3/maintenance/status"
    ]


def test_a_member_without_quorum_reports_no_leader_and_is_unhealthy():
    etcd = status.read_etcd(RecordedEtcd("quorum_lost"), CLIENT_URLS["cp-1"])
    alone = etcd["members"][0]
    assert alone["status"]["leader"] == ""
    assert alone["status"]["errors"] == ["etcdserver: no leader"]
    assert (alone["health"], alone["health_reason"]) == (False, "RAFT NO LEADER")


def test_a_member_added_but_never_started_and_a_learner_are_read_as_such():
    unstarted = status.read_etcd(RecordedEtcd("unstarted_member"), CLIENT_URLS["cp-1"])["members"][-1]
    assert (unstarted["name"], unstarted["client_urls"], unstarted["status"]) == ("", [], None)
    assert unstarted["status_error"] == "no client URL: the member was added but has never started"
    learner = status.members_of(recorded("learner", "member_list.json"))[-1]
    assert learner["learner"] is True and learner["name"] == ""


def test_a_member_list_that_cannot_be_read_is_the_error_and_no_members():
    def refused(url, body=None):
        raise status.ReadFailed("%s: [Errno 111] Connection refused" % url)

    assert status.read_etcd(refused, "https://127.0.0.1:2379") == {
        "url": "https://127.0.0.1:2379",
        "error": "https://127.0.0.1:2379/v3/cluster/member/list: [Errno 111] Connection refused",
        "members": None,
    }
    garbage = status.read_etcd(lambda url, body=None: "<html>", "https://127.0.0.1:2379")
    assert garbage["members"] is None and "etcd member list: not JSON" in garbage["error"]


def test_an_error_answer_says_what_the_gateway_or_readyz_said():
    assert status.error_text((FIXTURES / "etcd" / "gateway_error.json").read_text()) == "etcdserver: member not found"
    readyz = "[+]ping ok\n[-]etcd failed: reason withheld\n[+]log ok\nreadyz check failed\n"
    assert status.error_text(readyz) == "[-]etcd failed: reason withheld"


def test_the_api_server_certificate_s_names_are_read_from_openssl():
    assert status.sans_of((FIXTURES / "apiserver_sans.txt").read_text()) == {
        "dns": [
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
        "ips": ["127.0.0.1", "10.96.0.1"],
    }
    # openssl writes IPv6 in full and in capitals.
    assert status.sans_of((FIXTURES / "apiserver_sans_ipv6.txt").read_text())["ips"] == [
        "10.96.0.1",
        "192.0.2.11",
        "fd00::11",
    ]
    assert status.sans_of("No extensions in certificate\n") == {"dns": [], "ips": []}


def test_the_api_server_s_address_is_kubeadm_s_annotation_or_its_flags():
    annotated = "  annotations:\n    kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint: 192.0.2.11:6443\n"
    assert status.advertised_endpoint(annotated) == "192.0.2.11:6443"
    flags = "    - kube-apiserver\n    - --advertise-address=fd00::11\n    - --secure-port=8443\n"
    assert status.advertised_endpoint(flags) == "[fd00::11]:8443"
    with pytest.raises(ValueError, match="advertise-address"):
        status.advertised_endpoint("kind: Pod\n")


def test_the_endpoint_kubeadm_was_given_is_admin_conf_s_server():
    kubeconfig = "clusters:\n- cluster:\n    certificate-authority-data: X\n    server: https://10.213.0.10:6443\n"
    assert status.kubeconfig_server(kubeconfig) == "10.213.0.10:6443"
    with pytest.raises(ValueError, match="no https server"):
        status.kubeconfig_server("clusters: []\n")


@pytest.mark.parametrize(
    ("address", "url"),
    [
        ("10.0.0.1:6443", "https://10.0.0.1:6443/readyz"),
        ("api.site.example", "https://api.site.example:6443/readyz"),
        ("[fd00::1]:443", "https://[fd00::1]:443/readyz"),
    ],
)
def test_an_address_becomes_the_url_read(address, url):
    assert status.url_of(address, "/readyz") == url


@pytest.mark.parametrize("address", ["api site", "10.0.0.1:0", "10.0.0.1:70000", "https://x:6443"])
def test_an_address_that_is_no_host_port_is_refused_with_what_was_found(address):
    with pytest.raises(ValueError, match="expected host or host:port"):
        status.host_port(address)


# --- the HTTPS reader against real servers ----------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    paths = sandbox_pki.PkiPaths(tmp_path_factory.mktemp("pki"))
    sandbox_pki.ensure_pki(paths)
    return paths


@pytest.fixture
def gateway(pki):
    """An HTTPS server on 127.0.0.1 with the etcd certificate, asking for a client certificate of the CA,
    answering the member list as recorded and /missing with the gateway's error."""
    members = recorded("three_members", "member_list.json").encode()
    error = (FIXTURES / "etcd" / "gateway_error.json").read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (the standard library's name)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            found = self.path == "/v3/cluster/member/list"
            self.send_response(200 if found else 404)
            self.end_headers()
            self.wfile.write(members if found else error)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_cert))
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(str(pki.etcd_cert), str(pki.etcd_key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "https://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_reader_presents_the_client_certificate_and_reads_the_answer(pki, gateway):
    client = sandbox_pki.ETCD_HEALTHCHECK_CLIENT
    read = status.https_reader(5, str(pki.ca_cert), str(pki.client_cert(client)), str(pki.client_key(client)))
    assert [m["name"] for m in status.read_etcd(read, gateway)["members"]] == ["cp-1", "cp-2", "cp-3"]
    with pytest.raises(status.ReadFailed, match="answered HTTP 404: etcdserver: member not found"):
        read(gateway + "/v3/cluster/member/promote", b"{}")


def test_the_reader_without_a_client_certificate_is_refused_with_the_reason(pki, gateway):
    read = status.https_reader(5, str(pki.ca_cert))
    with pytest.raises(status.ReadFailed, match=gateway.replace(".", r"\.")):
        read(gateway + "/v3/cluster/member/list", b"{}")


def test_a_server_that_never_answers_times_out_within_the_timeout(pki):
    # A listening socket nobody serves: the TCP handshake completes, TLS's never does, as with a hung etcd.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    try:
        read = status.https_reader(0.5, str(pki.ca_cert))
        started = time.monotonic()
        with pytest.raises(status.ReadFailed, match="timed out"):
            read("https://127.0.0.1:%d/health" % silent.getsockname()[1], None)
        assert time.monotonic() - started < 3
    finally:
        silent.close()


def test_files_that_cannot_be_loaded_are_named(tmp_path):
    with pytest.raises(status.ReadFailed, match="cannot load %s" % tmp_path):
        status.https_reader(5, str(tmp_path / "ca.crt"))


def test_a_host_whose_files_are_missing_returns_every_part_with_its_reason(tmp_path):
    missing = str(tmp_path / "none")
    read = status.read_host(
        etcd_url="https://127.0.0.1:9",
        etcd_tls=(missing, missing, missing),
        kubernetes_ca=missing,
        endpoint="",
        apiserver_address="",
        timeout=1,
        kubeconfig=missing,
        apiserver_manifest=missing,
        apiserver_certificate=missing,
    )
    assert read["etcd"]["members"] is None and "cannot load" in read["etcd"]["error"]
    assert read["apiserver"]["ok"] is False and missing in read["apiserver"]["error"]
    assert read["endpoint"]["ok"] is False and missing in read["endpoint"]["error"]
    assert read["sans"]["error"] and read["sans"]["dns"] == []


# --- the verdicts -----------------------------------------------------------------------------------------


def test_three_healthy_members_pass_every_check():
    readings = {host: reading(etcd_view("three_members")) for host in ("cp-1", "cp-2", "cp-3")}
    section = control_plane.section(DECLARED, readings)
    assert set(verdicts(section).values()) == {"pass"}
    assert list(verdicts(section)) == [
        "control-plane/etcd-members",
        "control-plane/etcd-quorum",
        "control-plane/etcd-leader",
        "control-plane/etcd-lag",
        "control-plane/endpoint",
        *(
            "control-plane/%s/%s" % (host, part)
            for host in ("cp-1", "cp-2", "cp-3")
            for part in ("apiserver", "apiserver-sans")
        ),
    ]
    assert check(section, "etcd-quorum").message.startswith("3 of 3 voting members healthy, 2 needed")
    assert check(section, "etcd-leader").observed == "cp-3 (id %s)" % IDS["cp-3"]
    table = section.tables[0]
    assert [row[0] for row in table.rows] == ["cp-1", "cp-2", "cp-3"] and table.row_status == ["pass"] * 3
    assert [row[4] for row in table.rows] == ["", "", "leader"]


def test_a_control_plane_powered_off_fails_the_members_check_naming_it_and_quorum_holds():
    readings = {host: reading(etcd_view("one_down")) for host in ("cp-1", "cp-3")}
    section = control_plane.section(DECLARED, readings, {"cp-2": "cp-2 could not be reached: timed out"})
    assert verdicts(section) == {
        "control-plane/etcd-members": "fail",
        "control-plane/etcd-quorum": "pass",
        "control-plane/etcd-leader": "pass",
        "control-plane/etcd-lag": "pass",
        "control-plane/endpoint": "pass",
        "control-plane/cp-1/apiserver": "pass",
        "control-plane/cp-1/apiserver-sans": "pass",
        "control-plane/cp-2/reached": "fail",
        "control-plane/cp-3/apiserver": "pass",
        "control-plane/cp-3/apiserver-sans": "pass",
    }
    members = check(section, "etcd-members")
    assert "member cp-2 (id %s) does not answer" % IDS["cp-2"] in members.message
    assert "member remove %s" % IDS["cp-2"] in members.action and members.category == "configuration"
    assert check(section, "etcd-quorum").message.startswith("2 of 3 voting members healthy, 2 needed")
    reached = check(section, "cp-2/reached")
    assert reached.message == "cp-2 is unreachable: cp-2 could not be reached: timed out"
    assert "member remove %s" % IDS["cp-2"] in reached.action


def test_a_declared_control_plane_missing_from_etcd_fails_with_the_join_to_run():
    declared = [*DECLARED, {"host": "cp-4", "name": "cp-4.site.example"}]
    readings = {host: reading(etcd_view("three_members")) for host in ("cp-1", "cp-2", "cp-3", "cp-4")}
    members = check(control_plane.section(declared, readings), "etcd-members")
    assert members.status == "fail"
    assert "cp-4.site.example (host cp-4) is no member of etcd" in members.message
    assert "for cp-4: kubeadm reset on the host" in members.action
    assert "kubeadm join --control-plane" in members.action


def test_a_member_nobody_declared_is_a_warning_with_its_removal():
    readings = {host: reading(etcd_view("unstarted_member")) for host in ("cp-1", "cp-2", "cp-3")}
    section = control_plane.section(DECLARED, readings)
    members = check(section, "etcd-members")
    assert members.status == "warn"
    assert "member unstarted member 12820585344199224269 (https://127.0.0.1:23804) is no declared" in members.message
    assert "member remove 12820585344199224269" in members.action
    # Four voting members, one never started: quorum needs 3, and has them.
    assert check(section, "etcd-quorum").message.startswith("3 of 4 voting members healthy, 3 needed")


def test_a_lagging_member_fails_naming_it_and_its_gap():
    lagging = etcd_view("three_members", **{"cp-1": {"raft_applied_index": 8 - 1500}})
    section = control_plane.section(DECLARED, {host: reading(lagging) for host in ("cp-1", "cp-2", "cp-3")})
    lag = check(section, "etcd-lag")
    assert lag.status == "fail"
    assert lag.message.startswith("cp-1 is 1500 entries behind cp-3 (id %s)" % IDS["cp-3"])
    assert lag.observed == {"cp-1": 1500, "cp-2": 0}
    assert check(control_plane.section(DECLARED, {"cp-1": reading(lagging)}, lag_entries=2000), "etcd-lag").status == (
        "pass"
    )


def test_two_leaders_fail_naming_whom_each_member_follows():
    split = etcd_view("three_members", **{"cp-1": {"leader": IDS["cp-1"]}})
    leader = check(control_plane.section(DECLARED, {"cp-1": reading(split)}), "etcd-leader")
    assert leader.status == "fail"
    assert "the members disagree on the leader: cp-1 follows %s, cp-2 follows %s" % (IDS["cp-1"], IDS["cp-3"]) in (
        leader.message
    )


def test_no_leader_fails_the_leader_and_quorum_checks_and_skips_lag():
    section = control_plane.section(
        DECLARED, {"cp-1": reading(etcd_view("quorum_lost"))}, {"cp-2": "down", "cp-3": "down"}
    )
    assert check(section, "etcd-leader").status == "fail"
    assert "no member follows a leader" in check(section, "etcd-leader").message
    quorum = check(section, "etcd-quorum")
    assert quorum.status == "fail" and quorum.message.startswith(
        "0 of 3 voting members healthy, 2 needed; unhealthy: cp-1, cp-2, cp-3"
    )
    assert "restore etcd from a snapshot" in quorum.action
    assert check(section, "etcd-lag").status == "skip"


def test_an_api_server_certificate_without_the_endpoint_fails_with_how_to_add_it():
    sans = {"dns": ["cp-1", "kubernetes"], "ips": ["10.96.0.1", "192.0.2.11"], "error": ""}
    section = control_plane.section(DECLARED[:1], {"cp-1": reading(etcd_view("three_members"), sans=sans)})
    named = check(section, "cp-1/apiserver-sans")
    assert named.status == "fail"
    assert named.expected == "192.0.2.10" and "IP:192.0.2.11" in named.observed
    assert "apiServer.certSANs" in named.action


@pytest.mark.parametrize(
    ("endpoint", "named"),
    [
        ("192.0.2.11:6443", True),
        ("[fd00::11]:6443", True),
        ("fd00:0::11", True),
        ("CP-1:6443", True),
        ("api.cp.example.com:6443", True),
        ("a.b.cp.example.com:6443", False),
        ("cp.example.com", False),
        ("192.0.2.12:6443", False),
    ],
)
def test_the_endpoint_s_host_is_matched_as_tls_clients_match_it(endpoint, named):
    sans = status.sans_of((FIXTURES / "apiserver_sans_ipv6.txt").read_text())
    assert control_plane.endpoint_in_sans(endpoint, sans) is named


def test_a_single_control_plane_site_is_judged_on_its_one_member():
    single = etcd_view("three_members", **{"cp-1": {"leader": IDS["cp-1"]}})
    single["members"] = single["members"][:1]
    section = control_plane.section(DECLARED[:1], {"cp-1": reading(single)})
    assert set(verdicts(section).values()) == {"pass"}
    assert check(section, "etcd-quorum").message.startswith("1 of 1 voting members healthy, 1 needed")
    assert check(section, "etcd-lag").message.startswith("every member within 1000 entries of the leader (as read")


def test_an_endpoint_that_does_not_answer_fails_naming_the_hosts_and_why():
    readings = {
        "cp-1": reading(etcd_view("three_members"), endpoint_ok=False),
        "cp-2": reading(etcd_view("three_members")),
    }
    endpoint = check(control_plane.section(DECLARED[:2], readings), "endpoint")
    assert endpoint.status == "fail"
    assert endpoint.message == "from cp-1: https://192.0.2.10:6443/readyz: timed out"
    assert endpoint.observed == {"cp-1": "https://192.0.2.10:6443/readyz: timed out", "cp-2": "ok"}


def test_etcd_answering_nowhere_fails_the_etcd_checks_with_each_host_s_reason():
    down = {
        "url": "https://127.0.0.1:2379",
        "error": "https://127.0.0.1:2379/v3/cluster/member/list: refused",
        "members": None,
    }
    section = control_plane.section(DECLARED[:1], {"cp-1": reading(down)})
    assert verdicts(section)["control-plane/etcd-members"] == "fail"
    assert check(section, "etcd-quorum").message == "no member list read: cp-1: %s" % down["error"]
    assert verdicts(section)["control-plane/etcd-lag"] == "skip"


def test_a_declared_host_without_any_result_is_named_as_not_reached():
    section = control_plane.section(DECLARED[:2], {"cp-1": reading(etcd_view("three_members"))})
    assert check(section, "cp-2/reached").message == "cp-2 is unreachable: the validation has no result from it"


def test_a_site_kubeadm_did_not_make_is_a_skipped_check_with_the_reason():
    section = control_plane.section([], {}, skipped="not kubeadm")
    assert [(c.id, c.status, c.message) for c in section.checks] == [("control-plane/read", "skip", "not kubeadm")]


# --- the filter -------------------------------------------------------------------------------------------


def kubeadm_site(control_planes=("cp-1", "cp-2", "cp-3"), endpoint="api.site.example"):
    common = {"clusterproof_site_name": "dgx-site", "clusterproof_cluster_mode": "kubeadm"}
    if endpoint:
        common["clusterproof_control_plane_endpoint"] = endpoint
    hostvars = {host: dict(common) for host in control_planes}
    hostvars["dgx-1"] = {**common, "gpu_count": 8}
    groups = {"all": list(hostvars), "kube_control_plane": list(control_planes), "gpu_nodes": ["dgx-1"]}
    declaration, errors = validate_site(groups, hostvars)
    assert errors == []
    return declaration.to_dict()


def test_the_filter_judges_every_control_plane_s_result_and_those_it_could_not_read():
    hostvars = {
        "cp-1": {"validate_control_plane_result": reading(etcd_view("one_down"))},
        "cp-2": {"validate_control_plane_unread": "cp-2 could not be reached: timed out"},
        "cp-3": {"validate_control_plane_result": reading(etcd_view("one_down"))},
    }
    section = control_plane_filters.control_plane_section(kubeadm_site(), hostvars, 1000)
    assert section["id"] == "control-plane"
    statuses = {c["id"]: c["status"] for c in section["checks"]}
    assert statuses["control-plane/etcd-members"] == "fail" and statuses["control-plane/etcd-quorum"] == "pass"
    assert statuses["control-plane/cp-2/reached"] == "fail"
    assert section["tables"][0]["columns"][0] == "Member"


def test_the_filter_skips_with_the_reason_and_refuses_a_bad_lag():
    assert control_plane_filters.control_plane_section({}, skipped="not kubeadm")["checks"][0]["status"] == "skip"
    with pytest.raises(Exception, match="lag_entries: expected a whole number of raft entries .0 or more., found -1"):
        control_plane_filters.control_plane_section(kubeadm_site(), {}, -1)
    with pytest.raises(Exception, match="found True"):
        control_plane_filters.control_plane_section(kubeadm_site(), {}, True)
    with pytest.raises(Exception, match="site: expected a site of mode kubeadm .or skipped=.*found mode 'sandbox'"):
        control_plane_filters.control_plane_section({"cluster_mode": "sandbox"}, {})


def test_the_endpoint_tried_is_the_declared_one_with_its_port_or_kubeadm_s():
    assert control_plane_filters.control_plane_endpoint(kubeadm_site()) == "api.site.example:6443"
    assert control_plane_filters.control_plane_endpoint(kubeadm_site(endpoint="api.site.example:8443")) == (
        "api.site.example:8443"
    )
    assert control_plane_filters.control_plane_endpoint(kubeadm_site(("cp-1",), endpoint="")) == ""


# --- the module's refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "missing required arguments: host"),
        ({"host": "cp-1", "endpoint": "api site:6443"}, "endpoint: expected host or host:port (port 1-65535), found 'api site:6443'"),
        ({"host": "cp-1", "apiserver_address": "10.0.0.1:99999"}, "apiserver_address: expected host or host:port"),
        ({"host": "cp-1", "etcd_url": "http://127.0.0.1:2379"}, "etcd_url: expected an https:// URL (kubeadm's etcd serves TLS only), found 'http://127.0.0.1:2379'"),
        ({"host": "cp-1", "timeout": 0}, "timeout: expected a number from 1 to 86400, found 0; nothing was changed"),
        ({"host": "cp-1", "timeout": "soon"}, "argument 'timeout' is of type"),
    ],
)  # fmt: skip
def test_the_module_refuses_bad_arguments_naming_the_option(arguments, message):
    result = run_module_file(MODULE, arguments)
    assert result["failed"] is True
    assert message in result["msg"]


def test_the_module_on_a_host_without_a_control_plane_returns_every_reason_and_does_not_fail(tmp_path):
    missing = str(tmp_path / "none")
    result = run_module_file(
        MODULE,
        {
            "host": "cp-1",
            "etcd_url": "https://127.0.0.1:9",
            "timeout": 1,
            **{option: missing for option in ("etcd_ca", "kubernetes_ca", "kubeconfig", "apiserver_manifest")},
            "apiserver_certificate": missing,
        },
    )
    assert result.get("failed") is not True and result["changed"] is False
    assert result["host"] == "cp-1" and result["etcd"]["members"] is None
    assert all(result[part]["error"] for part in ("apiserver", "endpoint", "sans"))


def test_the_recorded_fixtures_are_the_gateway_s_json():
    for path in (FIXTURES / "etcd").rglob("*.json"):
        assert isinstance(json.loads(path.read_text()), dict), path


# --- what changed since an earlier run -------------------------------------------------------------


def _state(declared: list[dict], members_of: list[str]) -> dict:
    """The state report history records of a run whose etcd has the members ``members_of``."""
    etcd = etcd_view("three_members")
    etcd["members"] = [member for member in etcd["members"] if member["name"] in members_of]
    readings = {entry["host"]: reading(etcd) for entry in declared}
    section = control_plane.section(declared, readings)
    return history.site_state(Report("s", "lab", "", "", [section]))


def test_a_control_plane_removed_with_its_host_out_of_the_inventory_is_what_changed_and_no_regression():
    before = _state(DECLARED, ["cp-1", "cp-2", "cp-3"])
    assert before["control_planes"] == {"declared": ["cp-1", "cp-2", "cp-3"], "members": ["cp-1", "cp-2", "cp-3"]}
    after = _state(DECLARED[:2], ["cp-1", "cp-2"])
    changes = history.compare(before, after)
    assert (changes["control_planes_removed"], changes["control_planes_gone"]) == (["cp-3"], [])
    checks = {check.id: check for check in history.changes_section(changes, "the run X").checks}
    assert checks["changes/control-planes-removed"].observed == ["cp-3"]
    assert {check.status for check in checks.values()} == {"pass"}


def test_a_declared_control_plane_whose_member_is_gone_is_a_regression_in_what_changed():
    before = _state(DECLARED, ["cp-1", "cp-2", "cp-3"])
    after = _state(DECLARED, ["cp-1", "cp-2"])
    changes = history.compare(before, after)
    assert (changes["control_planes_gone"], changes["control_planes_removed"]) == (["cp-3"], [])
    checks = {check.id: check for check in history.changes_section(changes, "the run X").checks}
    gone = checks["changes/control-planes-gone"]
    assert (gone.status, gone.message) == ("fail", "gone since the run X: cp-3")
    # Added back (a new host joined in its place): shown, no regression.
    again = history.compare(after, before)
    assert (again["control_planes_added"], again["control_planes_gone"]) == (["cp-3"], [])


def test_a_run_without_a_member_list_compares_no_control_plane():
    skipped = history.site_state(Report("s", "sandbox", "", "", [control_plane.section([], {}, skipped="sandbox")]))
    assert skipped["control_planes"] is None
    changes = history.compare(_state(DECLARED, ["cp-1", "cp-2", "cp-3"]), skipped)
    assert changes["control_planes_gone"] == changes["control_planes_removed"] == []
    # A site without a member list has no control-plane checks in what changed.
    ids = {check.id for check in history.changes_section(changes, "the run X").checks}
    assert not any(check_id.startswith("changes/control-planes") for check_id in ids)
