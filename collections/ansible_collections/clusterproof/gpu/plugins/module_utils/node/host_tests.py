"""The GPU host suite's results as site report checks.

The suite (``tests/hosts``: testinfra tests that a GPU host is what the inventory says) is run by
pytest on the controller, one host at a time, and writes JUnit XML. This turns that XML into one
report check per test case (``host-tests/<host>/<test>``): pass, fail (a failure or an error),
skip; the message is the test's own assertion text, the one meant for the operator.

Also the checks of a host the suite did not run against: a simulated host (needs-hardware), a host
Ansible could not reach (every test failed, with the reason), check mode (skip). And the judging the
suite does on a host's files where it is more than a comparison: :func:`toolkit_config_problems`
(whether the container toolkit's config lets an unprivileged container pick GPUs by
``NVIDIA_VISIBLE_DEVICES``).

Pure, except :func:`run_suite`, which starts pytest in a subprocess. Nothing here imports Ansible.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.node import program
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check

SECTION_ID_PREFIX = "host-tests"
# pytest's exit codes that still mean "the tests ran (or failed to collect) and the JUnit file says how".
PYTEST_RAN = (0, 1, 2)
OUTPUT_TAIL = 2000

# Words that keep a case of their own in a title made from a test function's name.
_TITLE_WORDS = {
    "gpu": "GPU",
    "gpus": "GPUs",
    "nvidia": "NVIDIA",
    "cuda": "CUDA",
    "mig": "MIG",
    "ecc": "ECC",
    "containerd": "containerd",
    "cdi": "CDI",
}
# "tests/hosts/test_gpu_host.py:123: AssertionError": where pytest stopped, and what was raised.
_LOCATION = re.compile(r"^(?P<location>\S.*?:\d+): (?P<kind>[A-Za-z_][\w.]*)$")
# 'failed on setup with "Failed: nvidia-smi failed ..."': how pytest words an error outside the test body.
_PHASE_ERROR = re.compile(r'^failed on (?P<phase>\w+) with "(?P<text>.*)"$', re.DOTALL)
# "AssertionError: ..." or "Failed: ..." at the head of a message.
_KIND_PREFIX = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)|Failed|Skipped): ")


class HostTestsError(RuntimeError):
    """pytest could not run the suite, or left no JUnit XML behind."""


@dataclasses.dataclass(frozen=True)
class CaseResult:
    """One test case of a JUnit XML file, as pytest wrote it."""

    test: str  # the test function, e.g. test_gpu_count_is_the_inventorys
    module: str  # the JUnit classname, e.g. tests.hosts.test_gpu_host
    host: str | None  # the host testinfra ran it against; None for a case without one (a collection error)
    outcome: str  # passed | failed | error | skipped
    message: str  # what the test said, for the operator
    kind: str = ""  # what was raised (AssertionError, Failed), or the phase of an error
    location: str = ""  # file:line where pytest stopped
    duration_s: float | None = None


def host_of(parameter: str) -> str:
    """The host of a testinfra parameter id: ``ansible://h100-1`` -> ``h100-1``, ``ssh://root@gpu-1:22``
    -> ``gpu-1``, ``local://`` -> ``local``."""
    spec = parameter.split("://", 1)[1] if "://" in parameter else parameter
    spec = spec.split("?", 1)[0].rsplit("@", 1)[-1]
    if spec.startswith("["):  # [IPv6]:port
        return spec[1:].split("]", 1)[0]
    if spec.count(":") == 1:
        spec = spec.split(":", 1)[0]
    return spec or "local"


def _split_name(name: str) -> tuple[str, str | None]:
    """``test_x[ansible://h]`` -> (``test_x``, ``h``); a name without a parameter has no host."""
    match = re.match(r"^(?P<test>[^\[]+)(?:\[(?P<parameter>.*)\])?$", name)
    if not match:
        return name, None
    parameter = match.group("parameter")
    return match.group("test"), (host_of(parameter) if parameter else None)


def _exception_lines(text: str) -> list[str]:
    """The last block of pytest's ``E`` lines in a failure's text, without the ``E`` and the code's indent."""
    blocks: list[list[str]] = []
    previous_was_e = False
    for line in text.splitlines():
        is_e = line.startswith("E ") or line == "E"
        if is_e:
            if not previous_was_e:
                blocks.append([])
            blocks[-1].append(line[1:])
        previous_was_e = is_e
    if not blocks:
        return []
    lines = blocks[-1]
    indent = min((len(line) - len(line.lstrip(" ")) for line in lines if line.strip()), default=0)
    lines = [line[indent:] for line in lines]
    # pytest indents the continuation lines of an exception's message by two spaces.
    return lines[:1] + [line[2:] if line.startswith("  ") else line for line in lines[1:]]


def operator_message(text: str) -> str:
    """The test's own message from pytest's text: no exception class, no assertion rewriting detail."""
    lines = text.strip().splitlines()
    kept: list[str] = []
    for line in lines:
        stripped = line.strip()
        if kept and (stripped.startswith("assert ") or stripped.startswith("+  where") or stripped == "assert"):
            break
        if stripped.startswith("[+") and "full report in element text" in stripped:
            break
        kept.append(line.rstrip())
    message = "\n".join(line for line in kept if line.strip())
    return _KIND_PREFIX.sub("", message, count=1).strip()


def _failure_details(element: ET.Element) -> tuple[str, str, str]:
    """(message, kind, location) of a <failure> or <error>."""
    text = element.text or ""
    attribute = element.get("message") or ""
    kind, location = element.get("type") or "", ""
    last = next((line for line in reversed(text.strip().splitlines()) if line.strip()), "")
    found = _LOCATION.match(last)
    if found:
        location, kind = found.group("location"), found.group("kind")
    phase = _PHASE_ERROR.match(attribute)
    if phase:
        kind = "%s in %s" % (kind or "error", phase.group("phase"))
    exception = _exception_lines(text)
    if exception:
        message = operator_message("\n".join(exception))
    elif phase:
        message = operator_message(phase.group("text"))
    else:
        message = operator_message(attribute or text)
    return message or attribute or kind or element.tag, kind, location


def parse_junit(text: str) -> list[CaseResult]:
    """Every test case of a pytest JUnit XML document. Raises ValueError when it is not one."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as error:
        raise ValueError(f"not JUnit XML: {error}") from error
    if root.tag not in ("testsuites", "testsuite"):
        raise ValueError(f"not JUnit XML: the root element is <{root.tag}>, not <testsuites> or <testsuite>")
    results = []
    for case in root.iter("testcase"):
        test, host = _split_name(case.get("name") or "")
        module = case.get("classname") or ""
        time = case.get("time")
        duration = float(time) if time not in (None, "") else None
        outcome, message, kind, location = "passed", "", "", ""
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is None:
                continue
            outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
            if tag == "skipped":
                message = element.get("message") or (element.text or "").strip()
                kind = element.get("type") or ""
            else:
                message, kind, location = _failure_details(element)
            break
        results.append(
            CaseResult(
                test=test,
                module=module,
                host=host,
                outcome=outcome,
                message=message,
                kind=kind,
                location=location,
                duration_s=duration,
            )
        )
    return results


def title_of(test: str) -> str:
    """A title from a test function's name: ``test_gpu_count_is_the_inventorys`` -> ``GPU count is the inventorys``."""
    words = (test[len("test_") :] if test.startswith("test_") else test).split("_")
    words = [word for word in words if word]
    if not words:
        return test
    titled = [_TITLE_WORDS.get(word.lower(), word) for word in words]
    if words[0].lower() not in _TITLE_WORDS:
        titled[0] = titled[0][:1].upper() + titled[0][1:]
    return " ".join(titled)


def check_name(test: str) -> str:
    """The test's part of a check id: ``test_gpu_count_is_the_inventorys`` -> ``gpu-count-is-the-inventorys``."""
    name = test[len("test_") :] if test.startswith("test_") else test
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-").lower() or "test"


# How a test of the suite says it needs a GPU the host does not have (pytest.skip's reason begins so):
# its check is needs-hardware, not skip.
NEEDS_HARDWARE = "needs hardware:"


def checks_from_results(
    results: Iterable[CaseResult], host: str, titles: Mapping[str, str] | None = None
) -> list[Check]:
    """One check per test case of ``host``, and per case that names no host (a collection error).

    ``titles`` maps test function names to titles (their docstrings' first lines); other tests get
    one made from their name. A failure and an error are both ``fail``.
    """
    titles = titles or {}
    checks: list[Check] = []
    seen: set[str] = set()
    for result in results:
        if result.host is not None and result.host != host:
            continue
        name = check_name(result.test)
        if name in seen:  # the same test name in two files of the suite
            name = f"{result.module.rsplit('.', 1)[-1]}.{name}"
        seen.add(name)
        if result.outcome == "passed":
            status, observed = "pass", "passed"
        elif result.outcome == "skipped" and result.message.startswith(NEEDS_HARDWARE):
            status, observed = "needs-hardware", "not run"
        elif result.outcome == "skipped":
            status, observed = "skip", "skipped"
        else:
            status = "fail"
            observed = "failed" if result.outcome == "failed" else "error"
            if result.kind:
                observed += f": {result.kind}"
            if result.location:
                observed += f" at {result.location}"
        title = titles.get(result.test) or title_of(result.test)
        checks.append(_check(host, name, title, status, observed, result.message, result.duration_s))
    return checks


def _check(
    host: str, name: str, title: str, status: str, observed: str, message: str, duration_s: float | None = None
) -> Check:
    return Check(
        id=f"{SECTION_ID_PREFIX}/{host}/{name}",
        title=f"{host}: {title}",
        status=status,
        expected="pass",
        observed=observed,
        message=message,
        duration_s=duration_s,
    )


def checks_from_junit(text: str, host: str, titles: Mapping[str, str] | None = None) -> list[Check]:
    """The checks of ``host`` in a pytest JUnit XML document; one failed ``suite`` check when it has none."""
    checks = checks_from_results(parse_junit(text), host, titles)
    if not checks:
        checks.append(
            suite_failure(
                host,
                f"the JUnit XML holds no test case run against {host}: was the suite run with "
                f"--hosts=ansible://{host} and an inventory that declares it?",
            )
        )
    return checks


def suite_failure(host: str, reason: str, observed: str = "no results") -> Check:
    """A failed check for a suite that could not run against the host at all."""
    return _check(host, "suite", "The GPU host suite ran", "fail", observed, reason)


@dataclasses.dataclass(frozen=True)
class SuiteTest:
    """A test function of the suite, found by reading its source (nothing is imported or run)."""

    module: str
    test: str
    title: str | None  # the first line of its docstring, if it has one


def suite_tests(suite: str | os.PathLike[str]) -> list[SuiteTest]:
    """The suite's test functions (``test_*`` in ``test_*.py``), in file and source order."""
    found = []
    for path in sorted(Path(suite).glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
                docstring = ast.get_docstring(node)
                title = docstring.strip().splitlines()[0].rstrip(".") if docstring else None
                found.append(SuiteTest(module=path.stem, test=node.name, title=title))
    return found


def titles_of(tests: Iterable[SuiteTest]) -> dict[str, str]:
    return {test.test: test.title for test in tests if test.title}


def not_run(host: str, tests: Sequence[SuiteTest], status: str, reason: str) -> list[Check]:
    """The checks of a host the suite did not run against, every one with ``status`` and ``reason``:
    needs-hardware (a simulated host), fail (an unreachable host), skip (check mode)."""
    if not tests:
        return [_check(host, "suite", "The GPU host suite ran", status, "not run", reason)]
    checks, seen = [], set()
    for test in tests:
        name = check_name(test.test)
        if name in seen:
            name = f"{test.module}.{name}"
        seen.add(name)
        checks.append(_check(host, name, test.title or title_of(test.test), status, "not run", reason))
    return checks


def section(host: str, checks: Iterable[Check]) -> dict[str, object]:
    """The report section (``host-tests-<host>``) in the shape ``site_report`` accepts."""
    return {
        "id": f"{SECTION_ID_PREFIX}-{host}",
        "title": f"GPU host tests: {host}",
        "checks": [check.to_dict() for check in checks],
    }


def pytest_command(
    python: str,
    suite: str,
    host: str,
    inventory: str,
    junit: str,
    sudo: bool = False,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The pytest command that runs the suite against one inventory host through testinfra's Ansible backend."""
    command = [
        python,
        "-m",
        "pytest",
        suite,
        f"--hosts=ansible://{host}",
        f"--ansible-inventory={inventory}",
        f"--junitxml={junit}",
        # Neither this run's cache nor a plugin of the controller's environment has any business here.
        "-p",
        "no:cacheprovider",
        "-q",
        "-rfEs",
    ]
    if sudo:
        command.append("--sudo")
    command.extend(extra_args)
    return command


@dataclasses.dataclass(frozen=True)
class SuiteRun:
    command: list[str]
    returncode: int
    junit: str
    output: str  # the tail of what pytest printed


def run_suite(
    python: str,
    suite: str,
    host: str,
    inventory: str,
    project_dir: str,
    timeout: float,
    sudo: bool = False,
    extra_args: Sequence[str] = (),
    workdir: str | None = None,
    execute: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> SuiteRun:
    """Run the suite against ``host`` with ``python -m pytest`` in ``project_dir``, and read its JUnit XML.

    testinfra's Ansible backend calls ``ansible-inventory``, so the interpreter's own bin directory
    (a virtual environment's) goes first on PATH. Raises HostTestsError when pytest cannot be
    started, times out, or ends without tests run (a usage error: testinfra missing, say).
    """
    environment = dict(os.environ)
    environment["PATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(python)), environment.get("PATH", "")])
    with program.scratch_file("clusterproof_host_tests_", ".xml", workdir) as junit:
        command = pytest_command(python, suite, host, inventory, junit, sudo=sudo, extra_args=extra_args)
        completed = program.run_to_end(
            command,
            timeout=timeout,
            error=HostTestsError,
            not_found=lambda error: (
                f"{python} was not found on the controller ({error}): set python to the interpreter that has "
                "pytest and pytest-testinfra (the project's .venv/bin/python)"
            ),
            not_started=lambda error: f"{python} -m pytest could not be started: {error}",
            timed_out=lambda error: f"the GPU host suite did not finish against {host} within {timeout:g} s",
            execute=execute,
            cwd=project_dir,
            env=environment,
        )
        output = ((completed.stdout or "") + (completed.stderr or ""))[-OUTPUT_TAIL:]
        text = Path(junit).read_text(encoding="utf-8") if os.path.getsize(junit) else ""
        if completed.returncode not in PYTEST_RAN or not text:
            raise HostTestsError(
                "pytest exited %d against %s without test results: %s"
                % (completed.returncode, host, " ".join(output.split())[-800:] or "no output")
            )
        return SuiteRun(command=command, returncode=completed.returncode, junit=text, output=output)


# The NVIDIA Container Toolkit's config, which nvidia-container-runtime and its hook read for every
# container (the nvidia_container_toolkit role writes it; the GPU operator's toolkit container keeps its own).
TOOLKIT_CONFIG = "/etc/nvidia-container-runtime/config.toml"
ENVVAR_WHEN_UNPRIVILEGED = "accept-nvidia-visible-devices-envvar-when-unprivileged"
AS_VOLUME_MOUNTS = "accept-nvidia-visible-devices-as-volume-mounts"
# What the toolkit does where its config leaves a key out (its GetDefault).
TOOLKIT_DEFAULTS = {ENVVAR_WHEN_UNPRIVILEGED: True, AS_VOLUME_MOUNTS: False}


def toolkit_visible_devices_settings(gpus_only_by_volume_mounts: bool) -> dict[str, bool]:
    """The two top-level settings the nvidia_container_toolkit role writes for its switch
    ``nvidia_container_toolkit_gpus_only_by_volume_mounts``. Volume mounts are accepted either way: the
    device plugin clusterproof installs hands GPUs over that way."""
    return {ENVVAR_WHEN_UNPRIVILEGED: not gpus_only_by_volume_mounts, AS_VOLUME_MOUNTS: True}


# What a container sees where a key is not as expected: by the key and the value it should have.
_PICKS_ANY = "a container that requested no GPU sees every GPU it names in NVIDIA_VISIBLE_DEVICES"
_FRACTIONS_SEE_NONE = "a container given GPUs by NVIDIA_VISIBLE_DEVICES (KAI's GPU fractions) sees none"
_PLUGIN_PODS_SEE_NONE = "a pod the device plugin gives GPUs as volume mounts sees none"
_UNLESS_SET = {
    (ENVVAR_WHEN_UNPRIVILEGED, False): _PICKS_ANY,
    (ENVVAR_WHEN_UNPRIVILEGED, True): _FRACTIONS_SEE_NONE,
    (AS_VOLUME_MOUNTS, True): _PLUGIN_PODS_SEE_NONE,
}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return '"%s"' % value if isinstance(value, str) else repr(value)


def _tables_holding(config: Mapping[str, Any], key: str, prefix: str = "") -> list[str]:
    """The tables (dotted names) below the top level that hold ``key``."""
    found = []
    for name, value in config.items():
        if isinstance(value, Mapping):
            table = f"{prefix}.{name}" if prefix else name
            if key in value:
                found.append(table)
            found.extend(_tables_holding(value, key, table))
    return found


def toolkit_config_problems(
    text: str | None, expected: Mapping[str, bool], host: str, path: str = TOOLKIT_CONFIG
) -> list[str]:
    """What keeps the toolkit's config on ``host`` (``text``; None where the file is missing) from giving
    each top-level key of ``expected`` its value, set or as NVIDIA's default; empty where nothing does.
    Each message names the file and the key, says what was found and what it lets happen, and how to
    fix it."""
    where = f"{path} on {host}"
    config: dict[str, Any] = {}
    if text is not None:
        try:
            config = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            return [
                f"{where} is not valid TOML ({error}): the nvidia runtime cannot read it and starts no container. "
                "Repair it by hand, or move it aside (the runtime then takes NVIDIA's defaults) and run the "
                "nvidia_container_toolkit role, which writes the two visible-devices settings."
            ]
    problems = []
    for key, want in expected.items():
        found = config.get(key)
        if config.get(key, TOOLKIT_DEFAULTS.get(key)) is want:
            continue
        if key in config and not isinstance(found, bool):
            found_text = f"it sets {key} = {_toml_value(found)}, not a boolean: the runtime refuses the file"
        elif key in config:
            found_text = f"it sets {key} = {_toml_value(found)}"
        else:
            tables = _tables_holding(config, key)
            if text is None:
                found_text = "the file is missing"
            elif tables:
                under = "], [".join(tables)
                found_text = f"it sets {key} only under [{under}], where the toolkit does not read it"
            else:
                found_text = f"it does not set {key}"
            found_text += f", so NVIDIA's default {_toml_value(TOOLKIT_DEFAULTS.get(key))} applies"
        consequence = _UNLESS_SET.get((key, want))
        problems.append(
            f"{where}: expected {key} = {_toml_value(want)} at its top level; {found_text}"
            + (f" ({consequence})" if consequence and isinstance(found, bool | None) else "")
            + ". Run the nvidia_container_toolkit role, or on the host: "
            + f"nvidia-ctk config --in-place --set {key}={_toml_value(want)}"
        )
    return problems


class SuiteOptionsError(ValueError):
    """The module's options cannot run or read the suite; the message says what to set."""


def _run_checks(
    params: Mapping[str, Any], host: str, titles: Mapping[str, str], workdir: str | None
) -> tuple[list[Check], list[str], int | None, str]:
    """The suite run against ``host``: its checks, command, pytest's exit status and last output."""
    if not params["inventory"]:
        raise SuiteOptionsError("inventory is required to run the suite: the inventory that declares %s" % host)
    suite = params["suite"]
    try:
        run = run_suite(
            params["python"] or sys.executable,
            suite,
            host,
            params["inventory"],
            params["project_dir"] or os.path.dirname(os.path.dirname(os.path.abspath(suite))),
            timeout=params["timeout"],
            sudo=params["sudo"],
            extra_args=params["pytest_args"],
            workdir=workdir,
        )
    except HostTestsError as error:
        return [suite_failure(host, str(error), observed="not run")], [], None, ""
    try:
        checks = checks_from_junit(run.junit, host, titles)
    except ValueError as error:
        checks = [suite_failure(host, f"pytest wrote no readable JUnit XML: {error}")]
    return checks, run.command, run.returncode, run.output


def host_suite_result(params: Mapping[str, Any], check_mode: bool, workdir: str | None = None) -> dict[str, Any]:
    """What the host_tests module returns for its options: the suite run against the host, or read
    from a JUnit file CI wrote, or every test not run (a simulated host, an earlier failure, check mode)."""
    host, suite = params["host"], params["suite"]
    if not os.path.isdir(suite):
        raise SuiteOptionsError(f"suite {suite} is not a directory: point it at the project's tests/hosts")
    tests = suite_tests(suite)
    command: list[str] = []
    returncode, output = None, ""
    if params["failure"]:
        checks = not_run(host, tests, "fail", params["failure"])
    elif not params["hardware"]:
        reason = f"{host} is a simulated host (hardware=false): the GPU host suite needs a real GPU host"
        checks = not_run(host, tests, "needs-hardware", reason)
    elif params["junit_file"]:
        try:
            checks = checks_from_junit(Path(params["junit_file"]).read_text(encoding="utf-8"), host, titles_of(tests))
        except (OSError, ValueError) as error:
            raise SuiteOptionsError(
                f"cannot read the GPU host suite's results from {params['junit_file']}: {error}"
            ) from error
    elif check_mode:
        checks = not_run(host, tests, "skip", "check mode: the GPU host suite was not run")
    else:
        checks, command, returncode, output = _run_checks(params, host, titles_of(tests), workdir)
    return {
        "checks": [check.to_dict() for check in checks],
        "failed_checks": sum(1 for check in checks if check.status == "fail"),
        "section": section(host, checks),
        "command": command,
        "pytest_rc": returncode,
        "pytest_output": output,
    }
