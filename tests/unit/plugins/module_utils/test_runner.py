"""kube.runner: one argument spec from shared pieces, one way a module fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.common import bounds
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import etcd
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane
from tests.conftest import run_module_file

MODULES = Path(__file__).resolve().parents[4] / "collections/ansible_collections/clusterproof/gpu/plugins/modules"


class Failed(Exception):
    pass


class FakeModule:
    def fail_json(self, **result):
        raise Failed(result)


class ApiException(Exception):  # named as the client library names it
    def __init__(self, status, reason, body):
        super().__init__(reason)
        self.status, self.reason, self.body = status, reason, body


def failure(error, doing="applying the queue", hint=""):
    with pytest.raises(Failed) as failed:
        runner.fail_from_exception(FakeModule(), error, doing, hint)
    return failed.value.args[0]


def test_pieces_are_copied_so_a_module_cannot_change_another_ones_spec():
    spec = runner.argument_spec(runner.SANDBOX_INSTALL_ARG_SPEC, {"state_dir": {"type": "path", "required": True}})
    assert spec["state_dir"]["required"] is True
    assert "required" not in runner.SANDBOX_INSTALL_ARG_SPEC["state_dir"]
    spec["port_base"]["default"] = 1
    assert runner.SANDBOX_INSTALL_ARG_SPEC["port_base"]["default"] == 16440
    assert set(runner.argument_spec(auth=True)) == set(kube.AUTH_ARG_SPEC)


def test_an_api_error_says_what_was_done_and_what_the_api_said():
    error = ApiException(403, "Forbidden", b'{"message": "queues is forbidden"}')
    assert runner.api_error_message(error, "applying the queue", "check the RBAC") == (
        "applying the queue failed: 403 Forbidden: queues is forbidden (check the RBAC)"
    )


def test_module_errors_keep_their_details_and_client_errors_say_what_was_done():
    assert failure(runner.ModuleError("bad classes", releases=[])) == {"msg": "bad classes", "releases": []}
    assert failure(kube.KubeError("kubeconfig /x does not exist")) == {
        "msg": "applying the queue failed: kubeconfig /x does not exist"
    }
    assert failure(ValueError("odd")) == {"msg": "applying the queue failed: ValueError: odd"}


def test_an_api_error_fails_the_module_with_what_the_api_said():
    assert failure(ApiException(422, "Unprocessable Entity", '{"message": "field is immutable"}')) == {
        "msg": "applying the queue failed: 422 Unprocessable Entity: field is immutable"
    }


def test_the_runner_needs_no_client_library():
    assert "client" not in vars(runner)


class Exited(Exception):
    pass


class RecordingModule:
    """Stands in for AnsibleModule: keeps the spec it was given, exits and fails by raising."""

    specs: list[dict] = []

    def __init__(self, argument_spec, supports_check_mode, **options):
        RecordingModule.specs.append(argument_spec)
        self.params, self.check_mode, self.tmpdir = {"host": "gpu-1"}, True, "/tmp/module"

    def exit_json(self, **result):
        raise Exited(result)

    def fail_json(self, **result):
        raise Failed(result)


def test_a_host_check_takes_its_options_and_the_host_check_ones_and_reports_its_options_error(monkeypatch):
    monkeypatch.setattr(runner.basic, "AnsibleModule", RecordingModule)
    calls = []

    def check(params, check_mode, tmpdir):
        calls.append((params, check_mode, tmpdir))
        return {"checks": []}

    with pytest.raises(Exited) as exited:
        runner.run_host_check({"host": {"type": "str"}}, check, doing="checking the host", expected=(ValueError,))
    assert exited.value.args[0] == {"checks": [], "changed": False}
    assert calls == [({"host": "gpu-1"}, True, "/tmp/module")]
    assert set(RecordingModule.specs[-1]) == {"host", *runner.HOST_CHECK_ARG_SPEC}

    def bad_options(params, check_mode, tmpdir):
        raise ValueError("timeout: expected a number of seconds > 0")

    with pytest.raises(Failed) as failed:
        runner.run_host_check({}, bad_options, doing="checking the host", expected=(ValueError,))
    assert failed.value.args[0] == {"msg": "timeout: expected a number of seconds > 0"}


def test_a_cluster_module_takes_its_options_and_the_auth_ones(monkeypatch):
    monkeypatch.setattr(runner.basic, "AnsibleModule", RecordingModule)

    with pytest.raises(Exited) as exited:
        runner.run_cluster_module(
            runner.QUOTA_TREE_ARG_SPEC, {"host": {"type": "str"}}, work=lambda module: {}, doing="reading the tree"
        )
    assert exited.value.args[0] == {"changed": False}
    assert set(RecordingModule.specs[-1]) == {"tree", "host", *kube.AUTH_ARG_SPEC}


def test_a_simulated_nodes_module_takes_the_timeout_and_reports_its_sandbox_and_file_errors(monkeypatch):
    monkeypatch.setattr(runner.basic, "AnsibleModule", RecordingModule)

    class SandboxError(RuntimeError):
        pass

    for error in (SandboxError("kwok did not start: see kwok.log"), OSError("/state: Permission denied")):

        def failing(module, error=error):
            raise error

        with pytest.raises(Failed) as failed:
            runner.run_simulated_nodes(
                {"nodes": {"type": "list"}},
                work=failing,
                doing="running the sandbox",
                required_if=[],
                expected=(SandboxError,),
            )
        assert failed.value.args[0] == {"msg": str(error)}
        assert set(RecordingModule.specs[-1]) == {"nodes", *runner.SIMULATED_NODES_ARG_SPEC}


def test_a_host_command_module_reports_a_refused_option_and_a_failed_command_as_they_are(monkeypatch):
    monkeypatch.setattr(runner.basic, "AnsibleModule", RecordingModule)

    with pytest.raises(Exited) as exited:
        runner.run_host_command({"host": {"type": "str"}}, lambda module: {"found": 1}, doing="reading the host")
    assert exited.value.args[0] == {"found": 1, "changed": False}
    assert set(RecordingModule.specs[-1]) == {"host"}

    for error in (ValueError("stamp: expected a UTC time"), RuntimeError("etcdctl exited 1: no leader")):

        def failing(module, error=error):
            raise error

        with pytest.raises(Failed) as failed:
            runner.run_host_command({}, failing, doing="reading the host")
        assert failed.value.args[0] == {"msg": str(error)}


def test_an_expected_error_with_no_message_says_what_failed_not_module_failed(monkeypatch):
    # A bare TimeoutError (an OSError) once ended a sandbox KAI start as the controller's "Module failed."
    monkeypatch.setattr(runner.basic, "AnsibleModule", RecordingModule)

    def bare(params, check_mode, tmpdir):
        raise TimeoutError()

    with pytest.raises(Failed) as failed:
        runner.run_host_check({}, bare, doing="installing KAI scheduler", expected=(OSError,))
    result = failed.value.args[0]
    assert result["msg"] == "installing KAI scheduler failed: TimeoutError, with no message"
    assert "raise TimeoutError()" in result["exception"]


def test_an_unexpected_error_names_its_type_where_it_was_raised_and_what_it_was_handling(monkeypatch):
    # The dynamic client's bare ResourceNotFoundError, raised while handling a 404, once ended a
    # sandbox KAI start as the controller's "Module failed." with nothing after it.
    monkeypatch.setattr(runner.basic, "AnsibleModule", RecordingModule)

    def bare_while_handling(params, check_mode, tmpdir):
        try:
            raise LookupError()
        except LookupError:
            raise KeyError()  # noqa: B904 (the context is what the message is to name)

    with pytest.raises(Failed) as failed:
        runner.run_host_check({}, bare_while_handling, doing="installing KAI scheduler", expected=())
    result = failed.value.args[0]
    assert result["msg"] == (
        "installing KAI scheduler failed with an unexpected KeyError with no message (raised at test_runner.py:%d), "
        "while handling LookupError with no message (raised at test_runner.py:%d)"
        % (bare_while_handling.__code__.co_firstlineno + 4, bare_while_handling.__code__.co_firstlineno + 2)
    )
    assert "KeyError" in result["exception"]

    def odd(params, check_mode, tmpdir):
        raise ZeroDivisionError("division by zero\nsecond line")

    with pytest.raises(Failed) as failed:
        runner.run_host_check({}, odd, doing="", expected=())
    assert failed.value.args[0]["msg"].startswith(
        "the module failed with an unexpected ZeroDivisionError: division by zero (raised at test_runner.py:"
    )


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"port_base": 70000}, "port_base: expected a number from 1024 to 65509, found 70000"),
        ({"port_base": 80}, "port_base: expected a number from 1024 to 65509, found 80"),
        ({"timeout": 0}, "timeout: expected a number from 1 to 86400, found 0"),
        ({"settle_seconds": float("nan")}, "settle_seconds: expected a number from 0 to 3600, found nan"),
        ({"step_timeout": float("inf")}, "step_timeout: expected a number from 1 to 86400, found inf"),
        ({"priority": 10**20}, "priority: expected a number from -2147483648 to 2147483647, found %d" % 10**20),
    ],
)
def test_shared_numeric_options_out_of_range_are_named_with_the_range(params, problem):
    assert runner.out_of_bounds(params) == [problem]


def test_numeric_options_in_range_or_absent_pass():
    assert runner.out_of_bounds({"port_base": 16440, "timeout": 120, "settle_seconds": 0.5, "priority": None}) == []
    assert runner.out_of_bounds({"name": "team-a", "gpu_quota": 10**9}) == []


def test_the_port_count_the_runner_checks_is_the_sandboxs():
    assert bounds.SANDBOX_PORTS == control_plane.PORTS_PER_SANDBOX


def test_a_module_refuses_an_out_of_range_option_before_it_acts(tmp_path):
    module = MODULES / "sandbox_cluster.py"
    state_dir = tmp_path / "state"
    result = run_module_file(module, {"state": "status", "state_dir": str(state_dir), "port_base": 70000})
    assert result["failed"] is True
    assert result["msg"] == "port_base: expected a number from 1024 to 65509, found 70000; nothing was changed"
    assert not state_dir.exists()


def test_an_api_server_out_of_reach_is_named_with_its_address_not_a_traceback():
    import urllib3

    pool = urllib3.HTTPSConnectionPool("127.0.0.1", 16443)
    error = urllib3.exceptions.MaxRetryError(pool, "/api", OSError("[Errno 111] Connection refused"))
    assert failure(error, doing="installing KAI")["msg"] == (
        "installing KAI failed: the API server at 127.0.0.1:16443 cannot be reached: [Errno 111] Connection refused"
    )


def test_the_static_pods_manifest_dir_the_modules_share_is_the_one_maintenance_reads():
    assert runner.STATIC_POD_MANIFESTS_ARG_SPEC["manifest_dir"]["default"] == etcd.MANIFEST_DIR
