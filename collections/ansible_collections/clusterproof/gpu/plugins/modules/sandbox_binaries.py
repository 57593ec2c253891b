#!/usr/bin/python
"""Make sure the sandbox binaries are built in the per-machine cache."""

DOCUMENTATION = r"""
module: sandbox_binaries
short_description: Build the sandbox's etcd, Kubernetes control plane and KWOK binaries into a cache
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK from their Go
    modules at pinned versions into a cache directory keyed by those versions and the Go version.
  - Builds kubeadm, kubelet and kubectl of the same Kubernetes version too; the sandbox does not run
    them (kubeadm checks mode kubeadm's configuration, the three are packaged for a molecule mirror).
  - A cache that already holds every binary is reused and the task reports no change.
  - The first build takes minutes (about 7 on 2 cores with a warm module download); progress is
    written to C(build.log) in the cache directory. For progress on the terminal, run
    C(./clusterproof build) before the playbook.
options:
  cache_dir:
    description: Root of the cache; the binaries land in C(<cache_dir>/<key>/bin).
    type: path
  kubernetes_version:
    description:
      - Version of k8s.io/kubernetes to build the control plane from.
      - Left out, the pin, from C(plugins/module_utils/versions.py).
    type: str
  etcd_version:
    description:
      - Version of go.etcd.io/etcd/server/v3.
      - Left out, the pin, from C(plugins/module_utils/versions.py).
    type: str
  kwok_version:
    description:
      - Version of sigs.k8s.io/kwok.
      - Left out, the pin, from C(plugins/module_utils/versions.py).
    type: str
  kai_scheduler_version:
    description:
      - Version of github.com/NVIDIA/KAI-scheduler.
      - Left out, the pin, from C(plugins/module_utils/versions.py).
    type: str
  helm_version:
    description:
      - Version of helm.sh/helm/v3.
      - Left out, the pin, from C(plugins/module_utils/versions.py).
    type: str
  local_path_provisioner_version:
    description:
      - Version of github.com/rancher/local-path-provisioner (the sandbox's storage provisioner).
      - Left out, the pin, from C(plugins/module_utils/versions.py).
    type: str
  kueue_version:
    description:
      - Version of sigs.k8s.io/kueue, the second scheduler backend.
      - Its chart, CRDs and webhook registrations are copied into C(kueue/) of the share directory.
      - Left out, the pin, from C(plugins/module_utils/versions.py).
    type: str
  koordinator_version:
    description:
      - Version of github.com/koordinator-sh/koordinator, whose koord-scheduler runs the elastic quota tree.
      - Its CRDs are copied into C(koordinator/crds) of the share directory.
      - Left out, the pin, from C(plugins/module_utils/versions.py).
    type: str
  kube_state_metrics_version:
    description:
      - Version of k8s.io/kube-state-metrics/v2, which the monitoring stage runs beside Prometheus.
      - Left out, the pin, from C(plugins/module_utils/versions.py).
    type: str
"""

EXAMPLES = r"""
- name: Build or reuse the sandbox binaries
  clusterproof.gpu.sandbox_binaries:
  register: sandbox_binaries
"""

RETURN = r"""
bin_dir:
  description: Directory holding the binaries.
  returned: always
  type: str
share_dir:
  description: Directory of files taken from the built modules (KAI scheduler's Helm chart in C(kai-scheduler/chart)).
  returned: always
  type: str
missing:
  description: Binaries that were missing before this run (built unless in check mode).
  returned: always
  type: list
  elements: str
build_log:
  description: Log of the build.
  returned: always
  type: str
"""

from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build

# One option per pinned version, named <component>_version; left out, the pin (module_utils/versions.py,
# through SandboxVersions' defaults).
VERSION_OPTIONS = (
    "kubernetes",
    "etcd",
    "kwok",
    "kai_scheduler",
    "helm",
    "kueue",
    "koordinator",
    "local_path_provisioner",
    "kube_state_metrics",
)
ARGUMENT_SPEC = {
    "cache_dir": {"type": "path"},
    **{name + "_version": {"type": "str"} for name in VERSION_OPTIONS},
}


def _plan(params):
    try:
        given = {name: params[name + "_version"] for name in VERSION_OPTIONS if params[name + "_version"] is not None}
        versions = sandbox_build.SandboxVersions(**given)
        sandbox_build.staging_version(versions.kubernetes)
        return sandbox_build.plan(versions, Path(params["cache_dir"]) if params["cache_dir"] else None)
    except (ValueError, OSError) as error:
        raise runner.ModuleError(str(error)) from error
    except Exception as error:  # go missing or broken: say so rather than a traceback
        raise runner.ModuleError(f"cannot plan the sandbox build (is Go installed?): {error}") from error


def run(module):
    plan = _plan(module.params)
    missing = plan.missing()
    result = {
        "changed": bool(missing),
        "bin_dir": str(plan.bin_dir),
        "share_dir": str(plan.share_dir),
        "missing": missing,
        "build_log": str(plan.key_dir / "build.log"),
    }
    if missing and not module.check_mode:
        messages = []
        try:
            sandbox_build.ensure_built(plan, messages.append)
        except (RuntimeError, OSError) as error:
            raise runner.ModuleError(f"sandbox build failed: {error}", progress=messages, **result) from error
        result["progress"] = messages
    return result


def main():
    runner.run_module(ARGUMENT_SPEC, run, doing="building the sandbox binaries")


if __name__ == "__main__":
    main()
