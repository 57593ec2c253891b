"""End-to-end fixtures: a sandbox of the test's own, driven through the real playbooks.

The tests' sandbox has its own state directory and ports, so a sandbox a developer runs on the
default ports is left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import yaml
from kubernetes import dynamic

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube_client
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane
from cli import playbook as runner
from cli.playbook import PlaybookRun

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")
# The ports of a sandbox: the control plane's and every engine's (sandbox/control_plane.py's PORT_TABLE).
PORTS_PER_SANDBOX = control_plane.PORTS_PER_SANDBOX


# tryfirst: pytest-xdist's own hook on the workers reads the xdist_group markers to put the group in
# the test ids (its scheduler groups by that suffix); it must see the markers this hook adds.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group the tests for pytest-xdist (``--dist loadgroup``) by the sandbox they use, so that a
    module's tests run in order on one worker and each worker brings up a sandbox once:

    - a module's tests on the session's sandbox: one group per module. Each worker has its own
      session sandbox (session fixtures are per worker), so modules run side by side, each on the
      sandbox of the worker that took it, as they ran one after the other on one sandbox before;
    - the tests on a module's (or a module parameter's) sandbox: one group each;
    - a test with a sandbox of its own (``own_sandbox``): no group, on whichever worker is free.

    The longest groups go first (a stable sort: each module keeps its own order; run with
    ``--no-loadscope-reorder``, or pytest-xdist puts the groups with the most tests first), so that
    the workers finish together instead of one starting the 7-minute site test when the rest are done."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and (group := sandbox_group(item)):
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: run_order(item.module.__name__.rsplit(".", 1)[-1]))


# Modules by the measured wall time of their longest group, longest first (--durations of a full
# run: the lab's group, the longest, 54 minutes on 2 Dec: test_lab, test_lab_site and the bundle on one
# worker; the upgrade's lab is ``LAST``, below. Then the monitoring's two module sandboxes (KAI's
# about 22 minutes, Kueue's 16, measured 2 Dec with bench/suite_profile.py: they had been spread
# over the workers, each bringing its own up, until their groups were named right) and the
# differential's (15); the site test twice through site.yml; the
# scenarios on KAI and on Kueue's sandbox; the faults on a sandbox of their own; Kueue's module
# sandbox; Koordinator's tree; the molecule scenarios; storage; the quota trees).
LONGEST_FIRST = {
    name: rank
    for rank, name in enumerate(
        (
            "test_lab",
            "test_monitoring",
            "test_differential",
            "test_site",
            "test_scenarios",
            "test_faults",
            "test_kueue",
            "test_koordinator",
            "test_report_history",
            "test_molecule",
            "test_storage",
            "test_quota_tree",
        )
    )
}


# Modules whose group goes after every other, so that a worker takes it when the sandboxes' groups
# are done: the upgrade's lab of its own (about 12 minutes) then runs beside the lab's group alone,
# not beside three sandboxes (two labs and two sandboxes on two cores failed lab tests on timeouts).
# In the lab's group it ran after the site's lab went down, while three workers stood idle.
LAST = ("test_lab_upgrade",)


def run_order(module: str) -> int:
    """A module's place in the run: the longest groups first, the rest in collection order, ``LAST`` at the end."""
    if module in LAST:
        return len(LONGEST_FIRST) + 1 + LAST.index(module)
    return LONGEST_FIRST.get(module, len(LONGEST_FIRST))


def sandbox_group(item: pytest.Item) -> str | None:
    names = getattr(item, "fixturenames", ())
    if "sandbox" in names:
        return session_sandbox_group(item.module.__name__)
    callspec = getattr(item, "callspec", None)
    for name in names:
        definitions = item._fixtureinfo.name2fixturedefs.get(name, ())  # type: ignore[attr-defined]
        if any(definition.scope in ("module", "package", "class") for definition in definitions):
            param = callspec.params.get(name) if callspec else None
            # Never "[param]" at the end: pytest-xdist takes a test id whose last "]" comes after its
            # "@group" for a parametrized test of no group, and spreads the tests over the workers
            # (each then brought the module's sandbox up for itself).
            return "%s::%s%s" % (item.module.__name__, name, "" if param is None else "(%s)" % param)
    return None


def session_sandbox_group(module: str) -> str:
    return f"{module}:session-sandbox"


def free_port_base() -> int:
    """A base port whose whole range is free on 127.0.0.1, so test sandboxes never collide with a
    developer's sandbox or with another test run on the same machine."""
    rng = random.Random()
    # Each pytest-xdist worker (gw0, gw1...) draws from its own slice of the range, so that two
    # workers probing at the same moment never pick the same free range.
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    slice_size = (32000 - 20000) // workers // PORTS_PER_SANDBOX * PORTS_PER_SANDBOX
    low = 20000 + worker * slice_size
    for _ in range(200):
        # Below the ephemeral range (32768 and up on Linux), where client sockets take their ports.
        base = rng.randrange(low, low + slice_size - PORTS_PER_SANDBOX, PORTS_PER_SANDBOX)
        sockets = []
        try:
            for port in range(base, base + PORTS_PER_SANDBOX):
                probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(probe)
                probe.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for probe in sockets:
                probe.close()
    raise RuntimeError("no free range of %d ports on 127.0.0.1" % PORTS_PER_SANDBOX)


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.5):
    """Call ``predicate`` until it returns something true or ``timeout`` seconds pass; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def run_playbook(playbook: str, *args: str, inventory: str | Path | None = None, timeout: int = 900) -> PlaybookRun:
    """Run a playbook of the repository through the entry point's ansible-runner code; the result
    carries the output, the PLAY RECAP and which tasks changed on which host, read from the events."""
    return runner.run_playbook(playbook, args, inventory=inventory or REPO / "inventories" / "sandbox", timeout=timeout)


def role_after_inventory_check(play: str, role: str) -> str:
    """A playbook that checks the inventory (the site_inventory role sets what roles read) and then
    runs one ``role`` on the first control-plane host, as the stage playbooks do."""
    return f"""
- name: Check the inventory in mode kubeadm
  hosts: kube_control_plane[0]
  gather_facts: false
  roles:
    - role: site_inventory

- name: {play}
  hosts: kube_control_plane[0]
  gather_facts: false
  roles:
    - role: {role}
"""


def ad_hoc(module: str, args: dict, *flags: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run one module on localhost ad hoc (``ansible localhost -m MODULE -a ARGS``), as an admin would."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env["PATH"] = "%s:%s" % (Path(sys.executable).parent, env["PATH"])
    return subprocess.run(
        [str(Path(sys.executable).parent / "ansible"), "localhost", "-m", module, "-a", json.dumps(args), *flags],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ansible_module(module: str, args: dict, sandbox: Sandbox) -> subprocess.CompletedProcess:
    """Run one module of the collection on localhost against the sandbox, as an admin would ad hoc."""
    return ad_hoc(module, {"kubeconfig": str(sandbox.kubeconfig), **args})


def helm_template(args: dict, *flags: str) -> list[dict]:
    """The documents ``kubernetes.core.helm_template`` renders for ``args`` (``flags``: ansible's)."""
    done = ad_hoc("kubernetes.core.helm_template", args, *flags)
    assert done.returncode == 0, done.stdout + done.stderr
    return [doc for doc in yaml.safe_load_all(module_result(done)["stdout"]) if doc]


def helm_render(chart: Path | str, release: str, namespace: str, values: dict, *flags: str) -> list[dict]:
    """``helm template`` (the build cache's helm) of ``chart`` with ``values``, CRDs included."""
    done = subprocess.run(
        [str(sandbox_build.plan().binary("helm")), "template", release, str(chart), "--namespace", namespace]
        + ["--include-crds", *flags, "-f", "-"],
        input=yaml.safe_dump(values),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render_role_chart(role: str, chart_ref: Path, release: str, namespace: str, **options) -> list[dict]:
    """A chart from the build cache rendered with ``role``'s Helm values (its defaults'
    ``<role>_helm_values``), by helm through kubernetes.core.helm_template."""
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
    values = f"{role}_helm_values"
    args = {
        "chart_ref": str(chart_ref),
        "binary_path": str(sandbox_build.plan().binary("helm")),
        "release_name": release,
        "release_namespace": namespace,
        "release_values": defaults[values],
        **options,
    }
    # The values may name the role's other defaults (kueue_scheduler_version): they go as extra vars,
    # which Ansible templates only where they are used.
    others = {name: value for name, value in defaults.items() if name != values}
    return helm_template(args, "-e", json.dumps(others))


def dynamic_client(api) -> dynamic.DynamicClient:
    """A dynamic client with the discovery cache of this process's own (kube.client's), not the
    one file per server URL that every test run reaching the same port would share."""
    return dynamic.DynamicClient(api, cache_file=kube_client.discovery_cache_file(api.configuration.host))


def dry_run_apply(api, objects: list[dict], namespace: str, **options) -> None:
    """Server-side apply every object as a dry run, so the API server validates it (a namespaced
    object without a namespace goes to ``namespace``)."""
    resources = dynamic_client(api).resources
    for obj in objects:
        resource = resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        resource.server_side_apply(
            body=obj,
            name=obj["metadata"]["name"],
            namespace=(obj["metadata"].get("namespace") or namespace) if resource.namespaced else None,
            field_manager="clusterproof-chart-check",
            dry_run="All",
            **options,
        )


def settled(observe: Callable[[], T], seconds: float, timeout: float) -> T | None:
    """Poll ``observe`` until its value has not changed for ``seconds``; return it (the last value
    seen when ``timeout`` passes first)."""
    last, since = None, time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = observe()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return now
        time.sleep(1)
    return last


def module_result(done: subprocess.CompletedProcess) -> dict:
    """The JSON result an ad-hoc ``ansible localhost -m`` run prints after ``=> ``."""
    return json.loads(done.stdout[done.stdout.index("=> {") + 3 :])


@contextlib.contextmanager
def own_sandbox(inventory: Path, state_dir: Path, scheduler: bool = True) -> Iterator[Sandbox]:
    """A sandbox of the test's own for ``inventory`` (and its scheduler unless told not), on free
    ports; always torn down after, also when the test fails."""
    port_base = free_port_base()
    try:
        up = run_playbook("playbooks/sandbox.yml", *sandbox_vars(state_dir, port_base), inventory=inventory)
        assert up.returncode == 0, up.tail(3000)
        if scheduler:
            installed = run_playbook(
                "playbooks/scheduler.yml", *sandbox_vars(state_dir, port_base), inventory=inventory
            )
            assert installed.returncode == 0, installed.tail(3000)
        yield Sandbox(state_dir, port_base, up)
    finally:
        down = sandbox_down(state_dir, port_base, inventory)
        assert down.returncode == 0, down.tail(3000)


def two_team_scenario(name: str, title: str, source: str, steps: str) -> str:
    """A scenario file for the two 4-GPU nodes of :func:`two_node_site`: team-a and team-b, a quota of
    4 each under the runai policy; ``steps`` is its ``steps:`` list, as YAML."""
    return f"""\
name: {name}
title: "{title}"
source: "{source}"
policy: runai
capacity: {{gpus: 8, node_gpus: 4}}
projects:
  - {{name: team-a, gpu_quota: 4}}
  - {{name: team-b, gpu_quota: 4}}
steps:
{steps}"""


def two_node_site(site_name: str, extra_vars: str = "") -> str:
    """The inventory of a small sandbox site for a test of its own: two 4-GPU nodes, validated from
    localhost, without benchmarks or host tests (the nodes are simulated). ``extra_vars``: more
    lines under ``vars``, indented four spaces."""
    return f"""
all:
  children:
    kube_control_plane:
      hosts:
        localhost:
          ansible_connection: local
          ansible_python_interpreter: '{{{{ ansible_playbook_python }}}}'
    gpu_nodes:
      hosts:
        dgx1-1: {{gpu_count: 4}}
        dgx1-2: {{gpu_count: 4}}
  vars:
    clusterproof_site_name: {site_name}
    clusterproof_benchmarks: false
    clusterproof_host_tests: false
{extra_vars}"""


def sandbox_down(state_dir: Path, port_base: int, inventory: str | Path | None = None) -> PlaybookRun:
    """Stop a test's sandbox and remove its state."""
    return run_playbook(
        "playbooks/sandbox.yml",
        "-e",
        "sandbox_cluster_state=down",
        *sandbox_vars(state_dir, port_base),
        inventory=inventory,
    )


def sandbox_vars(state_dir: Path, port_base: int) -> list[str]:
    return ["-e", f"clusterproof_sandbox_dir={state_dir}", "-e", "clusterproof_sandbox_port_base=%d" % port_base]


@dataclass
class Sandbox:
    state_dir: Path
    port_base: int
    first_up: PlaybookRun

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    def vars(self) -> list[str]:
        return sandbox_vars(self.state_dir, self.port_base)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    state_dir = tmp_path_factory.mktemp("sandbox") / "state"
    port_base = free_port_base()
    up = run_playbook("playbooks/sandbox.yml", *sandbox_vars(state_dir, port_base))
    try:
        assert up.returncode == 0, up.tail(5000)
        yield Sandbox(state_dir, port_base, up)
    finally:
        sandbox_down(state_dir, port_base)


@pytest.fixture(scope="session")
def api_client(sandbox: Sandbox):
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(sandbox.kubeconfig))
    yield api
    api.close()


@pytest.fixture(scope="session")
def kai_site(sandbox: Sandbox) -> PlaybookRun:
    """KAI scheduler and the inventory's projects on the session's sandbox."""
    run = run_playbook("playbooks/scheduler.yml", *sandbox.vars())
    assert run.returncode == 0, run.tail(5000)
    return run
