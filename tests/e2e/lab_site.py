"""The lab's inventories. ``lab_vars``: the lab's own settings on a bridge of one's own, which every
lab inventory of the tests and benches starts from. ``declaration``: the lab as a site
(inventories/lab's settings) on a bridge and addresses of one's own, the inventory
tests/e2e/test_lab_site.py and bench/lab_site_bench.py run the site's playbooks with."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
LAB_VARS = REPO / "inventories" / "lab" / "group_vars"
# The lab's simulated DGX-1s (inventories/lab/hosts.yml): KWOK nodes of its cluster, run beside it.
SIMULATED = ("dgx1-1", "dgx1-2")


def lab_vars(state_dir: Path, bridge: str, gateway: str, **extra: Any) -> dict[str, Any]:
    """The lab's settings (playbooks/lab.yml): its state under ``state_dir``, its hosts on ``bridge``
    whose address is ``gateway``, reached over SSH as root with the lab's key; then ``extra``."""
    return {
        "lab_dir": str(state_dir),
        "lab_bridge": bridge,
        "lab_host_address": gateway + "/24",
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(state_dir / "id_ed25519"),
        "ansible_ssh_common_args": "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes"
        % (state_dir / "known_hosts"),
        **extra,
    }


def lab_hosts(hosts: Mapping[str, str]) -> dict[str, Any]:
    """The lab group of an inventory: each host at its address."""
    return {"lab": {"hosts": {name: {"ansible_host": address} for name, address in hosts.items()}}}


def declaration(
    site_name: str,
    gateway: str,
    bridge: str,
    control_plane: Mapping[str, str],
    workers: Mapping[str, str],
    base: Path,
    bundle: Path,
    extra_vars: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """inventories/lab's site (its settings, projects and simulated GPU nodes) with the lab's state,
    reports and KWOK's state under ``base``, served the bundle on ``gateway`` of ``bridge``."""
    site = yaml.safe_load((LAB_VARS / "all" / "site.yml").read_text())
    site.update(yaml.safe_load((LAB_VARS / "all" / "projects.yml").read_text()))
    site["clusterproof_site_name"] = site_name
    site["clusterproof_mirror"] = {
        "packages": "http://%s:8081/" % gateway,
        "registry": "%s:5000" % gateway,
        "insecure": True,
        "charts": "http://%s:8082/" % gateway,
    }
    state_dir = base / "state"
    simulated = yaml.safe_load((LAB_VARS / "simulated_gpu_nodes" / "gpus.yml").read_text())
    return {
        "all": {
            "vars": {
                **site,
                "clusterproof_reports_dir": str(base / "reports"),
                **lab_vars(
                    state_dir,
                    bridge,
                    gateway,
                    lab_bundle=str(bundle),
                    simulated_gpu_nodes_state_dir=str(base / "simulated"),
                    site_mirror_containerd_cri_settings={"restrict_oom_score_adj": True},
                ),
                **(extra_vars or {}),
            },
            "children": {
                "lab": {
                    "children": {
                        "kube_control_plane": {"hosts": {h: {"ansible_host": a} for h, a in control_plane.items()}},
                        "gpu_nodes": {"hosts": {h: {"ansible_host": a, "gpu_count": 0} for h, a in workers.items()}},
                    }
                },
                "simulated_gpu_nodes": {"hosts": {name: dict(simulated) for name in SIMULATED}},
            },
        }
    }


def quick_validation() -> tuple[str, ...]:
    """validate.yml's extra vars for a short run on a lab: no scenarios, benchmarks or host tests."""
    settings = {"validate_scenarios_files": [], "clusterproof_benchmarks": False, "clusterproof_host_tests": False}
    return ("-e", json.dumps(settings))


def report_checks(report: dict) -> dict[str, dict]:
    """A report's checks by id, over all its sections."""
    return {check["id"]: check for section in report["sections"] for check in section["checks"]}


def cluster_state(kubectl: Callable[[str], subprocess.CompletedProcess]) -> str:
    """What a failed install needs read beside its output: each node's conditions that are not as on
    a healthy node (Ready, no pressure), each pod that is neither running nor done with its reason,
    and the cluster's last warnings. ``kubectl`` runs kubectl on the control-plane host."""
    lines = ["", "--- the lab cluster when it failed ---"]
    nodes = kubectl("get nodes -o json")
    if nodes.returncode != 0:
        return "\n".join([*lines, "kubectl get nodes: " + nodes.stderr.strip()])
    for node in json.loads(nodes.stdout)["items"]:
        unusual = [
            "%s=%s (%s)" % (c["type"], c["status"], c.get("message", ""))
            for c in node["status"].get("conditions", [])
            if (c["type"] == "Ready") != (c["status"] == "True")
        ]
        taints = ["%s:%s" % (t["key"], t["effect"]) for t in node["spec"].get("taints", [])]
        lines.append("node %s: %s; taints %s" % (node["metadata"]["name"], "; ".join(unusual) or "healthy", taints))
    pods = kubectl("get pods -A -o json")
    for pod in json.loads(pods.stdout)["items"] if pods.returncode == 0 else []:
        status = pod.get("status", {})
        if status.get("phase") in ("Running", "Succeeded") and all(
            c.get("ready") for c in status.get("containerStatuses", [])
        ):
            continue
        waiting = [
            "%s: %s" % (c["name"], (c.get("state", {}).get("waiting") or {}).get("reason", ""))
            for c in status.get("containerStatuses", [])
        ]
        lines.append(
            "pod %s/%s on %s: %s %s %s %s"
            % (
                pod["metadata"]["namespace"],
                pod["metadata"]["name"],
                pod["spec"].get("nodeName", "-"),
                status.get("phase"),
                status.get("reason", ""),
                status.get("message", ""),
                waiting,
            )
        )
    events = kubectl("get events -A --field-selector type=Warning --sort-by=.lastTimestamp")
    lines.extend(events.stdout.splitlines()[-20:] if events.returncode == 0 else ["events: " + events.stderr.strip()])
    return "\n".join(lines)


def keep_machine_logs(logs: Path, target: Path) -> None:
    """Copy the lab's machine console logs (``logs``, in the state directory the lab's down removes)
    to ``target``, which stays with the test's temporary directory: what a failed run's next reader
    looks at."""
    if logs.is_dir():
        shutil.copytree(logs, target, dirs_exist_ok=True)
