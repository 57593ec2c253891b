"""``python -m cli.baseline [RUN] [--site SITE] [--reports-dir DIR]``: mark a run of a site as its
acceptance baseline (``reports/<site>/baseline -> <run>``). Later runs judge their benchmark
figures against it (docs/report.md). Exit status 0 marked, 2 bad input."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils.report import history

from .playbook import REPO

REPORTS_DIR = REPO / "reports"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clusterproof baseline", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", nargs="?", default=history.LATEST_LINK, help="a run's stamp, or latest (the default)")
    parser.add_argument("--site", help="the site (default: the only site with reports)")
    parser.add_argument("--reports-dir", type=Path, default=REPORTS_DIR)
    options = parser.parse_args(argv)
    site = options.site
    if site is None:
        sites = (
            sorted(p.name for p in options.reports_dir.iterdir() if p.is_dir()) if options.reports_dir.is_dir() else []
        )
        sites = [name for name in sites if name != "runs"]
        if len(sites) != 1:
            print(f"--site: expected one of the sites with reports ({', '.join(sites) or 'none yet'})", file=sys.stderr)
            return 2
        site = sites[0]
    try:
        run = history.set_baseline(options.reports_dir, site, options.run)
    except history.HistoryError as error:
        print(str(error), file=sys.stderr)
        return 2
    print(f"baseline of site {site}: {run.name} ({run / 'report.html'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
