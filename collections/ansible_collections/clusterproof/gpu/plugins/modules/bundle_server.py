#!/usr/bin/python
"""Serve the offline bundle's apt repository, registry and charts from this machine, or stop serving it."""

DOCUMENTATION = r"""
module: bundle_server
short_description: Serve the offline bundle (apt repository, registry, Helm charts) to a site's hosts
version_added: 0.2.0
author:
  - clusterproof developers
description:
  - Serves a bundle made by C(./clusterproof bundle) (docs/bundle.md) on O(address) of the machine it runs on
    (the lab's bridge address, or an air-gapped site's mirror host); its apt repository over HTTP on
    O(apt_port), its registry storage with C(docker-registry), read-only, on O(registry_port), its
    packaged Helm charts over HTTP on O(charts_port) (C(clusterproof_mirror.charts)).
  - Before anything starts, checks that the bundle is built and that its manifest lists every image
    in O(required_images) with a digest; a missing one stops the task, naming it.
  - Idempotent; C(stopped) stops only the servers this module started (recorded in O(state_dir)).
options:
  state:
    description: C(started) or C(stopped).
    type: str
    choices: [started, stopped]
    default: started
  bundle:
    description: The bundle directory (holds apt/, registry/, charts/ and manifest.json).
    type: path
  state_dir:
    description: Where the servers' record, configuration and log are kept.
    type: path
    required: true
  address:
    description: The address to serve on.
    type: str
  apt_port:
    description: Port of the apt repository.
    type: int
    default: 8081
  registry_port:
    description: Port of the registry.
    type: int
    default: 5000
  charts_port:
    description: Port of the charts (each packaged chart at C(/<name>-<version>.tgz)).
    type: int
    default: 8082
  required_images:
    description: Image references the bundle must hold (what the site's install will pull).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Serve the bundle to the lab
  clusterproof.gpu.bundle_server:
    bundle: ~/.cache/clusterproof/bundle/out
    state_dir: ~/.local/state/clusterproof/lab/bundle
    address: 10.213.0.1
"""

RETURN = r"""
apt_url:
  description: The apt repository's URL (site_mirror_packages_url).
  returned: with state started
  type: str
  sample: http://10.213.0.1:8081/
registry:
  description: The registry as host:port (site_mirror_registry).
  returned: with state started
  type: str
  sample: 10.213.0.1:5000
charts_url:
  description: The charts' URL (clusterproof_mirror.charts).
  returned: with state started
  type: str
  sample: http://10.213.0.1:8082/
images:
  description: How many images the bundle's manifest lists.
  returned: with state started
  type: int
"""

import json
from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import contents, serve
from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle.contents import BundleInputError
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner


def run(module):
    params = module.params
    state_dir = Path(params["state_dir"])
    if params["state"] == "stopped":
        running = serve.running(state_dir) is not None
        if running and not module.check_mode:
            serve.stop(state_dir)
        return {"changed": running}
    bundle = Path(params["bundle"])
    manifest_path = bundle / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as error:
        raise BundleInputError(
            "bundle: expected a built bundle with a manifest at %s (./clusterproof bundle makes one); found %s"
            % (manifest_path, error)
        ) from error
    wanted = [contents.parse_ref(ref, "required_images") for ref in params["required_images"]]
    missing = contents.missing_images(manifest, wanted)
    if missing:
        raise BundleInputError(
            "bundle: expected every required image in %s; missing: %s. Nothing was started; rebuild the bundle "
            "(./clusterproof bundle)" % (manifest_path, ", ".join(missing))
        )
    endpoint = serve.Endpoint(params["address"], params["apt_port"], params["registry_port"], params["charts_port"])
    changed = serve.running(state_dir) is None
    if not module.check_mode:
        changed = serve.start(bundle, endpoint, state_dir)
    return {
        "changed": changed,
        "apt_url": endpoint.apt_url,
        "registry": endpoint.registry,
        "charts_url": endpoint.charts_url,
        "images": len(manifest.get("images", [])),
    }


def main():
    spec = runner.argument_spec(
        {
            "state": {"type": "str", "choices": ["started", "stopped"], "default": "started"},
            "bundle": {"type": "path"},
            "state_dir": {"type": "path", "required": True},
            "address": {"type": "str"},
            "apt_port": {"type": "int", "default": 8081},
            "registry_port": {"type": "int", "default": 5000},
            "charts_port": {"type": "int", "default": 8082},
            "required_images": {"type": "list", "elements": "str", "default": []},
        }
    )
    runner.run_module(
        spec,
        run,
        doing="serving the bundle",
        expected=(BundleInputError, serve.ServeError, OSError),
        required_if=[("state", "started", ("bundle", "address"))],
    )


if __name__ == "__main__":
    main()
