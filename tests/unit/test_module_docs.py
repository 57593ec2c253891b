"""Every module's DOCUMENTATION, EXAMPLES and RETURN are valid YAML (ansible-doc shows them), and its
documented options are the options its argument spec accepts.

The second half is what ``ansible-test sanity --test validate-modules`` checks of options (names,
aliases, types, required, defaults, choices, elements, suboptions, with doc fragments resolved).
ansible-test itself needs to download pip into a venv of its own, which CI and an offline machine
cannot do; this check runs each module's ``main()`` with an AnsibleModule that captures the spec.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils import basic

PLUGINS = Path(__file__).resolve().parents[2] / "collections/ansible_collections/clusterproof/gpu/plugins"
MODULES = sorted((PLUGINS / "modules").glob("*.py"))
COLLECTION = "clusterproof.gpu."
# What validate-modules compares per option; an option without ``type`` is a str on both sides.
COMPARED = ("type", "required", "default", "choices", "elements", "aliases")
DEFAULTS: dict[str, Any] = {"type": "str", "required": False, "default": None, "choices": None, "elements": None}


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


LOOKUPS = sorted((PLUGINS / "lookup").glob("*.py"))


@pytest.mark.parametrize("path", LOOKUPS, ids=lambda path: path.stem)
def test_lookup_documentation_parses(path):
    # A lookup whose DOCUMENTATION is no YAML fails to load at all, in every play that asks it.
    docs = _docs(path)
    documentation = yaml.safe_load(docs["DOCUMENTATION"])
    assert documentation["name"] == path.stem
    assert documentation["short_description"]
    if "EXAMPLES" in docs:
        assert isinstance(yaml.safe_load(docs["EXAMPLES"]), list)
    if "RETURN" in docs:
        assert isinstance(yaml.safe_load(docs["RETURN"]), dict)


def documented_options(path: Path) -> dict[str, Any]:
    """The module's documented options with its collection's doc fragments merged in, as ansible-doc
    shows them (a fragment's options first, the module's own on top)."""
    documentation = yaml.safe_load(_docs(path)["DOCUMENTATION"])
    options: dict[str, Any] = {}
    for fragment in documentation.get("extends_documentation_fragment") or []:
        assert fragment.startswith(COLLECTION), f"{fragment}: only this collection's fragments are resolved here"
        name, _, variable = fragment[len(COLLECTION) :].partition(".")
        spec = importlib.util.spec_from_file_location(f"doc_fragment_{name}", PLUGINS / "doc_fragments" / f"{name}.py")
        assert spec and spec.loader, f"{fragment}: no plugins/doc_fragments/{name}.py"
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        text = getattr(loaded.ModuleDocFragment, (variable or "DOCUMENTATION").upper())
        options.update(yaml.safe_load(text).get("options") or {})
    # As ansible-doc merges: a module's entry for a fragment's option overrides it key by key, so a
    # module may say only what differs (that it requires the option) and keep the fragment's description.
    for name, option in (documentation.get("options") or {}).items():
        options[name] = {**(options.get(name) or {}), **(option or {})}
    return options


class SpecCaptured(Exception):
    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__("argument spec captured")
        self.spec = spec


def argument_spec(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The argument spec the module hands AnsibleModule, captured by running its ``main()`` with an
    AnsibleModule that stops there (before it reads arguments or touches anything). A module that
    is only documentation for an action plugin of the same name has the action's spec instead."""

    def capture(self, argument_spec, *args, **kwargs):
        raise SpecCaptured(argument_spec)

    module = importlib.import_module(f"ansible_collections.clusterproof.gpu.plugins.modules.{path.stem}")
    if not hasattr(module, "main"):
        return action_argument_spec(path.stem)
    monkeypatch.setattr(basic.AnsibleModule, "__init__", capture)
    with pytest.raises(SpecCaptured) as captured:
        module.main()
    return captured.value.spec


def action_argument_spec(name: str) -> dict[str, Any]:
    """An action plugin's ARGUMENT_SPEC (what it validates), or its bare option names (_VALID_ARGS),
    each then taken as documented so that only the names are compared."""
    action = importlib.import_module(f"ansible_collections.clusterproof.gpu.plugins.action.{name}")
    if hasattr(action, "ARGUMENT_SPEC"):
        return action.ARGUMENT_SPEC
    documented = documented_options(PLUGINS / "modules" / f"{name}.py")
    return {option: documented.get(option) or {} for option in action.ActionModule._VALID_ARGS}


def _type_name(value: Any) -> Any:
    return getattr(value, "__name__", value) if callable(value) else value


def drift(documented: dict[str, Any], spec: dict[str, Any], where: str = "") -> list[str]:
    """Each difference between documented options and an argument spec, as one readable line."""
    problems = []
    for name in sorted(set(documented) - set(spec)):
        problems.append(f"{where}{name}: documented, not in the argument spec")
    for name in sorted(set(spec) - set(documented)):
        problems.append(f"{where}{name}: in the argument spec, not documented")
    for name in sorted(set(documented) & set(spec)):
        doc, arg = documented[name] or {}, spec[name]
        for key in COMPARED:
            doc_value = doc.get(key, DEFAULTS.get(key))
            arg_value = _type_name(arg.get(key, DEFAULTS.get(key)))
            if key in ("choices", "aliases"):
                doc_value, arg_value = sorted(doc_value or [], key=str), sorted(arg_value or [], key=str)
            if doc_value != arg_value:
                problems.append(f"{where}{name}.{key}: documented {doc_value!r}, argument spec {arg_value!r}")
        if "options" in doc or "options" in arg:
            problems += drift(doc.get("suboptions") or {}, arg.get("options") or {}, f"{where}{name}.")
            if "options" in doc:
                problems.append(f"{where}{name}: documents suboptions as 'options' (ansible-doc wants 'suboptions')")
    return problems


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.stem)
def test_documented_options_are_the_argument_spec(path, monkeypatch):
    found = drift(documented_options(path), argument_spec(path, monkeypatch))
    assert found == []


def test_the_check_finds_drift():
    documented = {"mode": {"type": "str", "choices": ["a", "b"]}, "gone": {}, "nodes": {"type": "list"}}
    spec = {
        "mode": {"choices": ["a", "c"], "default": "a"},
        "extra": {"type": "int"},
        "nodes": {"type": "list", "elements": "dict", "options": {"name": {"required": True}}},
    }
    assert drift(documented, spec) == [
        "gone: documented, not in the argument spec",
        "extra: in the argument spec, not documented",
        "mode.default: documented None, argument spec 'a'",
        "mode.choices: documented ['a', 'b'], argument spec ['a', 'c']",
        "nodes.elements: documented None, argument spec 'dict'",
        "nodes.name: in the argument spec, not documented",
    ]


def test_a_modules_entry_for_a_fragments_option_overrides_it_key_by_key():
    # koordinator_scheduler says only that it requires state_dir; the sandbox_install fragment describes it.
    state_dir = documented_options(PLUGINS / "modules" / "koordinator_scheduler.py")["state_dir"]
    assert state_dir["required"] is True
    assert state_dir["type"] == "path"
    assert "state directory" in state_dir["description"]
