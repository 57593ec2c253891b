"""The one install step for what runs on the sandbox beside its control plane.

KAI scheduler, Kueue, Koordinator and local-path-provisioner go onto the sandbox the same way:
the sandbox must be up and the build must have copied the engine's files into its share folder;
CRDs and objects are applied (in check mode, only compared); configuration files are written
where they differ; the engine's processes are started, and restarted where what they read only
at start (a configuration, a certificate) changed. :class:`InstallStep` does each of those once,
recording what it applied, started and stopped, so a module says only what its engine needs.
(Its object half, ``kube.client.Changes``, is what a module uses on a real cluster.)

May import: ``kube.client`` (to apply), ``sandbox.control_plane`` (the processes), ``sandbox.pki``
(serving certificates) and PyYAML; never the module runner (``kube.runner``): a module runs itself,
through ``runner.run_sandbox_install``.
Touches: the sandbox's API server, its state directory and the processes it started itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane, pki
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import Component, Layout

BUILD_HINT = "run the sandbox build (clusterproof.gpu.sandbox_binaries)"


def require_sandbox(layout: Layout) -> None:
    """Refuse to go on when no sandbox runs at ``layout`` (its admin kubeconfig is made at ``up``)."""
    if not layout.kubeconfig.exists():
        raise control_plane.SandboxError(
            "no sandbox at %s: bring it up first (clusterproof.gpu.sandbox_cluster state=up)" % layout.root
        )


def require_built(folder: Path, what: str, *inside: str) -> None:
    """Refuse to go on when the build has not put ``inside`` (paths under ``folder``) into its share folder."""
    if not all((folder / path).exists() for path in inside):
        raise control_plane.SandboxError("%s has no %s; %s" % (folder, what, BUILD_HINT))


def manifests(path: Path) -> Iterator[dict[str, Any]]:
    """Every document of a YAML file, or of each ``*.yaml`` file of a folder in name order."""
    files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
    for file in files:
        for document in yaml.safe_load_all(file.read_text()):
            if document:
                yield document


def load_crds(directory: Path) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions of a folder of manifests, as the server keeps them."""
    crds = []
    for document in manifests(directory):
        if document.get("kind") == "CustomResourceDefinition":
            # Some generated CRDs carry "creationTimestamp: null", which the server replaces: left
            # in, the CRD would never look applied and every run would change it.
            document["metadata"].pop("creationTimestamp", None)
            crds.append(document)
    return crds


class InstallStep(kube.Changes):
    """What one module run does to the sandbox (objects, files, processes), and what it has done so far."""

    def __init__(self, layout: Layout, applier: Any, check_mode: bool | None = None) -> None:
        super().__init__(applier, check_mode)
        self.layout = layout
        self.started: list[str] = []
        self.stopped: list[str] = []

    @classmethod
    def on(
        cls, layout: Layout, check_mode: bool, kubeconfig: str | None = None, context: str | None = None
    ) -> InstallStep:
        """The step on the sandbox at ``layout`` (which must be up), applying as its admin unless told otherwise."""
        require_sandbox(layout)
        api = kube.api_client(kubeconfig or str(layout.kubeconfig), context)
        return cls(layout, kube.Applier(api, check_mode=check_mode))

    @property
    def changed(self) -> bool:
        return bool(self.applied or self.started or self.stopped)

    def result(self, **extra: Any) -> dict[str, Any]:
        """The module's result: whether anything changed, what was applied, started and stopped, and ``extra``."""
        return {
            "changed": self.changed,
            "applied": self.applied,
            "started": self.started,
            "stopped": self.stopped,
            **extra,
        }

    def write(self, path: Path, data: str | bytes, private: bool = False) -> bool:
        """Write a file unless it holds ``data`` already; True if it was (or would be) written."""
        data = data.encode() if isinstance(data, str) else data
        if path.exists() and path.read_bytes() == data:
            return False
        self.applied.append("file %s" % path)
        if not self.check_mode:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o600 if private else 0o644)
        return True

    def serving_certificate(self, cert_dir: Path, common_name: str, copy_to: Path | None = None) -> bool:
        """``tls.crt`` and ``tls.key`` in ``cert_dir`` for serving on 127.0.0.1, signed by the sandbox
        CA (an engine's webhooks, which the API server calls by URL), and a copy of both in
        ``copy_to``; True if any of them was (or would be) written."""
        cert, key = cert_dir / "tls.crt", cert_dir / "tls.key"
        if self.check_mode:
            if cert.exists():
                return False
            self.applied.append("file %s" % cert)
            return True
        changed = pki.ensure_serving_certificate(self.layout.pki, cert, key, common_name, (control_plane.LOOPBACK,))
        if changed:
            self.applied.append("file %s" % cert)
        if copy_to is not None:
            changed |= self.write(copy_to / "tls.crt", cert.read_bytes())
            changed |= self.write(copy_to / "tls.key", key.read_bytes(), private=True)
        return changed

    def stop(self, names: Iterable[str]) -> None:
        """Stop those of ``names`` that run (another engine's, or this one's to uninstall it)."""
        for name in names:
            if control_plane.running_pid(self.layout, name) is not None:
                self.stopped.append(name)
                if not self.check_mode:
                    control_plane.stop(self.layout, name)

    def start(self, components: list[Component], timeout: float, restart: bool = False) -> None:
        """Run ``components``, each unless it already runs with its command line; with ``restart``
        (what they read only at start changed), those that run are restarted."""
        if self.check_mode:
            self.started += [c.name for c in components if restart or not self._runs(c)]
            return
        if restart:
            self.stopped += [c.name for c in components if control_plane.stop(self.layout, c.name)]
        self.started += control_plane.run_components(self.layout, components, timeout)

    def _runs(self, component: Component) -> bool:
        return control_plane.runs_as_declared(self.layout, component)
