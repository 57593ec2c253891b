#!/usr/bin/python
"""Run Prometheus (with clusterproof's rules) and kube-state-metrics on the sandbox, or stop them."""

DOCUMENTATION = r"""
module: monitoring
short_description: Run Prometheus with clusterproof's rules, and kube-state-metrics, on the clusterproof sandbox
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - With O(state=present), fetches the pinned Prometheus (Debian's package, into the monitoring cache) unless
    cached, makes Prometheus's identity on the sandbox (namespace C(clusterproof-monitoring), a service account
    with a token, allowed to read metrics endpoints only), writes the scrape configuration and the rule files into
    C(monitoring/) of the sandbox's state directory, and runs kube-state-metrics and Prometheus as local
    processes listening on 127.0.0.1 only.
  - Prometheus scrapes the API server, kube-scheduler's C(/metrics/resources), kube-state-metrics, itself and the
    GPU scheduler's own metrics endpoints (those its backend serves on the sandbox, labelled
    C(clusterproof_role=scheduler)).
  - Prometheus is restarted when its configuration, rules or token changed; re-running where all is in place
    changes nothing.
  - With O(state=absent), stops both processes; their files and objects stay until the sandbox goes down.
  - Only the sandbox is supported.
extends_documentation_fragment:
  - clusterproof.gpu.sandbox_install
options:
  state:
    description: C(present) runs the monitoring as declared; C(absent) stops its processes.
    type: str
    choices: [present, absent]
    default: present
  state_dir: {required: true}  # otherwise as the sandbox_install fragment documents it
  bin_dir:
    description: Directory with the C(kube-state-metrics) binary from the sandbox build; required with O(state=present).
    type: path
  port_base:
    description: The sandbox's port base; Prometheus listens on base+24, kube-state-metrics on base+25 and base+26.
    type: int
    default: 16440
  scheduler:
    description: The site's GPU scheduler, whose own metrics endpoints are scraped (C(none) for none).
    type: str
    default: kai
  rules_dir:
    description: Folder of the rule files (C(*.yml)) Prometheus loads; required with O(state=present).
    type: path
  retention:
    description: How long Prometheus keeps samples, a Prometheus duration of at least 1h (C(15d), C(12h)).
    type: str
    default: 15d
  prometheus_cache:
    description: Root of the monitoring cache Prometheus is fetched into; left out, C(~/.cache/clusterproof/monitoring).
    type: path
"""

EXAMPLES = r"""
- name: Run Prometheus and kube-state-metrics on the sandbox
  clusterproof.gpu.monitoring:
    state_dir: "{{ clusterproof_sandbox_dir }}"
    bin_dir: "{{ sandbox_binaries.bin_dir }}"
    scheduler: "{{ clusterproof_site.scheduler }}"
    rules_dir: "{{ role_path }}/files/rules"
    retention: 15d
"""

RETURN = r"""
applied:
  description: Objects and files created or changed (kind/name, file path).
  returned: always
  type: list
  elements: str
started:
  description: Processes this run started or restarted.
  returned: always
  type: list
  elements: str
stopped:
  description: Processes stopped by this run.
  returned: always
  type: list
  elements: str
prometheus_url:
  description: Prometheus's address on the sandbox (its HTTP API and web page).
  returned: with state=present
  type: str
fetched:
  description: Whether this run fetched Prometheus's package (false when cached, and in check mode).
  returned: with state=present
  type: bool
"""

from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import prometheus_package, settings
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import sandbox as monitoring
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import install
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import Layout, SandboxError
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry


def _rules(rules_dir):
    files = sorted(Path(rules_dir).glob("*.yml"))
    if not files:
        raise runner.ModuleError("rules_dir: expected a folder with rule files (*.yml), found none in %s" % rules_dir)
    return {path.name: path.read_text() for path in files}


def run(module):
    params = module.params
    layout = Layout(Path(params["state_dir"]))
    if params["state"] == "absent":
        step = install.InstallStep(layout, applier=None, check_mode=module.check_mode)
        monitoring.uninstall(step)
        return step.result()
    expected = settings.retention_problem(params["retention"])
    if expected:
        raise runner.ModuleError("retention: expected %s, found %r" % (expected, params["retention"]))
    if params["scheduler"] not in (*registry.names(), registry.NONE):
        raise runner.ModuleError(
            "scheduler: expected one of %s, found %r"
            % (", ".join((*registry.names(), registry.NONE)), params["scheduler"])
        )
    rules = _rules(params["rules_dir"])
    cache = Path(params["prometheus_cache"]) if params["prometheus_cache"] else None
    programs = prometheus_package.PrometheusPrograms.under(cache or prometheus_package.default_cache_root())
    fetched = False
    if not module.check_mode:
        programs, fetched = prometheus_package.fetch(cache)
    step = install.InstallStep.on(layout, module.check_mode)
    url = monitoring.install(
        step,
        port_base=params["port_base"],
        scheduler=params["scheduler"],
        prometheus_bin=programs.prometheus,
        kube_state_metrics_bin=Path(params["bin_dir"]) / monitoring.KUBE_STATE_METRICS,
        rules=rules,
        retention=params["retention"],
        timeout=params["timeout"],
    )
    return step.result(prometheus_url=url, fetched=fetched)


def main():
    options = {
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "state_dir": {"type": "path", "required": True},
        "scheduler": {"type": "str", "default": registry.DEFAULT},
        "rules_dir": {"type": "path"},
        "retention": {"type": "str", "default": settings.RETENTION_DEFAULT},
        "prometheus_cache": {"type": "path"},
    }
    runner.run_sandbox_install(
        options,
        work=run,
        doing="installing the monitoring",
        required_if=[("state", "present", ("bin_dir", "rules_dir"))],
        expected=(SandboxError, prometheus_package.PrometheusFetchError),
    )


if __name__ == "__main__":
    main()
