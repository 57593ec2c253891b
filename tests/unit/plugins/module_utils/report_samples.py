"""Reports and report sections shared by the report tests (test_report_history.py, the recorded
pages of test_report_html_golden.py, the browser's page of tests/unit/test_report_html_browser.py).
Touches nothing."""

from __future__ import annotations

from ansible_collections.clusterproof.gpu.plugins.module_utils.node import gpu_facts, gpu_health
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import history
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import model as rp
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate.nodes import validate_gpu_nodes
from tests.unit.plugins.module_utils.helpers import H100_XML


def node_row(name, gpus, product="Tesla-V100-SXM2-32GB", present=True, status="pass"):
    """A row of the node table (rp.node_table) for a node declared with 8 GPUs."""
    return {"name": name, "declared": True, "present": present, "declared_gpus": 8, "found_gpus": gpus,
            "declared_product": product, "found_product": product, "ready": True if present else None,
            "status": status}  # fmt: skip


def history_sections(nodes=None, quota_b=2, weight_b=2, classes=(("local-path", True),)) -> list[dict]:
    """What a run compares with an earlier one: the nodes, the projects' quotas, storage classes."""
    nodes = nodes if nodes is not None else [node_row("dgx1-1", 8), node_row("dgx1-2", 8)]
    return [
        {"id": "gpu-nodes", "title": "GPU nodes", "checks": [], "node_table": nodes},
        {"id": "projects", "title": "Projects", "checks": [], "tables": [{
            "id": "project-quotas", "title": "q",
            "columns": ["Project", "Quota (declared)", "Quota (KAI queue)", "Weight (declared)", "Weight (KAI queue)", "GPUs held now"],
            "rows": [["team-a", "4", "4", "4", "4", "0"], ["team-b", "2", str(quota_b), "2", str(weight_b), "0"]]}]},
        {"id": "storage", "title": "Storage", "checks": [], "tables": [{
            "id": "storage-classes", "title": "s",
            "columns": ["Class", "Provisioner", "Default (declared)", "Default (found)", "Access modes", "Found"],
            "rows": [[name, "p", "yes" if default else "no", "yes" if default else "no", "RWO", "yes"]
                     for name, default in classes]}]},
    ]  # fmt: skip


def site_state(data: list[dict]) -> dict:
    """The state history compares, of a report made of the section dicts ``data``."""
    return history.site_state(rp.Report("s", "sandbox", "", "", [rp.section_from_dict(s) for s in data]))


def health_section(host: str, driver: str) -> dict:
    """A GPU host's passive health section, as gpu_health writes it for the recorded H100 with
    its driver version replaced."""
    xml = H100_XML.replace("580.159.04", driver)
    facts = gpu_facts.parse_nvidia_smi_xml(xml).to_dict()
    return gpu_health.assess_host(host, facts, gpu_health.HealthPins(), "")


def kube_node(name: str, gpus: int) -> dict:
    """A Ready Node object with ``gpus`` allocatable V100s."""
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"}},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def browser_sample() -> rp.Report:
    """The page the browser test opens: the node validation's own section (a node short of GPUs,
    an undeclared node named like markup) and a scenario with its allocation chart."""
    declared = [{"name": name, "gpu_count": 8, "gpu_product": "Tesla-V100-SXM2-32GB"} for name in ("dgx1-1", "dgx1-2")]
    found = [kube_node("dgx1-1", 8), kube_node("dgx1-2", 6), kube_node("<script>x</script>", 2)]
    nodes = rp.section_from_dict(validate_gpu_nodes(declared, found).section_dict())
    scenario = rp.Section(
        id="scenario-4-9",
        title="4.9 Basic fairness",
        checks=[
            rp.Check("scenario-4-9/allocation", "a 4, b 2, c 2, d 8", "pass", "4/2/2/8", "4/2/2/8", duration_s=31.5),
            rp.Check("scenario-4-9/deadline", "interactive time limit", "needs-hardware", message="KWOK runs no pods"),
        ],
        charts=[rp.Chart("allocation", "GPUs allocated per project", [
            (0, {"team-a": 4, "team-b": 4, "team-c": 4, "team-d": 4}),
            (20, {"team-a": 4, "team-b": 2, "team-c": 2, "team-d": 6}),
            (45, {"team-a": 4, "team-b": 2, "team-c": 2, "team-d": 8}),
        ])],
    )  # fmt: skip
    return rp.Report("netapp-sandbox", "sandbox", "2025-03-04T05:00:00+00:00", "2025-03-04T05:06:07+00:00",
                     [nodes, scenario])  # fmt: skip
