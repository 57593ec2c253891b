"""The layers of module_utils, as their package docstrings state them, checked by walking the imports.

Rules (each a test below):

- every package of module_utils (and the pins, ``versions``) has a rule in ``LAYERS``: which
  packages or modules of module_utils it may import, and which third-party packages (found by
  walking every import, the standard library aside), each allowed in some of its modules alone
  where its docstring says so (``only_in``); each package imports only what its rule allows, and
  the rule is what its ``__init__.py`` docstring says after "May import" (each name it allows is
  named there, and each package or module of module_utils named there is allowed);
- no import cycle between module_utils packages (each package one node), nor between modules;
- no function-level (or class-level) import of the collection's own code, in module_utils or in
  the modules: such an import is how a cycle hides;
- a pure module narrower than its package imports only what its docstring allows (``ALLOWED``):
  ``report/model.py`` nothing of the collection but the pins, ``bundle/contents.py`` only the pins;
  ``versions`` (the pins, module_utils/versions.py) imports nothing of the collection, so that
  every layer may import it;
- inside ``model/``, each module imports only the model modules below it (``MODEL_LAYERS``: data,
  the tree, shares, placement state, limit rules, victim ranking, the engine, its actions, the
  policies, the front), and no module of the model but ``quota_lint`` compares a policy's name: what
  differs between policies is a ``Policy`` value (``model/policy.py``);
- a third-party package that only the controller has is imported only where a docstring allows
  it, by module_utils and the modules alike: ``jinja2`` (a dependency of ansible-core) by
  ``report/render.py``, for the HTML page, so that nothing which runs on a GPU host needs it; the
  ``kubernetes`` library and ``urllib3`` by the client layer, ``kube/client.py`` (``THIRD_PARTY``);
- an engine file (``scheduler/kai.py``, ``kueue.py``, ``koordinator.py``) is imported only inside
  ``scheduler/``; everything else asks ``scheduler.registry`` for a backend (``ENGINE_IMPORTERS``
  lists the temporary exceptions, each with its reason);
- no comparison with an engine's name as a string outside ``scheduler/``: what differs between
  engines is a property of their backend (``NOT_ENGINE_COMPARISONS``: files where the same words
  name something else);
- no playbook or role compares the site's scheduler, or anything, with an engine's name: they ask
  ``clusterproof_site.engine``, which the site inventory settles from the backend
  (``scheduler.registry.site_engine``); nor does one work the cluster mode out again (a comparison
  with the mode, or the inventory's raw ``clusterproof_cluster_mode``): they ask
  ``clusterproof_site.sandbox``, settled once with the site.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "collections/ansible_collections/clusterproof/gpu/plugins"
MODULE_UTILS = PLUGINS / "module_utils"
PACKAGE = "ansible_collections.clusterproof.gpu.plugins.module_utils"
COLLECTION = "ansible_collections.clusterproof.gpu"
ENGINE_FILES = {"scheduler.kai", "scheduler.kueue", "scheduler.koordinator"}
ENGINE_NAMES = {"kai", "kueue", "koordinator"}
# Files outside scheduler/ that may import an engine file directly, and why.
ENGINE_IMPORTERS = {
    # The install modules start and stop their engine's sandbox processes from its file's command
    # lines, ports and configuration; their shared sandbox install step is another change of issue 11.
    "modules/kai_scheduler.py": "installs KAI's sandbox processes",
    "modules/kueue_scheduler.py": "installs Kueue's sandbox process and webhooks",
    "modules/koordinator_scheduler.py": "installs koord-scheduler on the sandbox",
}
# Files outside scheduler/ whose comparisons with these strings are about something else, and what.
NOT_ENGINE_COMPARISONS = {
    # Fair-share policies (runai, elastic, kueue) are the model's own names; a backend says which it follows.
    "module_utils/model/quota_lint.py": "compares fair-share policies",
    # Build items are binaries (the kueue binary), built whichever engine a site runs.
    "module_utils/sandbox/build.py": "compares build items",
}
# The pins (module_utils/versions.py): one version of each component, read by every layer that needs
# one (the sandbox build, the bundle, kubeadm's configuration, the charts, a workload's default image).
# It imports nothing of the collection, so importing it adds no edge to any layer: every layer may.
PINS = ("versions",)


class Rule(NamedTuple):
    """What a package of module_utils may import besides itself, the pins and the standard library."""

    # Of module_utils: a package as ``name/``, a module as ``package.module`` (as docstrings name them).
    imports: tuple[str, ...] = ()
    # Third-party packages, by the name they are imported as (``DISTRIBUTIONS``: as docstrings name them).
    third_party: tuple[str, ...] = ()
    # Entries of the two above that only some modules of the package may import: entry -> modules.
    only_in: Mapping[str, tuple[str, ...]] = {}


# Every package of module_utils, and what it may import, as its __init__.py docstring says after
# "May import" (test_each_rule_is_what_its_package_docstring_says). Read from the bottom up: the
# pins and the pure blocks, the pure layers, the client layer, the install half, the sandbox, the
# engines, the bundle, the inventory and the validator.
_CLIENT_LAYER_IN = ("scenario_runner", "storage_probe", "reach_probe", "kubelets")
_SANDBOX_CLIENT_IN = ("install", "lifecycle", "simulated_nodes", "gpu_agent")
_GPU_ARRAYS = ("torch", "torchvision", "cupy", "numpy")
LAYERS = {
    "versions": Rule(),
    "common": Rule(third_party=("yaml",), only_in={"yaml": ("yaml_file",)}),
    "model": Rule(),
    "tenancy": Rule(("common/",)),
    "report": Rule(third_party=("jinja2",), only_in={"jinja2": ("render",)}),
    "node": Rule(
        ("report.model",),
        ("pynvml", *_GPU_ARRAYS),
        only_in={name: ("gpu_benchmark_runner",) for name in _GPU_ARRAYS},
    ),
    "lab": Rule(("common/",)),
    "kube": Rule(
        ("common/",),
        ("kubernetes", "urllib3", "ansible"),
        only_in={"kubernetes": ("client",), "urllib3": ("client",), "ansible": ("runner",)},
    ),
    "install": Rule(
        ("common/",),
        ("tomlkit", "yaml"),
        only_in={"tomlkit": ("runtime_config",), "yaml": ("kubeadm_config",)},
    ),
    "sandbox": Rule(
        ("install/", "kube.client", "kube.base", "common/"),
        ("yaml", "cryptography"),
        only_in={"kube.client": _SANDBOX_CLIENT_IN, "kube.base": _SANDBOX_CLIENT_IN, "cryptography": ("pki",)},
    ),
    "maintenance": Rule(("common/", "install.kubeadm_config", "report.model")),
    "scheduler": Rule(("tenancy/", "sandbox.control_plane", "common.fields", "common.objects")),
    "bundle": Rule(
        ("common/", "install.go_modules", "install.kubernetes_cni", "sandbox.build"),
        ("yaml",),
    ),
    "monitoring": Rule(
        (
            "common/",
            "tenancy/",
            "report.model",
            "scheduler.registry",
            "sandbox.install",
            "sandbox.control_plane",
            "kube.client",
        ),
        ("yaml",),
        only_in={"sandbox.install": ("sandbox",), "sandbox.control_plane": ("sandbox",), "kube.client": ("reach",)},
    ),
    "inventory": Rule(("install/", "tenancy/", "scheduler.registry", "common/", "monitoring.settings")),
    "validate": Rule(
        (
            "common/",
            "tenancy/",
            "model/",
            "report.model",
            "install/",
            "scheduler.registry",
            "scheduler.base",
            "kube.client",
            "kube.base",
            "sandbox.control_plane",
        ),
        only_in={
            "kube.client": _CLIENT_LAYER_IN,
            "kube.base": _CLIENT_LAYER_IN,
            "sandbox.control_plane": ("scenario_runner",),
        },
    ),
}
# A third-party package as the docstrings name it (its distribution), where that is not its import name.
DISTRIBUTIONS = {"yaml": "PyYAML", "pynvml": "nvidia-ml-py"}
# What a pure module, narrower than its package's rule, may import of module_utils (prefixes of dotted
# names below module_utils).
ALLOWED = {
    "report.model": PINS,
    "report.history": ("report.model", *PINS),
    "report.templates": (),
    "bundle.contents": PINS,
    # The waiter imports nothing of the collection: waiting for the servers adds no layer.
    "bundle.serve": ("common.wait", *PINS),
}
# Third-party packages that only the controller has, and the files below plugins/ that may import them.
THIRD_PARTY = {
    "jinja2": ("module_utils/report/render.py",),
    "kubernetes": ("module_utils/kube/client.py",),
    "urllib3": ("module_utils/kube/client.py",),
}
# What each module of model/ may import of model/, as its docstring says: the layers from the data up
# to the front (fairshare), so that a reader finds each part in one place and no part reaches up.
MODEL_LAYERS = {
    "model": (),
    "model.data": (),
    "model.policy": (),
    "model.quota_lint": (),
    "model.tree": ("model.data",),
    "model.shares": ("model.data", "model.tree"),
    "model.scaling": ("model.data",),
    "model.state": ("model.data", "model.tree", "model.policy"),
    "model.rules": ("model.data", "model.state"),
    "model.victims": ("model.data", "model.rules"),
    "model.engine": ("model.data", "model.policy", "model.shares", "model.tree", "model.victims"),
    "model.allocate": ("model.data", "model.engine", "model.shares"),
    "model.consolidation": ("model.data", "model.engine"),
    "model.preempt": ("model.data", "model.engine", "model.victims"),
    "model.reclaim": ("model.data", "model.engine", "model.victims"),
    "model.fair_sharing": ("model.data", "model.engine", "model.reclaim", "model.shares"),
    "model.policies": (
        "model.policy",
        "model.allocate",
        "model.consolidation",
        "model.fair_sharing",
        "model.preempt",
        "model.reclaim",
    ),
    "model.fairshare": (
        "model.consolidation",
        "model.data",
        "model.engine",
        "model.fair_sharing",
        "model.policies",
        "model.scaling",
        "model.shares",
        "model.tree",
    ),
}
POLICY_NAMES = {"runai", "elastic", "kueue"}


def _name(path: Path) -> str:
    """The dotted name of a module_utils file below module_utils (``tenancy.projects``)."""
    parts = path.relative_to(MODULE_UTILS).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _name(path): path for path in sorted(MODULE_UTILS.rglob("*.py")) if _name(path)
}  # the top __init__.py has no name
PLUGIN_FILES = sorted([*MODULE_UTILS.rglob("*.py"), *(PLUGINS / "modules").glob("*.py")])


def _imports(tree: ast.AST) -> Iterator[tuple[ast.stmt, str]]:
    """Every import of module_utils in ``tree``, as (statement, dotted name below module_utils).
    ``from pkg import mod`` names ``pkg.mod`` where that is a module, else ``pkg``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    yield node, alias.name[len(PACKAGE) + 1 :]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
            base = node.module[len(PACKAGE) + 1 :]
            for alias in node.names:
                candidate = "%s.%s" % (base, alias.name) if base else alias.name
                yield node, candidate if candidate in MODULES else base


def _third_party(tree: ast.AST) -> Iterator[tuple[ast.stmt, str]]:
    """Every import of a package that is neither the standard library nor the collection, anywhere in
    ``tree``, as (statement, top-level name: ``kubernetes`` for ``kubernetes.utils``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and not name.startswith(COLLECTION):
                yield node, top


def _package(name: str) -> str:
    """The package of a dotted name below module_utils (``tenancy`` for ``tenancy.projects``)."""
    return name.split(".")[0]


def _entry(rule: Rule, target: str) -> str | None:
    """The entry of ``rule.imports`` that allows ``target`` (a dotted name below module_utils), if any."""
    for entry in rule.imports:
        if entry.endswith("/") and _package(target) == entry[:-1]:
            return entry
        if target == entry or target.startswith(entry + "."):
            return entry
    return None


def _top_level(tree: ast.Module) -> set[ast.stmt]:
    """The statements of the module body, and of its top-level if/try blocks (TYPE_CHECKING, fallbacks)."""
    found: set[ast.stmt] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        statement = pending.pop()
        found.add(statement)
        if isinstance(statement, (ast.If, ast.Try)):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for item in getattr(statement, block, []):
                    pending.extend(item.body if isinstance(item, ast.ExceptHandler) else [item])
    return found


@functools.cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        tree = _parse(path)
        top = _top_level(tree)
        graph[name] = {target for statement, target in _imports(tree) if statement in top and target in MODULES}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing itself): Tarjan."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _where(path: Path, node: ast.AST) -> str:
    return "%s:%d" % (path.relative_to(PLUGINS), getattr(node, "lineno", 0))


def test_every_package_has_a_rule():
    packages = {_package(name) for name in MODULES}
    assert packages == set(LAYERS), "give each package of module_utils a rule in LAYERS, and no other"


def _violations(package: str) -> Iterator[str]:
    """Each import of a module of ``package`` that its rule does not allow, as where and what."""
    rule = LAYERS[package]
    for name, path in MODULES.items():
        if _package(name) != package:
            continue
        module = name.split(".")[-1]
        tree = _parse(path)
        for statement, target in _imports(tree):
            if _package(target) in (package, *PINS):
                continue
            entry = _entry(rule, target)
            if entry is None or module not in rule.only_in.get(entry, (module,)):
                yield "%s imports %s" % (_where(path, statement), target)
        for statement, top in _third_party(tree):
            if top not in rule.third_party or module not in rule.only_in.get(top, (module,)):
                yield "%s imports %s" % (_where(path, statement), top)


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_each_package_imports_only_what_its_rule_allows(package):
    found = list(_violations(package))
    assert found == [], "%s imports what its rule (LAYERS, as its docstring says) does not allow: %s" % (package, found)


def _may_import(package: str) -> str:
    """What a package's docstring says after "May import", up to what it touches (or its end)."""
    path = MODULE_UTILS / package / "__init__.py" if (MODULE_UTILS / package).is_dir() else MODULES[package]
    docstring = " ".join((ast.get_docstring(_parse(path)) or "").split())
    assert "May import" in docstring, "%s's docstring says what it may import after 'May import'" % package
    said = docstring.split("May import", 1)[1]
    return re.split(r"\bTouches\b|\bNever imports\b", said)[0]


# A package or module of module_utils as a docstring names it: ``install/``, ``kube.client``.
_NAMED = re.compile(r"``([a-z_]+)(/|\.[a-z_.]+)``")


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_each_rule_is_what_its_package_docstring_says(package):
    rule, said = LAYERS[package], _may_import(package)
    unnamed = [entry for entry in rule.imports if "``%s``" % entry not in said]
    unnamed += [name for name in rule.third_party if DISTRIBUTIONS.get(name, name).lower() not in said.lower()]
    assert unnamed == [], "%s's docstring does not name what LAYERS allows it: %s" % (package, unnamed)
    named = {top + rest for top, rest in _NAMED.findall(said) if top in LAYERS and top != package}
    unlisted = sorted(name for name in named if name not in rule.imports and _entry(rule, name) is None)
    assert unlisted == [], "%s's docstring allows what LAYERS does not: %s" % (package, unlisted)


def test_no_import_cycle_between_packages():
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        targets = {_package(target) for _, target in _imports(_parse(path))}
        graph.setdefault(_package(name), set()).update(targets - {_package(name)})
    cycles = _cycles(graph)
    assert cycles == [], "packages that import each other, directly or around a loop: %s" % cycles


def test_no_import_cycle_between_module_utils_modules():
    cycles = _cycles(_graph())
    assert cycles == [], "modules that import each other, directly or around a loop: %s" % cycles


def test_no_function_level_import_of_the_collection():
    found = []
    for path in PLUGIN_FILES:
        tree = _parse(path)
        top = _top_level(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node not in top:
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(name.startswith(COLLECTION) for name in names):
                    found.append(_where(path, node))
    assert found == [], "imports inside a function or class (they hide a cycle): %s" % found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_pure_layers_import_only_what_they_may(layer):
    found = []
    for name, path in MODULES.items():
        if not (name + ".").startswith(layer) and name != layer:
            continue
        for statement, target in _imports(_parse(path)):
            if not target.startswith(ALLOWED[layer]):
                found.append("%s imports %s" % (_where(path, statement), target))
    assert found == [], "%s may import only %s: %s" % (layer, ALLOWED[layer] or "the standard library", found)


@pytest.mark.parametrize("package", sorted(THIRD_PARTY))
def test_controller_only_packages_are_imported_only_where_allowed(package):
    found = []
    for path in PLUGIN_FILES:
        if str(path.relative_to(PLUGINS)) in THIRD_PARTY[package]:
            continue
        for node in ast.walk(_parse(path)):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            if any(name == package or name.startswith(package + ".") for name in names):
                found.append(_where(path, node))
    assert found == [], "%s may be imported only by %s: %s" % (package, ", ".join(THIRD_PARTY[package]), found)


def test_model_modules_import_only_the_layers_below_them():
    model = sorted(name for name in MODULES if name == "model" or name.startswith("model."))
    assert model == sorted(MODEL_LAYERS), "list each module of model/ in MODEL_LAYERS, with what it may import"
    found = [
        "%s imports %s" % (_where(MODULES[name], statement), target)
        for name in model
        for statement, target in _imports(_parse(MODULES[name]))
        if target.startswith("model") and target not in MODEL_LAYERS[name]
    ]
    assert found == [], "a model module imports only the layers MODEL_LAYERS lists for it: %s" % found


def test_the_model_compares_no_policy_name_but_in_quota_lint():
    found = []
    for name, path in MODULES.items():
        if not name.startswith("model.") or name == "model.quota_lint":
            continue
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                operands += [item for o in operands if isinstance(o, (ast.Tuple, ast.List, ast.Set)) for item in o.elts]
                literals = {o.value for o in operands if isinstance(o, ast.Constant) and isinstance(o.value, str)}
                if literals & POLICY_NAMES:
                    found.append(
                        "%s compares with %s" % (_where(path, node), ", ".join(sorted(literals & POLICY_NAMES)))
                    )
    assert found == [], "what differs between policies is a Policy value (model/policy.py): %s" % found


def _outside_scheduler(exceptions: dict[str, str]) -> Iterator[Path]:
    """The plugin files outside scheduler/ that a rule about engines covers: all but its listed exceptions."""
    for path in PLUGIN_FILES:
        relative = str(path.relative_to(PLUGINS))
        if not relative.startswith("module_utils/scheduler/") and relative not in exceptions:
            yield path


def test_engine_files_are_reached_through_the_registry():
    found = []
    for path in _outside_scheduler(ENGINE_IMPORTERS):
        for statement, target in _imports(_parse(path)):
            if target in ENGINE_FILES:
                found.append("%s imports %s" % (_where(path, statement), target))
    assert found == [], "import scheduler.registry and ask it for the backend instead: %s" % found


def test_listed_exceptions_exist():
    # An exception that no longer applies is removed from its list, not left to cover a new one.
    for relative in [*ENGINE_IMPORTERS, *NOT_ENGINE_COMPARISONS, *(f for files in THIRD_PARTY.values() for f in files)]:
        assert (PLUGINS / relative).is_file(), relative
    for package, rule in LAYERS.items():
        for entry, modules in rule.only_in.items():
            assert entry in (*rule.imports, *rule.third_party), (package, entry)
            for module in modules:
                assert "%s.%s" % (package, module) in MODULES, (package, module)


def _engine_names(node: ast.AST) -> set[str]:
    """Engine names written as string literals in ``node`` (a constant, or a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ENGINE_NAMES:
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_engine_names(item) for item in node.elts)) if node.elts else set()
    return set()


def test_no_comparison_with_an_engine_name_outside_scheduler():
    found = []
    for path in _outside_scheduler(NOT_ENGINE_COMPARISONS):
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.Compare):
                names = set().union(*(_engine_names(operand) for operand in (node.left, *node.comparators)))
                if names:
                    found.append("%s compares with %s" % (_where(path, node), ", ".join(sorted(names))))
    assert found == [], "ask the engine's backend (scheduler/base.py) instead of its name: %s" % found


_ENGINE = r"""['"](?:%s)['"]""" % "|".join(sorted(ENGINE_NAMES))
# In a playbook's or role's YAML (a when, a template): the scheduler compared with anything, or
# anything compared with an engine's name (==, !=, in a list of names).
_YAML_ENGINE_COMPARISON = re.compile(
    r"scheduler\s*(?:==|!=|(?:not\s+)?in\s*[\[(])"
    r"|(?:==|!=)\s*%(engine)s|%(engine)s\s*(?:==|!=)"
    r"|(?:not\s+)?in\s*[\[(][^\])]*%(engine)s" % {"engine": _ENGINE}
)


def _ansible_yaml() -> list[Path]:
    return sorted(path for folder in ("playbooks", "roles") for path in (ROOT / folder).rglob("*.yml"))


def _yaml_lines() -> Iterator[tuple[str, str]]:
    """Every line of the playbooks' and roles' YAML that is not a comment, as (where, line)."""
    for path in _ansible_yaml():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.lstrip().startswith("#"):
                yield "%s:%d" % (path.relative_to(ROOT), number), line


def test_no_playbook_or_role_compares_an_engine_name():
    found = ["%s: %s" % (where, line.strip()) for where, line in _yaml_lines() if _YAML_ENGINE_COMPARISON.search(line)]
    assert found == [], "ask clusterproof_site.engine (scheduler/registry.py site_engine) instead: %s" % found


# The mode compared (==, !=, in a list), or read from the inventory rather than the settled site.
_YAML_MODE_COMPARISON = re.compile(
    r"cluster_mode\s*(?:==|!=|(?:not\s+)?in\s*[\[(])|(?:==|!=)\s*\S*cluster_mode"
    r"|clusterproof_cluster_mode\s*(?:\||}}|\)|$)|['\"]sandbox['\"]\s*(?:==|!=)"
)


def test_no_playbook_or_role_works_the_cluster_mode_out_again():
    found = ["%s: %s" % (where, line.strip()) for where, line in _yaml_lines() if _YAML_MODE_COMPARISON.search(line)]
    assert found == [], "ask clusterproof_site.sandbox (inventory/schema.py) instead: %s" % found


@pytest.mark.parametrize(
    "line",
    [
        "x: \"{{ 'sandbox' if clusterproof_site.cluster_mode == 'sandbox' else 'helm' }}\"",
        "x: \"{{ clusterproof_site.cluster_mode != 'sandbox' }}\"",
        "x: \"{{ (clusterproof_cluster_mode | default('sandbox')) == 'sandbox' }}\"",
        'site_report_cluster_mode: "{{ clusterproof_cluster_mode }}"',
        "when: clusterproof_site.cluster_mode in ['sandbox']",
    ],
)
def test_the_yaml_scan_sees_a_mode_worked_out_again(line):
    assert _YAML_MODE_COMPARISON.search(line)


@pytest.mark.parametrize(
    "line",
    [
        'site_report_cluster_mode: "{{ clusterproof_site.cluster_mode }}"',
        'kubeconfig: "{{ clusterproof_defaults_kubeconfigs[clusterproof_site.cluster_mode] }}"',
        "msg: run the site_inventory role with clusterproof_cluster_mode: kubeadm, first.",
    ],
)
def test_the_yaml_scan_lets_the_settled_mode_be_read(line):
    assert not _YAML_MODE_COMPARISON.search(line)


@pytest.mark.parametrize(
    "line",
    [
        "when: clusterproof_site.scheduler == 'kai'",
        "when: clusterproof_site.scheduler != \"kueue\" and clusterproof_site.cluster_mode == 'sandbox'",
        "when: clusterproof_site.scheduler in ['kai', 'kueue']",
        "when: site_engine not in ('koordinator',)",
        "x: \"{{ 'kai' == tenant_admission_scheduler }}\"",
    ],
)
def test_the_yaml_scan_sees_an_engine_comparison(line):
    # The test above passes vacuously if the pattern matches nothing: it must see today's forms.
    assert _YAML_ENGINE_COMPARISON.search(line)
    assert _ansible_yaml(), "no playbook or role found"


def test_the_walk_sees_the_layers():
    # The tests above pass vacuously if the walk finds nothing: it must see the known edges.
    graph = _graph()
    assert "scheduler.kai" in graph["scheduler.registry"]
    assert "tenancy.names" in graph["tenancy.projects"]
    assert "scheduler.registry" in graph["validate.scenario_runner"]
    assert "versions" in graph["sandbox.build"]
    assert "report.templates" in graph["report.render"]
    assert "model.victims" in graph["model.engine"]
    assert "model.engine" in graph["model.reclaim"]
    assert {top for _, top in _third_party(_parse(MODULES["kube.client"]))} == {"kubernetes", "urllib3"}
    assert "sandbox.build" in {target for _, target in _imports(_parse(MODULES["bundle.build"]))}
