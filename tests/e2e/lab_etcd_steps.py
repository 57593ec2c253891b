"""The etcd restore fault on a lab site, as steps a lab's tests call (issue 34): a snapshot taken, a
project's namespace and queue deleted, the latest snapshot restored, and the validation passing with
the project back.

Not collected by pytest (no test_ prefix): tests/e2e/test_lab_ha.py calls
``backup_delete_restore_validate`` on its three control planes (KAI's queues). ``lab``: ``inventory``,
``report()`` (the site's latest report.json) and ``kubectl(arguments, timeout=...)`` on the first
control plane. The lab's hosts must have been installed from a bundle that holds ``etcd-client``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.e2e.conftest import REPO, run_playbook

BACKUP = str(REPO / "playbooks" / "etcd_backup.yml")
RESTORE = str(REPO / "playbooks" / "etcd_restore.yml")
VALIDATE = str(REPO / "playbooks" / "validate.yml")
# A project's queue under KAI (scheduler/kai.py: a Queue named as the project).
KAI_QUEUE = "queues.scheduling.run.ai"


def _settings(backup_dir: Path) -> tuple[str, str]:
    return ("-e", json.dumps({"clusterproof_etcd_backup_dir": str(backup_dir)}))


def backup(lab: Any, backup_dir: Path):
    """etcd_backup.yml on the lab; returns its run (the snapshot and its .json land in ``backup_dir``)."""
    return run_playbook(BACKUP, *_settings(backup_dir), inventory=lab.inventory, timeout=600)


def snapshots(backup_dir: Path) -> list[str]:
    return sorted(path.name for path in backup_dir.glob("*-etcd-*.db"))


def project_present(lab: Any, project: str, queue_kind: str = KAI_QUEUE) -> dict[str, bool]:
    """Whether the project's namespace and its queue are in the cluster."""
    return {
        "namespace": lab.kubectl("get namespace %s" % project).returncode == 0,
        "queue": lab.kubectl("get %s %s" % (queue_kind, project)).returncode == 0,
    }


def delete_project(lab: Any, project: str, queue_kind: str = KAI_QUEUE) -> None:
    """The mistake: the project's queue and namespace deleted (the namespace waited for until gone)."""
    for arguments in ("delete %s %s --wait=true" % (queue_kind, project), "delete namespace %s --wait=true" % project):
        deleted = lab.kubectl(arguments, timeout=300)
        assert deleted.returncode == 0, deleted.stderr


def restore(lab: Any, backup_dir: Path, snapshot: str = "latest"):
    """etcd_restore.yml -e snapshot=``snapshot`` on the lab; returns its run."""
    return run_playbook(
        RESTORE, *_settings(backup_dir), "-e", "snapshot=%s" % snapshot, inventory=lab.inventory, timeout=900
    )


def validate(lab: Any, backup_dir: Path, *args: str):
    """validate.yml with the backup directory declared, and ``args`` (the test module's short-run settings)."""
    return run_playbook(VALIDATE, *_settings(backup_dir), *args, inventory=lab.inventory, timeout=900)


def backup_delete_restore_validate(
    lab: Any, backup_dir: Path, validate_args: tuple[str, ...] = (), project: str = "team-a"
) -> dict[str, float]:
    """The whole fault: back up, delete ``project``'s namespace and queue, restore the latest
    snapshot, validate. Asserts each step and returns its duration in seconds."""
    figures: dict[str, float] = {}
    assert project_present(lab, project) == {"namespace": True, "queue": True}

    started = time.monotonic()
    taken = backup(lab, backup_dir)
    figures["backup"] = time.monotonic() - started
    assert taken.returncode == 0, taken.tail(3000)
    assert len(snapshots(backup_dir)) == 1, list(backup_dir.iterdir())
    metadata = json.loads((backup_dir / snapshots(backup_dir)[0].replace(".db", ".json")).read_text())
    assert metadata["members"] and metadata["etcd_version"] and metadata["kubernetes_version"], metadata

    delete_project(lab, project)
    assert project_present(lab, project) == {"namespace": False, "queue": False}

    # Bad input first: a snapshot that is not there is refused, and nothing stops.
    refused = restore(lab, backup_dir, "no-such-snapshot")
    assert refused.returncode != 0 and "snapshot: expected one of the site's snapshots" in refused.output
    assert lab.kubectl("get nodes").returncode == 0

    started = time.monotonic()
    restored = restore(lab, backup_dir)
    figures["restore"] = time.monotonic() - started
    assert restored.returncode == 0, restored.tail(5000)
    assert "restored " + snapshots(backup_dir)[0] in restored.output
    assert project_present(lab, project) == {"namespace": True, "queue": True}

    started = time.monotonic()
    validation = validate(lab, backup_dir, *validate_args)
    figures["validate"] = time.monotonic() - started
    assert validation.returncode == 0, validation.tail(5000)
    report = lab.report()
    assert report["verdict"] == "pass", report["verdict"]
    section = next(s for s in report["sections"] if s["id"] == "etcd-backup")
    assert section["checks"][0]["status"] == "pass", section
    return figures
