"""kube.client's ApiClient: a request to an API server that never answers ends, rather than
blocking its module for good (the API server itself ends any request after 60 s)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import urllib3

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import base as kube_base
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from tests.unit.plugins.module_utils.helpers import write_kubeconfig


@pytest.fixture
def silent_server():
    """A TCP port that accepts connections and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted = []

    def accept():
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for connection in accepted:
        connection.close()


def _kubeconfig(tmp_path, port):
    return str(write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}"))


def test_a_request_without_a_timeout_of_its_own_ends_after_the_default(tmp_path, silent_server, monkeypatch):
    monkeypatch.setattr(kube, "DEFAULT_REQUEST_TIMEOUT", (1, 1))
    core = kube.core_v1(kube.api_client(_kubeconfig(tmp_path, silent_server)))
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.HTTPError) as raised:
        core.list_namespace()
    assert time.monotonic() - started < 10  # urllib3 retries a read timeout 3 times: about 4 s
    # ... and a scenario run stopped by it names the cause in a line (scenario_runner._brief)
    assert kube_base.unreachable_message(raised.value) == (
        f"the API server at 127.0.0.1:{silent_server} cannot be reached: Read timed out. (read timeout=1)"
    )


def test_a_request_s_own_timeout_wins(tmp_path, silent_server, monkeypatch):
    monkeypatch.setattr(kube, "DEFAULT_REQUEST_TIMEOUT", (60, 60))
    core = kube.core_v1(kube.api_client(_kubeconfig(tmp_path, silent_server)))
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.list_namespace(_request_timeout=(1, 1))
    assert time.monotonic() - started < 10
