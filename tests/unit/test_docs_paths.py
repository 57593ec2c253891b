"""Every path the README and docs/ (and the roles' READMEs) name exists: a file, folder, playbook,
test or bench that moved or went is a claim that drifted (issue 31: 6 of 14 checked had).

A path is a backticked word or a Markdown link target that starts with one of the repository's
top-level folders (``playbooks/``, ``roles/``, ``tests/``...), or any relative link target. A
role's README may name its own files relative to the role. Output folders the project writes
(listed in .gitignore, such as ``bench/differences/``) count as named on purpose.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted(REPO.glob("roles/*/README.md"))]
TOP = ("playbooks/", "roles/", "inventories/", "collections/", "molecule/", "tests/", "bench/", "docs/")
TOP += ("scenarios/", ".ci/", "cli/")
# `a/path`, `a/path::test_name`, `a/path:12`, or ](a/path#anchor)
REFERENCE = re.compile(r"`([^`\s]+)`|\]\(([^)\s#]+)")
NOT_A_PATH = re.compile(r"^[a-z]+://|[<>*{}$]")


def _ignored_outputs() -> set[str]:
    lines = (REPO / ".gitignore").read_text().splitlines()
    return {line.strip().lstrip("/") for line in lines if line.strip() and not line.startswith("#")}


def _named(doc: Path) -> list[tuple[str, bool]]:
    """The paths ``doc`` names, each with whether it came from a link (relative to the doc)."""
    found = []
    for match in REFERENCE.finditer(doc.read_text()):
        text = match.group(1) or match.group(2)
        if NOT_A_PATH.search(text):
            continue
        path = text.rstrip(".,:;)").split("::")[0].split(":")[0]
        if match.group(2) or path.startswith(TOP):
            found.append((path, bool(match.group(2))))
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(REPO)))
def test_every_path_a_document_names_exists(doc: Path) -> None:
    outputs = _ignored_outputs()
    missing = []
    for path, linked in _named(doc):
        places = [REPO / path, doc.parent / path] if linked or doc.parent != REPO else [REPO / path]
        if doc.parent.parent.name == "roles":
            places.append(doc.parent / path)
        if path in outputs or path.rstrip("/") + "/" in outputs:
            continue
        if not any(place.exists() for place in places):
            missing.append(path)
    assert missing == [], "%s names paths that do not exist: %s" % (doc.relative_to(REPO), missing)


def test_the_walk_finds_the_paths_it_checks() -> None:
    # The test above passes vacuously if nothing is found: the README names playbooks and tests.
    named = {path for path, _ in _named(REPO / "README.md")}
    assert "playbooks/site.yml" in named or any(path.startswith("playbooks/") for path in named)
    assert any(path.startswith("tests/") for path in named)
