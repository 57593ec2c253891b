# The work is done by the action plugin of the same name (plugins/action/site_inventory.py), on
# the controller; this file carries its documentation.

DOCUMENTATION = r"""
module: site_inventory
short_description: Check the site inventory against clusterproof's schema and publish the declaration
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Reads every host's variables and checks the groups C(kube_control_plane) and C(gpu_nodes), the
    site-wide C(clusterproof_*) variables, the per-node C(gpu_*) and C(node_*) variables and the projects.
  - Variables with a recognised prefix that the schema does not know are errors, so a typo does not
    fall back to a default.
  - Numbers must be finite and within the limits of docs/inventory.md, names, labels and taints in
    Kubernetes' syntax and lengths, booleans boolean; a variable whose YAML aliases expand past
    100,000 values is refused without being expanded. Files Ansible cannot parse and values it
    cannot template (an undefined variable) are errors naming the hosts, the variable and the file.
  - On success sets a fact (default C(clusterproof_site)) holding the nodes, projects and site settings.
  - On failure lists every error with its host or project, the field, what was expected and what was
    found; it changes nothing.
  - Runs on the controller only.
options:
  fact_name:
    description: Name of the fact to set with the checked declaration.
    type: str
    default: clusterproof_site
"""

EXAMPLES = r"""
- name: Check the inventory before anything runs
  clusterproof.gpu.site_inventory:
"""

RETURN = r"""
site:
  description: The checked declaration.
  returned: success
  type: dict
  contains:
    site_name: {description: The site's name., type: str}
    cluster_mode: {description: sandbox, existing or kubeadm., type: str}
    sandbox:
      description:
        - Whether the cluster is the sandbox (cluster_mode sandbox), which every role that depends on the mode reads.
      type: bool
    nodes: {description: The GPU nodes with their declared GPUs, product, memory, CPU, labels and taints., type: list}
    projects: {description: Projects with quota, limit and over-quota weight., type: list}
    total_gpus: {description: GPUs the inventory declares in all., type: int}
    scheduler: {description: The GPU scheduler (an engine's name or none)., type: str}
    engine:
      description:
        - What the playbooks and roles ask of the scheduler, from its backend (never its name).
        - C(name), C(display_name); C(install_role), the role that installs it (empty for none); C(has_queues),
          whether each project gets a queue (projects, admission, quota tree, isolation and scenarios apply);
          C(gpu_agent), whether simulated GPU nodes answer its reservation pods; C(sandbox_stop_roles), the
          install roles of other engines whose sandbox leftovers are removed (their tasks/absent.yml).
      type: dict
    warnings: {description: Findings that are allowed but worth a look., type: list}
errors:
  description: One line per problem found.
  returned: failure
  type: list
  elements: str
"""
