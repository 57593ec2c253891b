"""kube.client's discovery cache: a file of this process's own per API server, never the dynamic
client's shared default (one file per server URL in the temporary directory, which a later
sandbox on the same port would read as its own)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube

REPO = Path(__file__).resolve().parents[4]


def test_each_server_has_a_file_of_this_process_s_own():
    first = kube.discovery_cache_file("https://127.0.0.1:20000")
    assert kube.discovery_cache_file("https://127.0.0.1:20000") == first
    other = kube.discovery_cache_file("https://127.0.0.1:20040")
    assert other != first and Path(other).parent == Path(first).parent
    assert Path(first).parent.name.startswith("clusterproof-discovery-")
    # Not the file the dynamic client would share with every process (osrcp-<md5 of the URL>.json).
    shared = "osrcp-%s.json" % hashlib.md5(b"https://127.0.0.1:20000").hexdigest()
    assert Path(first).name != shared and Path(first).parent != Path(tempfile.gettempdir())


# An API server that serves its version and no kind: all the dynamic client asks on creation.
FAKE_SERVER = """
import http.server, json, threading
ANSWERS = {
    "/version": {"major": "1", "minor": "36", "gitVersion": "v1.36.3"},
    "/api": {"kind": "APIVersions", "versions": ["v1"]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": []},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
}
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(ANSWERS.get(self.path.split("?")[0], {})).encode()
        self.send_response(200 if self.path.split("?")[0] in ANSWERS else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
HOST = "http://127.0.0.1:%d" % server.server_port
"""


def test_an_applier_discovers_into_that_file_and_the_directory_goes_with_the_process(tmp_path):
    """In a process of its own, against a stand-in API server: the Applier's dynamic client writes
    what it discovered to the process's file, none to the shared temporary directory, and the
    process's directory is removed when it exits."""
    script = (
        FAKE_SERVER
        + """
import os, sys
from kubernetes import client
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
applier = kube.Applier(client.ApiClient(client.Configuration(host=HOST)))
own = kube.discovery_cache_file(HOST)
print(json.dumps({"own": own, "written": os.path.exists(own), "tmp": sorted(os.listdir(sys.argv[1]))}))
"""
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        env={"PYTHONPATH": str(REPO / "collections"), "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["written"] and seen["own"].startswith(str(tmp_path))
    # Only the process's own directory in the temporary directory: no osrcp-*.json beside it.
    assert seen["tmp"] == [Path(seen["own"]).parent.name]
    assert not Path(seen["own"]).parent.exists()


class _Answer:
    def __init__(self, data):
        self.data = data


class _Api:
    """An API client whose call_api answers ``data``, or raises ``error``."""

    def __init__(self, data=b"", error=None):
        self.data, self.error, self.paths = data, error, []

    def call_api(self, path, method, **options):
        self.paths.append((method, path))
        if self.error:
            raise self.error
        return _Answer(self.data)


def test_a_kubelet_s_configuration_is_read_through_the_node_proxy_or_the_request_is_named():
    api = _Api(json.dumps({"kubeletconfig": {"imagePullCredentialsVerificationPolicy": "AlwaysVerify"}}).encode())
    assert kube.kubelet_configuration(api, "w-1") == {"imagePullCredentialsVerificationPolicy": "AlwaysVerify"}
    assert api.paths == [("GET", "/api/v1/nodes/w-1/proxy/configz")]
    for api, said in (
        (_Api(b"<html>"), "not a kubelet's configuration"),
        (_Api(b'{"other": 1}'), "not a kubelet's configuration"),
        (_Api(b'{"kubeletconfig": []}'), "not a kubelet's configuration (list)"),
        (_Api(error=ApiException(status=503, reason="Service Unavailable")), "503 Service Unavailable"),
    ):
        with pytest.raises(kube.KubeError, match="GET /api/v1/nodes/w-1/proxy/configz: ") as raised:
            kube.kubelet_configuration(api, "w-1")
        assert said in str(raised.value)
