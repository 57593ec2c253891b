"""KAI's Helm chart, rendered with the kai_scheduler role's values, is accepted by a real API server.

Real clusters get KAI from its chart (kubernetes.core.helm). There is no chart repository here,
but the chart travels inside KAI's Go module; the build copies it and builds helm. A wrong value
fails here, not at a site.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build

from .conftest import dry_run_apply, render_role_chart

pytestmark = pytest.mark.sandbox


def test_chart_renders_with_the_role_values_and_the_api_server_accepts_it(kai_site, api_client):
    objects = render_role_chart(
        "kai_scheduler", sandbox_build.plan().kai_chart, "kai-scheduler", "kai-scheduler", include_crds=False
    )
    kinds = {obj["kind"] for obj in objects}
    assert {"Deployment", "Config", "ClusterRole", "ServiceAccount"} <= kinds, kinds
    operator = next(o for o in objects if o["kind"] == "Deployment")
    image = operator["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.startswith("ghcr.io/nvidia/kai-scheduler/") and image.endswith(":v0.12.0"), image
    config = next(o for o in objects if o["kind"] == "Config")
    assert "gpuSharing" in json.dumps(config["spec"]) or "gpu-sharing" in json.dumps(config["spec"]).lower()

    dry_run_apply(api_client, objects, "kai-scheduler")
