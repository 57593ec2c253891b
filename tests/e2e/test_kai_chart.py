"""KAI's Helm chart, rendered with the kai_scheduler role's values, is accepted by a real API server.

Real clusters get KAI from its chart (kubernetes.core.helm). There is no chart repository here,
but the chart travels inside KAI's Go module; the build copies it and builds helm. A wrong value
fails here, not at a site.
"""

from __future__ import annotations

import json

import pytest
import yaml
from kubernetes import dynamic

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build

from .conftest import REPO, helm_template

pytestmark = pytest.mark.sandbox


def render(values: dict) -> list[dict]:
    plan = sandbox_build.plan()
    args = {
        "chart_ref": str(plan.kai_chart),
        "binary_path": str(plan.binary("helm")),
        "release_name": "kai-scheduler",
        "release_namespace": "kai-scheduler",
        "release_values": values,
        "include_crds": False,
    }
    return helm_template(args)


def test_chart_renders_with_the_role_values_and_the_api_server_accepts_it(kai_site, api_client):
    defaults = yaml.safe_load((REPO / "roles" / "kai_scheduler" / "defaults" / "main.yml").read_text())
    values = defaults["kai_scheduler_helm_values"]
    objects = render(values)
    kinds = {obj["kind"] for obj in objects}
    assert {"Deployment", "Config", "ClusterRole", "ServiceAccount"} <= kinds, kinds
    operator = next(o for o in objects if o["kind"] == "Deployment")
    image = operator["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.startswith("ghcr.io/nvidia/kai-scheduler/") and image.endswith(":v0.12.0"), image
    config = next(o for o in objects if o["kind"] == "Config")
    assert "gpuSharing" in json.dumps(config["spec"]) or "gpu-sharing" in json.dumps(config["spec"]).lower()

    client = dynamic.DynamicClient(api_client)
    for obj in objects:
        resource = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        if resource.namespaced and not namespace:
            namespace = "kai-scheduler"
        resource.server_side_apply(
            body=obj,
            name=obj["metadata"]["name"],
            namespace=namespace,
            field_manager="clusterproof-chart-check",
            dry_run="All",
        )
