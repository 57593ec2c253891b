"""Every module's DOCUMENTATION, EXAMPLES and RETURN are valid YAML (ansible-doc shows them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

MODULES = sorted(
    (Path(__file__).resolve().parents[2] / "collections/ansible_collections/clusterproof/gpu/plugins/modules").glob(
        "*.py"
    )
)


def _docs(path: Path) -> dict[str, str]:
    docs = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in ("DOCUMENTATION", "EXAMPLES", "RETURN"):
                    docs[target.id] = node.value.value
    return docs


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.stem)
def test_module_documentation_parses(path):
    docs = _docs(path)
    assert set(docs) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    documentation = yaml.safe_load(docs["DOCUMENTATION"])
    assert documentation["module"] == path.stem
    assert documentation["short_description"]
    assert isinstance(yaml.safe_load(docs["EXAMPLES"]), list)
    assert isinstance(yaml.safe_load(docs["RETURN"]), dict)
