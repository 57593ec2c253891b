"""Open a sample site report in a real browser (headless Chromium) and check what it shows.

The HTML report must open offline as one file; this renders it the way a person would see it and
checks the DOM the browser built, not just the text we wrote. CI installs Chromium with apt.
"""

from __future__ import annotations

import datetime
import os
import subprocess
from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.report import model as rp
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import render
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate.nodes import validate_gpu_nodes

CHROMIUM = Path("/usr/bin/chromium")
NOW = datetime.datetime(2025, 3, 4, 5, 6, 7, tzinfo=datetime.UTC)

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed (apt-get install -y chromium)"
)


def _node(name: str, gpus: int) -> dict:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"}},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def sample_report() -> rp.Report:
    declared = [{"name": name, "gpu_count": 8, "gpu_product": "Tesla-V100-SXM2-32GB"} for name in ("dgx1-1", "dgx1-2")]
    outcome = validate_gpu_nodes(declared, [_node("dgx1-1", 8), _node("dgx1-2", 6), _node("<script>x</script>", 2)])
    nodes = rp.section_from_dict(outcome.section_dict())
    scenario = rp.Section(
        id="scenario-4-9",
        title="4.9 Basic fairness",
        checks=[
            rp.Check("scenario-4-9/allocation", "a 4, b 2, c 2, d 8", "pass", "4/2/2/8", "4/2/2/8", duration_s=31.5),
            rp.Check("scenario-4-9/deadline", "interactive time limit", "needs-hardware", message="KWOK runs no pods"),
        ],
        charts=[
            rp.Chart(
                "allocation",
                "GPUs allocated per project",
                [
                    (0, {"team-a": 4, "team-b": 4, "team-c": 4, "team-d": 4}),
                    (20, {"team-a": 4, "team-b": 2, "team-c": 2, "team-d": 6}),
                    (45, {"team-a": 4, "team-b": 2, "team-c": 2, "team-d": 8}),
                ],
            )
        ],
    )
    return rp.Report("netapp-sandbox", "sandbox", "2025-03-04T05:00:00+00:00", NOW.isoformat(), [nodes, scenario])


def chromium(tmp_path: Path, name: str, *arguments: str) -> subprocess.CompletedProcess:
    profile = tmp_path / ("profile-" + name)
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1280,1600",
        *arguments,
    ]
    # A fresh HOME keeps Chromium's crash reports and caches out of the real one.
    env = {**os.environ, "HOME": str(tmp_path)}
    return subprocess.run(command, capture_output=True, text=True, timeout=180, env=env, check=False)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, str]:
    return render.write_report(sample_report(), tmp_path_factory.mktemp("reports"), NOW)


def test_browser_dom_shows_verdict_node_table_and_chart(written, tmp_path):
    url = Path(written["html"]).as_uri()
    result = chromium(tmp_path, "dom", "--dump-dom", url)
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert '<header class="banner fail" id="verdict">' in dom
    assert '<div class="verdict">FAIL</div>' in dom
    assert '<table id="table-node-gpus">' in dom
    for text in ("dgx1-1", "dgx1-2", "Declared GPUs", "Found GPUs", "Tesla-V100-SXM2-32GB"):
        assert text in dom
    assert "gpu-nodes/dgx1-2/gpu-count" in dom
    assert "<svg" in dom and 'data-project="team-d"' in dom
    # The undeclared node's name is text in the page, never an element.
    assert "&lt;script&gt;x&lt;/script&gt;" in dom
    assert "<script>" not in dom


def test_browser_screenshot_is_written(written, tmp_path):
    png = tmp_path / "report.png"
    result = chromium(tmp_path, "shot", f"--screenshot={png}", Path(written["html"]).as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 20_000  # a blank page is a few kilobytes
    keep = os.environ.get("CLUSTERPROOF_SCREENSHOT")
    if keep:  # for a person to look at: CLUSTERPROOF_SCREENSHOT=/tmp/report.png pytest ...
        Path(keep).write_bytes(data)
