"""Helpers shared by the module_utils unit tests."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig at ``path`` for an API server at ``server`` (a token user, one context)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "cluster", "cluster": {"server": server}}],
                "users": [{"name": "admin", "user": {"token": "t"}}],
                "contexts": [{"name": "cluster", "context": {"cluster": "cluster", "user": "admin"}}],
                "current-context": "cluster",
            }
        )
    )
    return path
