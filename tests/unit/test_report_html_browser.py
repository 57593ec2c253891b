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

from ansible_collections.clusterproof.gpu.plugins.module_utils.report import render
from tests.unit.plugins.module_utils.report_samples import browser_sample

CHROMIUM = Path("/usr/bin/chromium")
NOW = datetime.datetime(2025, 3, 4, 5, 6, 7, tzinfo=datetime.UTC)

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed (apt-get install -y chromium)"
)


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
    return render.write_report(browser_sample(), tmp_path_factory.mktemp("reports"), NOW)


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
