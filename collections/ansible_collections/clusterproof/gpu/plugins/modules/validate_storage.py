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
  - Always deletes the namespace, and waits for the volumes the probe made to go (deleting those a
    C(Retain) class keeps), also when a step failed; a leftover is a failed check.
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
import time

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import storage as storage_validation


class Probe:
    """Creates the probe's objects in one namespace, waits on them, and removes them all."""

    def __init__(self, api, namespace, params):
        self.core = kube.core_v1(api)
        self.api = api
        self.namespace = namespace
        self.image = params["probe_image"]
        self.size = params["claim_size"]
        self.timeout = params["timeout"]
        self.cleanup_timeout = params["cleanup_timeout"]
        # Where pods really run, they keep off simulated nodes and a reader checks what they wrote.
        self.pods_run = params["pods_run"]
        self.volumes = set()

    def create_namespace(self):
        self.core.create_namespace(storage.probe_namespace(self.namespace))
        # Pods are refused (403) until the namespace's default ServiceAccount exists.
        kube.wait_for_default_service_account(self.api, self.namespace)

    def claim(self, name, cls, access_mode, pods):
        """Claim ``cls`` and start ``pods`` mounting it; wait until it is Bound and they run."""
        probe = storage_validation.ClaimProbe(cls.name, access_mode)
        started = time.monotonic()
        try:
            self.core.create_namespaced_persistent_volume_claim(
                self.namespace, storage.probe_claim(self.namespace, name, cls.name, access_mode, self.size)
            )
            # The first pod alone until the claim is Bound: while a WaitForFirstConsumer claim is
            # unbound, the scheduler holds every pod mounting it to the node it chose for the first,
            # and a shared claim is to be shown shared across nodes.
            created = pods[:1]
            for pod in created:
                self._start_pod(pod, name)
            deadline = started + self.timeout
            while True:
                self._observe(probe, name, created)
                if probe.phase == "Bound" and probe.bound_after_s is None:
                    probe.bound_after_s = round(time.monotonic() - started, 2)
                if probe.phase == "Bound" and len(created) < len(pods):
                    for pod in pods[len(created) :]:
                        self._start_pod(pod, name)
                    created = list(pods)
                    continue
                running = [pod for pod, (phase, _) in probe.pods.items() if phase in ("Running", "Succeeded")]
                if probe.phase == "Bound" and len(running) == len(pods):
                    if self.pods_run and pods:
                        probe.read_back = self._read_back(name, deadline)
                    break
                if time.monotonic() > deadline:
                    probe.events = self._events(name)
                    break
                time.sleep(0.5)
        except kube.ApiException as error:
            probe.error = kube.api_error_message(error)
        return probe

    def _start_pod(self, pod, claim):
        self.core.create_namespaced_pod(
            self.namespace, storage.probe_pod(self.namespace, pod, claim, self.image, claim, self.pods_run)
        )

    def _read_back(self, claim, deadline):
        """What a reader pod on ``claim`` prints of the probe file once it has ended, or None."""
        reader = claim + "-reader"
        self.core.create_namespaced_pod(
            self.namespace, storage.probe_pod(self.namespace, reader, claim, self.image, claim, True, reader=True)
        )

        def ended() -> bool:
            return self.core.read_namespaced_pod(reader, self.namespace).status.phase in ("Succeeded", "Failed")

        if wait_until(ended, timeout=deadline - time.monotonic(), interval=0.5).held:
            return self.core.read_namespaced_pod_log(reader, self.namespace)
        return None

    def _observe(self, probe, name, pods):
        claim = self.core.read_namespaced_persistent_volume_claim(name, self.namespace)
        probe.phase = claim.status.phase or ""
        probe.volume = claim.spec.volume_name or ""
        if probe.volume:
            self.volumes.add(probe.volume)
        for pod in pods:
            found = self.core.read_namespaced_pod(pod, self.namespace)
            probe.pods[pod] = (found.status.phase or "", found.spec.node_name or "")

    def _events(self, name):
        try:
            events = self.core.list_namespaced_event(
                self.namespace, field_selector="involvedObject.name=%s" % name
            ).items
        except kube.ApiException:
            return []
        return ["%s: %s" % (event.reason, event.message) for event in events]

    def clean_up(self):
        """Delete the namespace (its claims and pods go with it), then wait for the volumes the
        claims had to go; a volume its class retains is deleted here, the probe made it."""
        cleanup = storage_validation.Cleanup()
        try:
            self.core.delete_namespace(self.namespace, propagation_policy="Foreground")
        except kube.ApiException as error:
            if error.status != 404:
                cleanup.error = "deleting namespace %s: %s %s" % (self.namespace, error.status, error.reason)

        def gone() -> bool:
            cleanup.namespace_left = self._exists(self.core.read_namespace, self.namespace)
            left = []
            for volume in sorted(self.volumes):
                found = self._read_volume(volume)
                if found is None:
                    continue
                left.append(volume)
                if found.status.phase == "Released" and found.spec.persistent_volume_reclaim_policy == "Retain":
                    self.core.delete_persistent_volume(volume)
            cleanup.volumes_left = left
            return not cleanup.namespace_left and not left

        wait_until(gone, timeout=self.cleanup_timeout, interval=0.5)
        return cleanup

    def _read_volume(self, name):
        try:
            return self.core.read_persistent_volume(name)
        except kube.ApiException as error:
            if error.status == 404:
                return None
            raise

    def _exists(self, read, name):
        try:
            read(name)
        except kube.ApiException as error:
            if error.status == 404:
                return False
            raise
        return True


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
    """Claims on the default class and on the ReadWriteMany class, in a namespace made and removed
    here: the probe namespace and the binding, sharing and cleanup checks."""
    namespace = "clusterproof-storage-probe-%s" % secrets.token_hex(3)
    probe = Probe(api, namespace, params)
    default_probe = rwx_probe = None
    try:
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
    finally:
        cleanup = probe.clean_up()
    return namespace, [
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
    spec = runner.argument_spec(
        runner.STORAGE_CLASSES_ARG_SPEC,
        {
            # Left out: the pinned busybox.
            "probe_image": {"type": "str"},
            "claim_size": {"type": "str", "default": "1Mi"},
            "timeout": {"type": "int", "default": 180},
            "cleanup_timeout": {"type": "int", "default": 180},
            "pods_run": {"type": "bool", "default": False},
        },
        auth=True,
    )
    runner.run_module(spec, run, doing="probing the storage classes", expected=(storage.ClassesArgumentError,))


if __name__ == "__main__":
    main()
