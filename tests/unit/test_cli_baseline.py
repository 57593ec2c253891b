"""./clusterproof baseline: a run of a site marked as its acceptance baseline."""

from __future__ import annotations

from pathlib import Path

from cli import baseline


def make_runs(reports: Path, site: str, *stamps: str) -> None:
    for stamp in stamps:
        (reports / site / stamp).mkdir(parents=True)
        (reports / site / stamp / "report.json").write_text("{}")
    (reports / site / "latest").symlink_to(stamps[-1])


def test_the_latest_run_of_the_only_site_by_default(tmp_path, capsys):
    make_runs(tmp_path, "netapp-sandbox", "20261124T100000Z", "20261124T110000Z")
    (tmp_path / "runs").mkdir()  # the cli's own run logs are not a site
    assert baseline.main(["--reports-dir", str(tmp_path)]) == 0
    assert (tmp_path / "netapp-sandbox" / "baseline").readlink() == Path("20261124T110000Z")
    assert "baseline of site netapp-sandbox: 20261124T110000Z" in capsys.readouterr().out


def test_a_named_run_and_bad_input(tmp_path, capsys):
    make_runs(tmp_path, "a", "20261124T100000Z", "20261124T110000Z")
    make_runs(tmp_path, "b", "20261124T120000Z")
    assert baseline.main(["--reports-dir", str(tmp_path)]) == 2
    assert "--site: expected one of the sites with reports (a, b)" in capsys.readouterr().err
    assert baseline.main(["20261124T100000Z", "--site", "a", "--reports-dir", str(tmp_path)]) == 0
    assert (tmp_path / "a" / "baseline").readlink() == Path("20261124T100000Z")
    assert baseline.main(["nope", "--site", "a", "--reports-dir", str(tmp_path)]) == 2
    assert "run: expected latest or a run of site a" in capsys.readouterr().err
