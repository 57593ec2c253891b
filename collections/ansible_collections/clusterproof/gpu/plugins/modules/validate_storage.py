#!/usr/bin/python
"""Prove the declared storage classes work: a claim binds, a shared claim serves two pods."""

DOCUMENTATION = r"""
module: validate_storage
short_description: Prove the default StorageClass binds a claim and a ReadWriteMany class serves two pods
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Checks that every declared StorageClass exists as declared and that exactly one class of the
    cluster is the default, the declared one.
  - Creates a temporary namespace C(clusterproof-storage-probe-<random>); in it a claim on the
    default class (and, for a C(WaitForFirstConsumer) class, a pod that mounts it) and waits for
    the claim to become Bound; then, when a declared class offers C(ReadWriteMany), a claim on it
    mounted by two pods (preferring two nodes) and waits for both to run. With O(pods_run), a reader
    pod checks what they wrote.
  - The probe's pods go only to nodes that are Ready and schedulable when it starts; a node that
    stops being Ready while the probe waits on it is named, and the probe stops waiting for it.
  - Always deletes the namespace (the pods of nodes that are not Ready at once, grace period 0), and
    waits for the volumes the probe made to go (deleting those a C(Retain) class keeps), also when a
    step failed; a volume pinned to a node that is not Ready is a warning naming the node, any other
    leftover a failed check.
  - Before it probes, removes what earlier probes left (namespaces labelled
    C(clusterproof.io/probe=storage), volumes whose claims were in them) and says so in the report.
  - Returns the checks as a site report section. Changes nothing that outlives the run, so it
    reports C(changed=false); in check mode it creates nothing and only checks the classes.
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
  - clusterproof.gpu.storage_classes
options:
  probe_image:
    description:
      - Image of the probe pods (on the sandbox no container runs).
      - Left out, the pinned busybox, from C(plugins/module_utils/versions.py).
    type: str
  claim_size:
    description: Size of each probe claim.
    type: str
    default: 1Mi
  timeout:
    description: Seconds to wait for a claim to bind and its pods to run.
    type: int
    default: 180
  cleanup_timeout:
    description:
      - Seconds to wait for the probe's namespace and volumes to go. The namespace controller
        empties a namespace in its own time (many seconds on a cluster with many resource types).
    type: int
    default: 180
  pods_run:
    description:
      - The cluster's pods really run (not the sandbox, whose KWOK nodes only simulate them). The probe
        pods then keep off simulated nodes, and after each claim's pods run a reader pod prints the
        probe file, and the default class's claim must hold what its first pod wrote, the shared claim
        each of its two pods' lines.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Prove the storage classes bind
  clusterproof.gpu.validate_storage:
    classes: "{{ clusterproof_site.storage_classes }}"
    kubeconfig: "{{ clusterproof_active_kubeconfig }}"
  register: storage_checks
"""

RETURN = r"""
checks:
  description: Every check (ids C(storage/...)), as the other validators return them.
  returned: success
  type: list
  elements: dict
failed_checks:
  description: How many checks failed.
  returned: success
  type: int
section:
  description: The checks and the class table as one site report section.
  returned: success
  type: dict
namespace:
  description: The probe namespace (deleted again), empty in check mode.
  returned: success
  type: str
"""

import secrets

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import storage as storage_validation
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import storage_probe


def _observed_classes(params):
    """An API client and the cluster's StorageClasses as JSON, or why they cannot be read."""
    try:
        api = kube.api_client(params["kubeconfig"], params["context"])
        items = kube.k8s_client.StorageV1Api(api).list_storage_class(_request_timeout=params["request_timeout"]).items
    except (kube.KubeError, kube.ApiException, OSError) as error:
        raise runner.ModuleError(
            "cannot read the cluster's StorageClasses (kubeconfig %s): %s. Check that the API server is up "
            "and that the kubeconfig points at it." % (params["kubeconfig"] or "default", error)
        ) from error
    return api, [api.sanitize_for_serialization(item) for item in items]


def _probe_checks(api, params, default, rwx):
    """What earlier probes left, removed; then claims on the default class and on the ReadWriteMany
    class, in a namespace made and removed here, their pods on the nodes Ready at the start: the
    leftovers, binding, sharing and cleanup checks."""
    namespace = storage_validation.PROBE_NAMESPACE_PREFIX + secrets.token_hex(3)
    found, remaining, stranded = storage_probe.remove_leftovers(api, namespace, params["cleanup_timeout"])
    leftovers = storage_validation.leftovers_check(found, remaining, stranded)
    nodes, left_out = storage_validation.probe_nodes(kube.list_nodes(api), params["pods_run"])
    probe = storage_probe.Probe(api, namespace, params, nodes)
    default_probe = rwx_probe = None
    try:
        if not nodes:
            raise kube.KubeError(storage_validation.no_node_message(left_out))
        probe.create_namespace()
        mode = "ReadWriteOnce" if "ReadWriteOnce" in default.access_modes else default.access_modes[0]
        consumers = ["default-consumer"] if default.volume_binding_mode == "WaitForFirstConsumer" else []
        default_probe = probe.claim("default-claim", default, mode, consumers)
        if rwx is not None:
            rwx_probe = probe.claim("shared-claim", rwx, "ReadWriteMany", ["shared-a", "shared-b"])
    except (kube.ApiException, kube.KubeError) as error:
        default_probe = default_probe or storage_validation.ClaimProbe(default.name, "ReadWriteOnce")
        why = kube.api_error_message(error) if isinstance(error, kube.ApiException) else str(error)
        default_probe.error = default_probe.error or why
        if rwx is not None and rwx_probe is None:
            rwx_probe = storage_validation.ClaimProbe(rwx.name, "ReadWriteMany", error=why)
    finally:
        cleanup = probe.clean_up()
    return namespace, [
        leftovers,
        storage_validation.bind_check(default, default_probe, params["timeout"]),
        storage_validation.readback_check(default, default_probe, params["pods_run"], params["timeout"]),
        storage_validation.rwx_check(rwx, rwx_probe, params["timeout"]),
        storage_validation.cleanup_check(namespace, cleanup),
    ]


def run(module):
    params = dict(module.params, probe_image=module.params["probe_image"] or versions.BUSYBOX.image)
    declared = storage.classes_argument(params["classes"])
    api, observed = _observed_classes(params)
    checks = storage_validation.class_checks(declared, observed)
    checks.append(storage_validation.default_class_check(declared, observed))
    default = storage.default_class(declared)
    namespace = ""
    if module.check_mode or default is None:
        reason = "check mode creates nothing" if module.check_mode else "the inventory declares no storage classes"
        checks += [
            Check("storage/default-binds", "A claim on the default class becomes Bound", "skip", message=reason),
            Check(
                "storage/default-readback",
                "A pod reads back what another wrote to a claim on the default class",
                "skip",
                message=reason,
            ),
            Check("storage/rwx-shared", "Two pods share one ReadWriteMany claim", "skip", message=reason),
        ]
    else:
        namespace, probed = _probe_checks(api, params, default, storage.rwx_class(declared))
        checks += probed
    return {
        "checks": [check.to_dict() for check in checks],
        "failed_checks": sum(1 for check in checks if check.status == "fail"),
        "section": storage_validation.section(checks, storage_validation.class_table(declared, observed)),
        "namespace": namespace,
    }


def main():
    runner.run_cluster_module(
        runner.STORAGE_CLASSES_ARG_SPEC,
        {
            # Left out: the pinned busybox.
            "probe_image": {"type": "str"},
            "claim_size": {"type": "str", "default": "1Mi"},
            "timeout": {"type": "int", "default": 180},
            "cleanup_timeout": {"type": "int", "default": 180},
            "pods_run": {"type": "bool", "default": False},
        },
        work=run,
        doing="probing the storage classes",
        expected=(storage.ClassesArgumentError,),
    )


if __name__ == "__main__":
    main()
