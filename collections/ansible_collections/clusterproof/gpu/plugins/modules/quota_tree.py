#!/usr/bin/python
"""Make an elastic quota tree exist on the GPU scheduler, as the inventory declares it."""

DOCUMENTATION = r"""
module: quota_tree
short_description: Make an elastic quota tree (min/max per resource, namespaces on leaves) exist on KAI or Kueue
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Takes the checked tree (C(clusterproof_site.quota_tree), module_utils/tenancy/quota_tree.py says the rules)
    and makes each node a KAI Queue under its parent queue (quota = min, limit = max, over-quota
    weight = min; CPU in millicpus, memory in megabytes), and each leaf's namespaces exist, labelled
    with their leaf.
  - On Kueue, each inner node is a Cohort under its parent and each leaf a ClusterQueue in its parent
    cohort (nominal quota = min, borrowing limit = max - min), admitting the leaf's namespaces, each
    with a LocalQueue named after the leaf.
  - Server-side apply, changing only what differs; check mode reports what would change.
extends_documentation_fragment:
  - clusterproof.gpu.quota_tree
  - clusterproof.gpu.kube_auth
  - clusterproof.gpu.scheduler
"""

EXAMPLES = r"""
- name: Make the quota tree exist
  clusterproof.gpu.quota_tree:
    tree: "{{ clusterproof_site.quota_tree }}"
    kubeconfig: "{{ clusterproof_active_kubeconfig }}"
"""

RETURN = r"""
changed_objects:
  description: Kind/name of every object that was (or in check mode would be) created or changed.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import quota_tree


def _work(module):
    backend = registry.backend(module.params["scheduler"])
    nodes, problems = quota_tree.check_tree(module.params["tree"])
    if problems:
        raise runner.ModuleError(
            "quota tree: %s; nothing was changed"
            % "; ".join("%s: %s: expected %s, found %r" % (p.where, p.field, p.expected, p.found) for p in problems)
        )
    changed_objects = []
    applier = kube.Applier(kube.api_client(module.params["kubeconfig"], module.params["context"]), module.check_mode)
    try:
        for manifest in backend.tree_objects(nodes):
            changed, _, _ = applier.apply(manifest)
            if changed:
                changed_objects.append("%s/%s" % (manifest["kind"], manifest["metadata"]["name"]))
    except kube.ApiException as error:
        message = runner.api_error_message(error, "making the quota tree exist", backend.hint)
        raise runner.ModuleError(message, changed_objects=changed_objects) from None
    return {"changed": bool(changed_objects), "changed_objects": changed_objects}


def main():
    runner.run_cluster_module(
        runner.QUOTA_TREE_ARG_SPEC, registry.ARG_SPEC, work=_work, doing="making the quota tree exist"
    )


if __name__ == "__main__":
    main()
