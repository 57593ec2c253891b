"""Every command the README and docs/ (and the roles' READMEs) tell a reader to run is one that
exists: a drifted command is a claim that fails on the reader's first try (issue 31).

Read anywhere in a document, code blocks included (test_docs_paths.py reads backticked paths and
links alone):

- ``./clusterproof WORD`` names a subcommand of the entry script, and ``./clusterproof lab WORD``
  (``up|install|down``) one of the lab's, as its ``case`` blocks list them; the script's own usage
  (its header) too, and that usage and the README's Layout line for the script list them all;
- ``python -m cli WORD`` names a command of the cli package (``cli.__main__.PLAYBOOKS``), each of
  which runs a playbook that exists;
- every playbook named exists: ``playbooks/NAME.yml``, what ``ansible-playbook`` is given, and a
  playbook or scenario named by its file name alone (```NAME.yml```);
- ``bench/NAME.py`` exists, and each ``--option`` written after it on the same line is one the
  script takes.
"""

from __future__ import annotations

import re

from cli import __main__ as cli_main
from tests.conftest import REPO

ENTRY = REPO / "clusterproof"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted(REPO.glob("roles/*/README.md"))]
# A subcommand (and its own, for the lab): ``./clusterproof lab up|install|down``.
_ENTRY_COMMAND = re.compile(r"\./clusterproof +([a-z][a-z-]*)(?: +([a-z][a-z|-]*))?")
_CLI_COMMAND = re.compile(r"python3? -m cli +([a-z][a-z|-]*)")
_PLAYBOOK_PATH = re.compile(r"(?<![\w./-])(playbooks/[\w.-]+\.yml)")
_ANSIBLE_PLAYBOOK = re.compile(r"ansible-playbook\b([^`\n]*)")
_BARE_YAML = re.compile(r"`([\w.-]+\.yml)`")
_BENCH = re.compile(r"(?<![\w./-])(bench/[\w-]+\.py)([^`\n|]*)")
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def _entry_commands() -> dict[str, set[str]]:
    """The entry script's subcommands, each with its own (the lab's ``up``, ``install``, ``down``), as
    its ``case`` blocks list them: a subcommand at the outer block's indentation, its own inside it."""
    commands: dict[str, set[str]] = {}
    current = None
    for line in ENTRY.read_text().splitlines():
        outer = re.match(r"^  ([a-z][a-z-]*)\)", line)
        inner = re.match(r"^      ([a-z][a-z-]*)\)", line)
        if outer:
            current = outer.group(1)
            commands[current] = set()
        elif inner and current:
            commands[current].add(inner.group(1))
    return commands


def _usage() -> str:
    """The entry script's header, which it prints as its usage."""
    return "\n".join(line for line in ENTRY.read_text().splitlines()[1:] if line.startswith("#"))


def _texts() -> list[tuple[str, str]]:
    return [(str(doc.relative_to(REPO)), doc.read_text()) for doc in DOCS] + [("clusterproof (usage)", _usage())]


def test_every_clusterproof_command_named_is_a_subcommand() -> None:
    commands = _entry_commands()
    wrong = []
    for name, text in _texts():
        for match in _ENTRY_COMMAND.finditer(text):
            command, sub = match.groups()
            if command not in commands or (commands[command] and sub and not set(sub.split("|")) <= commands[command]):
                wrong.append("%s: %s" % (name, match.group(0)))
    assert wrong == [], "commands the entry script lacks (it has %s): %s" % (commands, wrong)


def _listed(text: str) -> set[str]:
    """The subcommands a list names: ``site``, ``lab up|install|down`` as ``lab up``, ``lab install``..."""
    found = set()
    for command, subs in re.findall(r"(?<![\w-])([a-z]+)(?: ([a-z]+(?:\|[a-z]+)+))?", text):
        found.add(command)
        found.update("%s %s" % (command, sub) for sub in subs.split("|") if subs)
    return found


def test_the_usage_and_the_readme_layout_list_every_subcommand() -> None:
    commands = _entry_commands()
    every = set(commands) | {"%s %s" % (command, sub) for command, subs in commands.items() for sub in subs}
    usage = " ".join(match.group(0) for match in _ENTRY_COMMAND.finditer(_usage()))
    layout = re.search(r"^clusterproof +entry script \(([^)]*)\)", (REPO / "README.md").read_text(), re.MULTILINE)
    assert layout, "the README's Layout names the entry script"
    assert every <= _listed(usage), "the script's usage lacks %s" % sorted(every - _listed(usage))
    assert every <= _listed(layout.group(1)), "the README's Layout line lacks %s" % sorted(
        every - _listed(layout.group(1))
    )


def test_every_cli_command_named_is_one() -> None:
    wrong = [
        "%s: %s" % (name, command)
        for name, text in _texts()
        for match in _CLI_COMMAND.finditer(text)
        for command in match.group(1).split("|")
        if command not in cli_main.PLAYBOOKS
    ]
    assert wrong == [], "python -m cli commands that do not exist: %s" % wrong


def test_every_playbook_the_cli_runs_exists() -> None:
    missing = [playbook for playbook, _ in cli_main.PLAYBOOKS.values() if not (REPO / playbook).is_file()]
    assert missing == []


def _playbooks_named(text: str) -> set[str]:
    named = set(_PLAYBOOK_PATH.findall(text))
    for match in _ANSIBLE_PLAYBOOK.finditer(text):
        named.update(word for word in match.group(1).split() if word.endswith(".yml"))
    return named


def test_every_playbook_named_exists() -> None:
    missing = []
    for doc in DOCS:
        text, where = doc.read_text(), doc.relative_to(REPO)
        missing += ["%s: %s" % (where, path) for path in _playbooks_named(text) if not (REPO / path).is_file()]
        # A file name alone names a playbook (``site.yml``) or a scenario (``fractional-gpus.yml``).
        missing += [
            "%s: %s" % (where, name)
            for name in set(_BARE_YAML.findall(text))
            if not (REPO / "playbooks" / name).is_file() and not (REPO / "scenarios" / name).is_file()
        ]
    assert missing == [], "playbooks that do not exist: %s" % sorted(missing)


def test_every_bench_invocation_names_a_script_and_its_options() -> None:
    wrong = []
    for doc in DOCS:
        for script, rest in _BENCH.findall(doc.read_text()):
            path = REPO / script
            if not path.is_file():
                wrong.append("%s: %s" % (doc.relative_to(REPO), script))
                continue
            source = path.read_text()
            wrong += [
                "%s: %s %s" % (doc.relative_to(REPO), script, option)
                for option in _OPTION.findall(rest)
                if '"%s"' % option not in source
            ]
    assert wrong == [], "bench scripts or options that do not exist: %s" % wrong


def test_the_walk_finds_the_commands_it_checks() -> None:
    # The tests above pass vacuously if nothing is found: the README names each kind.
    readme = (REPO / "README.md").read_text()
    commands = _entry_commands()
    assert {"site", "validate", "test", "lab"} <= set(commands) and commands["lab"] == {"up", "install", "down"}
    assert {match.group(1) for match in _ENTRY_COMMAND.finditer(readme)} >= {"site", "validate", "lab"}
    assert "playbooks/site.yml" in _playbooks_named(readme)
    assert _CLI_COMMAND.search(readme) and _BENCH.search(readme)
    assert _OPTION.findall("bench/validation_bench.py --nodes 10000 --dra-half") == ["--nodes", "--dra-half"]
