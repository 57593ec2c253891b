"""Action plugin: check the site inventory on the controller and publish what it declares.

It needs every host's variables, which only the controller has, so it is an action plugin, not a
module. The logic is in module_utils/inventory/schema.py.

Ansible reads the inventory's files and templates its values lazily, when a variable is first
used, so a file it cannot parse (a tab, bytes that are not UTF-8) or a value it cannot template
(an undefined variable) fails here, on the first host that uses it. Each is caught per host and
per variable and becomes an error like the schema's: where (the hosts), the variable, and the file
and line Ansible names. A value whose YAML aliases expand past ``bounds.MAX_VALUES`` is handed on
untemplated (templating would expand it), for the schema to refuse. Before any of it, every file
of the inventory's sources is checked to be UTF-8 (``inventory/files.py``), as the entry point does
before the run: a file that is not is named with the line and byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase
from ansible.vars.hostvars import HostVarsVars

from ansible_collections.clusterproof.gpu.plugins.module_utils.common import bounds
from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory import files, schema
from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory.schema import InventoryError, validate_site

try:  # Where Ansible read a value or a file (ansible-core 2.19's data tags); older cores lack it.
    from ansible._internal._datatag._tags import Origin
except ImportError:  # pragma: no cover - the error is then shown without its file
    Origin = None

# The variables the schema reads (and templates); others are only checked by name.
OUR_PREFIXES = ("clusterproof_", *schema.OUR_HOST_PREFIXES)
# Hosts named in one error before "and N more".
HOSTS_SHOWN = 5
# A path quoted in Ansible's message: the file is named there.
_QUOTED_PATH = re.compile(r"'/[^']+'")


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _origin_of(value: Any) -> str | None:
    if Origin is None or value is None:
        return None
    if isinstance(value, Origin):
        return str(value)
    tag = Origin.get_tag(value)
    return None if tag is None else str(tag)


def _where_read(error: BaseException, raw: Any = None) -> str:
    """The file (and line) Ansible names for ``error``, or for the raw value it failed on; empty
    when it names none."""
    for link in _chain(error):
        origin = _origin_of(getattr(link, "obj", None))
        if origin:
            return origin
    return _origin_of(raw) or ""


def _with_origin(message: str, origin: str) -> str:
    """Ansible's message and where it read what failed: the origin it tagged, else nothing more
    when its message quotes the file itself ("Could not process '/.../x.yml': ...")."""
    if origin:
        return "%s (%s)" % (message, origin)
    if _QUOTED_PATH.search(message):
        return message
    return "%s (Ansible does not say in which file)" % message


def _message(error: BaseException) -> str:
    if any(isinstance(link, UnicodeError) for link in _chain(error)):
        return "bytes that are not UTF-8"  # rather than the codec's words about surrogates
    return str(getattr(error, "message", None) or error).splitlines()[0]


class _Reader:
    """Every host's variables as plain data, with what could not be read kept aside."""

    def __init__(self, hostvars: Any, loader: Any) -> None:
        self.hostvars = hostvars
        self.loader = loader
        self.memo: dict[int, int] = {}
        # The memo is keyed by identity: what it has sized stays alive, so no identity is reused.
        self.sized: list[Any] = []
        # (variable, message, where read) -> hosts; "variables" when a host's files fail to parse.
        self.failures: dict[tuple[str, str, str], list[str]] = {}

    def read(self, host: str) -> dict[str, Any] | None:
        try:
            raw = self.hostvars.raw_get(host)
            # What hostvars[host] is, without reading the host's variables a second time.
            templated = HostVarsVars(raw, loader=self.loader, host=host)
        except AnsibleError as error:
            self.failures.setdefault(("variables", _message(error), _where_read(error)), []).append(host)
            return None
        variables: dict[str, Any] = {}
        self.sized.append(raw)
        for key in raw:
            value = raw[key]
            if not str(key).startswith(OUR_PREFIXES) or str(key).startswith(schema.GPU_HOST_ROLE_PREFIXES):
                variables[key] = value  # read by name only
            elif bounds.expanded_size(value, bounds.MAX_VALUES, self.memo) > bounds.MAX_VALUES:
                variables[key] = value  # untemplated: the schema refuses it without expanding it
            else:
                try:
                    variables[key] = templated[key]
                except AnsibleError as error:
                    self.failures.setdefault((str(key), _message(error), _where_read(error, value)), []).append(host)
        return variables

    def errors(self) -> list[InventoryError]:
        found = []
        for (field, message, origin), hosts in sorted(self.failures.items()):
            shown = ", ".join(hosts[:HOSTS_SHOWN])
            if len(hosts) > HOSTS_SHOWN:
                shown += " and %d more" % (len(hosts) - HOSTS_SHOWN)
            where = ("host " if len(hosts) == 1 else "hosts ") + shown
            expected = "a value Ansible can template" if field != "variables" else "files Ansible can read"
            found.append(InventoryError(where, field, expected, _with_origin(message, origin)))
        return found

    def unreadable(self) -> set[tuple[str, str]]:
        """(host, variable) pairs that could not be read: the schema's view of them is left out."""
        return {(host, field) for (field, _, _), hosts in self.failures.items() for host in hosts}


def _about(error: InventoryError, unreadable: set[tuple[str, str]]) -> bool:
    """Whether a schema error only repeats that a variable could not be read."""
    for host, field in unreadable:
        named = error.field == field or error.field.startswith((field + ".", field + "["))
        if named and (error.where == f"host {host}" or field.startswith("clusterproof_")):
            return True
    return False


def check(
    groups: Mapping[str, Any], hostvars: Any, loader: Any
) -> tuple[schema.SiteDeclaration | None, list[InventoryError]]:
    """The schema's verdict on the inventory as Ansible holds it (``hostvars``: Ansible's HostVars)."""
    reader = _Reader(hostvars, loader)
    plain = {host: reader.read(host) for host in groups.get("all", [])}
    if any(variables is None for variables in plain.values()):
        return None, reader.errors()  # without a host's files, the schema would only guess
    declaration, errors = validate_site(groups, {host: vars_ for host, vars_ in plain.items() if vars_ is not None})
    unreadable = reader.unreadable()
    errors = reader.errors() + [error for error in errors if not _about(error, unreadable)]
    return (declaration if not errors else None), errors


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("fact_name",))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        fact_name = self._task.args.get("fact_name", "clusterproof_site")
        # The inventory's files first: one that is not UTF-8 is named with its line and byte here,
        # where reading the hosts' variables would only say that some file held such bytes.
        not_utf8 = files.encoding_errors(task_vars.get("ansible_inventory_sources") or [])
        declaration, errors = None, []
        if not not_utf8:
            declaration, errors = check(task_vars["groups"], task_vars["hostvars"], self._loader)
        result["changed"] = False
        if not_utf8 or errors:
            result["failed"] = True
            result["errors"] = not_utf8 + [str(error) for error in errors]
            result["msg"] = "the inventory has %d error(s); nothing was changed:\n%s" % (
                len(result["errors"]),
                "\n".join(f"  - {error}" for error in result["errors"]),
            )
            return result
        assert declaration is not None
        site = declaration.to_dict()
        result["ansible_facts"] = {fact_name: site}
        result["site"] = site
        result["warnings"] = list(declaration.warnings)
        result["msg"] = "inventory of site %s: %d GPU node(s), %d GPU(s), %d project(s)" % (
            declaration.site_name,
            len(declaration.nodes),
            declaration.total_gpus,
            len(declaration.projects),
        )
        return result
