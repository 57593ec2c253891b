"""Action plugin: check the site inventory on the controller and publish what it declares.

It needs every host's variables, which only the controller has, so it is an action plugin, not a
module. The logic is in module_utils/inventory/schema.py.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory.schema import validate_site


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("fact_name",))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        fact_name = self._task.args.get("fact_name", "clusterproof_site")
        groups = task_vars["groups"]
        hostvars = task_vars["hostvars"]
        declaration, errors = validate_site(groups, {host: hostvars[host] for host in groups.get("all", [])})
        result["changed"] = False
        if errors:
            result["failed"] = True
            result["errors"] = [str(error) for error in errors]
            result["msg"] = "the inventory has %d error(s); nothing was changed:\n%s" % (
                len(errors),
                "\n".join(f"  - {error}" for error in errors),
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
