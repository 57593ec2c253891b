"""The runner every module goes through: argument specs from shared pieces, one way to fail.

As kubernetes.core's ``module_utils/k8s/runner.py`` does, a module here is three steps: build its
argument spec (its own options plus the shared pieces below), call :func:`run_module` with a
function that does the work through module_utils, and return what that function returns. Every
error on the way goes through :func:`fail_from_exception`, so an API error, an unreachable cluster
and a bad argument read the same in every module: what was being done, what the API said, and
where to look. An error no layer expected (a bug) is reported by :func:`unexpected_error_message`,
with its type and where it was raised.

May import: Ansible's module API, ``kube.base`` and ``common.bounds`` (never the client layer: host-side modules go
through here too, and their payload stays free of it). Touches nothing itself.
"""

from __future__ import annotations

import copy
import json
import math
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from ansible.module_utils import basic
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.bounds import INT32_MAX, PORT_BASE_MAX, PORT_MIN
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import base

# Options every module that acts on the sandbox shares (the sandbox doc fragment documents them).
SANDBOX_ARG_SPEC: dict[str, dict[str, Any]] = {
    "state_dir": {"type": "path", "required": True},
    "bin_dir": {"type": "path", "required": True},
    "share_dir": {"type": "path", "required": True},
    "port_base": {"type": "int", "required": True},
}


# Where a module that installs something on the sandbox finds the sandbox and the build (the
# sandbox_install doc fragment documents them); which of them a module requires, it says itself.
SANDBOX_INSTALL_ARG_SPEC: dict[str, dict[str, Any]] = {
    "state_dir": {"type": "path"},
    "bin_dir": {"type": "path"},
    "share_dir": {"type": "path"},
    "port_base": {"type": "int", "default": 16440},
    "timeout": {"type": "int", "default": 120},
}

# Where an engine goes: onto the sandbox, or (its Helm chart installed) onto the cluster of the kubeconfig
# (the sandbox_install doc fragment's CLUSTER_MODE documents them).
ENGINE_MODE_ARG_SPEC: dict[str, dict[str, Any]] = {
    "mode": {"type": "str", "choices": ["sandbox", "cluster"], "default": "sandbox"},
    "kubeconfig": {"type": "path"},
}

# The options of a module that checks a host from the report host: whether the host is real, and
# why it could not be reached (the host_check doc fragment documents them).
HOST_CHECK_ARG_SPEC: dict[str, dict[str, Any]] = {
    "hardware": {"type": "bool", "default": True},
    "failure": {"type": "str"},
}

# How long a module that runs KWOK-simulated GPU nodes (sandbox_cluster, simulated_gpu_nodes) waits for
# its processes and nodes (the simulated_nodes doc fragment documents it).
SIMULATED_NODES_ARG_SPEC: dict[str, dict[str, Any]] = {
    "timeout": {"type": "int", "default": 120},
}

# The inventory's declared storage classes, as the storage modules take them (the storage_classes
# doc fragment documents the option; install/storage.py classes_argument reads it).
STORAGE_CLASSES_ARG_SPEC: dict[str, dict[str, Any]] = {
    "classes": {"type": "list", "elements": "dict", "required": True},
}

# The inventory's declared quota tree, as the quota-tree modules take it (the quota_tree doc
# fragment documents the option; tenancy/quota_tree.py check_tree reads it).
QUOTA_TREE_ARG_SPEC: dict[str, dict[str, Any]] = {
    "tree": {"type": "list", "elements": "dict", "required": True},
}


# The inventory's declared projects, as the modules that check them take them (the declared_projects doc
# fragment documents the option).
DECLARED_PROJECTS_ARG_SPEC: dict[str, dict[str, Any]] = {
    "projects": {"type": "list", "elements": "dict", "required": True},
}


# Where clusterproof's Prometheus answers, as the modules that ask it take it (the prometheus doc fragment
# documents it): an address, the sandbox's port base, or clusterproof's pods on a kubeadm site through the
# API server (monitoring.reach.prometheus_of reads them).
PROMETHEUS_ARG_SPEC: dict[str, dict[str, Any]] = {
    "prometheus_url": {"type": "str"},
    "sandbox_port_base": {"type": "int"},
    "prometheus_in_cluster": {"type": "bool", "default": False},
}


# The rule files clusterproof ships, as the modules that load or check them take them (the rule_files doc
# fragment documents them): their text, read on the controller, or their folder on the module's host
# (monitoring.operator.given_rule_files reads them).
RULES_ARG_SPEC: dict[str, dict[str, Any]] = {
    "rules": {"type": "dict"},
    "rules_dir": {"type": "path"},
}


# Where the kubelet of a kubeadm control plane reads its static pods' manifests, as the modules that
# move, restart or read them take it (the static_pods doc fragment documents it). The same place as
# maintenance/etcd.py MANIFEST_DIR, which this layer may not import (a unit test holds them equal).
STATIC_POD_MANIFESTS_ARG_SPEC: dict[str, dict[str, Any]] = {
    "manifest_dir": {"type": "path", "default": "/etc/kubernetes/manifests"},
}


# The ranges of the numeric options that modules share by name, inclusive. Ansible checks an
# option's type only; these are checked before a module does anything, so that a value that would
# fail late or never (a port base of 70000, a NaN or negative timeout, a priority of 10^20) is
# refused at once, with the option's name, the range and the value.
NUMBER_BOUNDS: dict[str, tuple[float, float]] = {
    "port_base": (PORT_MIN, PORT_BASE_MAX),
    "timeout": (1, 86400),
    "request_timeout": (1, 3600),
    "cleanup_timeout": (1, 86400),
    "step_timeout": (1, 86400),
    "settle_seconds": (0, 3600),
    "arrival_seconds": (0, 3600),
    "decision_seconds": (0, 3600),
    "delay_evict_seconds": (0, 86400),
    "priority": (-INT32_MAX - 1, INT32_MAX),
    "interactive_time_limit_seconds": (1, INT32_MAX),
}


def out_of_bounds(params: Mapping[str, Any]) -> list[str]:
    """What of ``params`` is outside :data:`NUMBER_BOUNDS` (or not a finite number), one sentence each."""
    problems = []
    for name, (low, high) in NUMBER_BOUNDS.items():
        value = params.get(name)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not (math.isfinite(value) and low <= value <= high):
            problems.append("%s: expected a number from %s to %s, found %r" % (name, _plain(low), _plain(high), value))
    return problems


def _plain(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


class ModuleError(RuntimeError):
    """A failure a module reports as it is: the message already says what, where and why."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


def argument_spec(*pieces: Mapping[str, Mapping[str, Any]], auth: bool = False) -> dict[str, Any]:
    """One argument spec from a module's own options and the shared pieces (deep-copied)."""
    spec: dict[str, Any] = {}
    for piece in pieces:
        spec.update(copy.deepcopy(dict(piece)))
    if auth:
        spec.update(copy.deepcopy(base.AUTH_ARG_SPEC))
    return spec


def api_error_message(error: Any, doing: str, hint: str = "") -> str:
    """What an ApiException means for the operator: what was being done, status, reason, the API's own words."""
    status = getattr(error, "status", None)
    reason = getattr(error, "reason", None) or ""
    body = getattr(error, "body", None)
    said = ""
    if isinstance(body, (str, bytes)) and body:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            said = json.loads(text).get("message", "")
        except (ValueError, AttributeError):
            said = text.strip()[:300]
    message = f"{doing} failed: {status} {reason}".rstrip()
    if said and said not in message:
        message += f": {said}"
    if hint:
        message += f" ({hint})"
    return message


def fail_from_exception(module: AnsibleModule, error: BaseException, doing: str = "", hint: str = "") -> None:
    """The one place a module turns an exception into its failure (it does not return)."""
    if isinstance(error, ModuleError):
        module.fail_json(msg=str(error), **error.details)
    if isinstance(error, base.KubeError):
        module.fail_json(msg=f"{doing} failed: {error}" if doing else str(error))
    if base.is_api_error(error):
        module.fail_json(msg=api_error_message(error, doing or "the API request", hint))
    unreachable = base.unreachable_message(error)
    if unreachable:
        module.fail_json(msg=f"{doing or 'the API request'} failed: {unreachable}")
    module.fail_json(msg=f"{doing or 'the module'} failed: {type(error).__name__}: {error}")


def run_cluster_module(
    *options: Mapping[str, Mapping[str, Any]],
    work: Callable[[AnsibleModule], Mapping[str, Any]],
    doing: str,
    expected: tuple[type[BaseException], ...] = (),
    **module_options: Any,
) -> None:
    """Run a module that acts on the cluster of the kubeconfig: its own options and the shared pieces it
    names, with the auth options (the kube_auth doc fragment documents them)."""
    run_module(argument_spec(*options, auth=True), work, doing=doing, expected=expected, **module_options)


def run_host_check(
    options: Mapping[str, Any],
    check: Callable[[Mapping[str, Any], bool, str], Mapping[str, Any]],
    *,
    doing: str,
    expected: tuple[type[BaseException], ...],
) -> None:
    """Run a module that checks a GPU host: its own options and the host-check ones, then
    ``check(params, check_mode, tmpdir)``, whose options error (``expected``) is reported as it is."""
    run_module(
        argument_spec(options, HOST_CHECK_ARG_SPEC),
        lambda module: check(module.params, module.check_mode, module.tmpdir),
        doing=doing,
        expected=expected,
    )


def run_host_command(
    options: Mapping[str, Any],
    work: Callable[[AnsibleModule], Mapping[str, Any]],
    *,
    doing: str,
) -> None:
    """Run a maintenance module that acts on the host it runs on through commands (``maintenance/``):
    its own options, then ``work(module)``. An option it refuses (ValueError) and a command that failed
    or answered what it should not (RuntimeError, as ``maintenance.host_command`` raises) already say
    what and where, so they are reported as they are."""
    run_module(argument_spec(options), work, doing=doing, expected=(ValueError, RuntimeError))


def run_sandbox_install(
    *options: Mapping[str, Mapping[str, Any]],
    work: Callable[[AnsibleModule], Mapping[str, Any]],
    doing: str,
    required_if: list[Any],
    expected: tuple[type[BaseException], ...],
) -> None:
    """Run a module that installs an engine on the sandbox: the sandbox install options and its own,
    with ``expected`` (the sandbox's errors) and the file system's reported as they are (they name the path)."""
    run_module(
        argument_spec(SANDBOX_INSTALL_ARG_SPEC, *options),
        work,
        doing=doing,
        expected=(*expected, OSError),
        required_if=required_if,
    )


def run_simulated_nodes(
    options: Mapping[str, Mapping[str, Any]],
    *,
    work: Callable[[AnsibleModule], Mapping[str, Any]],
    doing: str,
    required_if: list[Any],
    expected: tuple[type[BaseException], ...],
) -> None:
    """Run a module that runs KWOK-simulated GPU nodes (sandbox_cluster, simulated_gpu_nodes): its own
    options and the simulated-nodes one, with ``expected`` (the sandbox's errors) and the file system's
    reported as they are (they name the path)."""
    run_module(
        argument_spec(options, SIMULATED_NODES_ARG_SPEC),
        work,
        doing=doing,
        expected=(*expected, OSError),
        required_if=required_if,
    )


def unexpected_error_message(error: BaseException, doing: str) -> str:
    """An error no layer expected, in a line: what was being done, the error's type and message,
    where it was raised, and what it was raised while handling (each of those as bare)."""
    parts = [f"{doing or 'the module'} failed with an unexpected {_error_summary(error)}"]
    cause = error.__cause__ or error.__context__
    if cause is not None:
        parts.append(f"while handling {_error_summary(cause)}")
    return ", ".join(parts)


def _error_summary(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (raised at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    message = str(error).strip().split("\n", 1)[0][:300]  # an API error's str holds its whole body and traceback
    return f"{type(error).__name__}: {message}{where}" if message else f"{type(error).__name__} with no message{where}"


def run_module(
    spec: Mapping[str, Any],
    work: Callable[[AnsibleModule], Mapping[str, Any]],
    *,
    doing: str,
    hint: str = "",
    check_mode: bool = True,
    expected: tuple[type[BaseException], ...] = (),
    **module_options: Any,
) -> None:
    """Parse arguments, run ``work(module)``, and exit with its result, or fail with a clear message.

    ``expected`` names further exception types of module_utils whose message is already meant for
    the operator (a pure layer's ``...Error``); they are reported as they are.
    """
    # Looked up when called, so that a linter's stand-in for AnsibleModule (ansible-lint's args rule)
    # is the one used.
    module = basic.AnsibleModule(argument_spec=dict(spec), supports_check_mode=check_mode, **module_options)
    problems = out_of_bounds(module.params)
    if problems:
        module.fail_json(msg="; ".join(problems) + "; nothing was changed")
    try:
        result = dict(work(module))
    except expected as error:  # type: ignore[misc]
        if str(error):
            module.fail_json(msg=str(error))
        # An expected error type raised with no message (a bare TimeoutError): say what failed, and
        # where, rather than the controller's bare "Module failed.".
        module.fail_json(
            msg=f"{doing} failed: {type(error).__name__}, with no message", exception=traceback.format_exc()
        )
    except Exception as error:
        known = isinstance(error, (ModuleError, base.KubeError)) or base.is_api_error(error)
        if not known and not base.unreachable_message(error):
            # A bug, or a library's error not yet turned into one of ours: its type and where it was
            # raised, in the message (the controller shows a module's traceback only when told to).
            module.fail_json(msg=unexpected_error_message(error, doing), exception=traceback.format_exc())
        fail_from_exception(module, error, doing, hint)
    result.setdefault("changed", False)
    module.exit_json(**result)
