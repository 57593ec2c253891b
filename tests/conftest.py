"""Make the collection importable as ``ansible_collections.clusterproof.gpu``, and the entry point's
``cli`` package, in every test."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
COLLECTIONS = REPO / "collections"
for path in (COLLECTIONS, REPO):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


def run_module_file(module: Path, arguments: dict[str, Any], timeout: int = 120) -> dict[str, Any]:
    """Run a module file directly, as Ansible runs it on a host, and return its JSON result."""
    completed = subprocess.run(
        [sys.executable, str(module), json.dumps({"ANSIBLE_MODULE_ARGS": arguments})],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONPATH=str(COLLECTIONS)),
        check=False,
    )
    return json.loads(completed.stdout)
