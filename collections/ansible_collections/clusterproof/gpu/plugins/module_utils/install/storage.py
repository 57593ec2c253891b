"""Storage classes: the inventory's declaration, the objects and chart values that install them,
and the probe objects the validator uses to prove a class binds.

Three provisioners are known (``PROVISIONERS``):

- ``local-path`` (rancher's local-path-provisioner): a directory per volume on the node
  (``path``), or on a filesystem every node shares (``shared_path``, which serves ReadWriteMany).
- ``nfs`` (nfs-subdir-external-provisioner): a sub-directory per volume on one NFS export; one
  chart release per class, because the export is a setting of the release.
- ``trident`` (NetApp Trident, through its operator chart): one or more ONTAP backends per class,
  each a ``TridentBackendConfig`` with a Secret holding its credentials.

Every StorageClass is clusterproof's own object (the charts are told not to create theirs), so
that exactly one class carries the default annotation, the one the inventory names.

Credentials never enter the declaration: a Trident backend names the Ansible variable (vaulted,
as a rule) that holds ``{username, password}``, and only that name is checked and passed on.

Pure: plain mappings in, dataclasses and plain dicts out.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.install.chart_source import ChartSource

PROVISIONERS = ("local-path", "nfs", "trident")
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
RECLAIM_POLICIES = ("Delete", "Retain")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
# ONTAP drivers whose volumes Trident can provision; file drivers serve ReadWriteMany.
TRIDENT_DRIVERS = ("ontap-nas", "ontap-nas-economy", "ontap-nas-flexgroup", "ontap-san", "ontap-san-economy")
TRIDENT_FILE_DRIVERS = ("ontap-nas", "ontap-nas-economy", "ontap-nas-flexgroup")

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
LOCAL_PATH_PROVISIONER = "rancher.io/local-path"
TRIDENT_PROVISIONER = "csi.trident.netapp.io"
TRIDENT_NAMESPACE = "trident"
LOCAL_PATH_NAMESPACE = "local-path-storage"
LOCAL_PATH_SERVICE_ACCOUNT = "local-path-provisioner-service-account"
LOCAL_PATH_CONFIGMAP = "local-path-config"
NFS_NAMESPACE = "nfs-provisioner"
DEFAULT_LOCAL_PATH = "/opt/local-path-provisioner"
# local-path's placeholder for "every node not listed".
LOCAL_PATH_ANY_NODE = "DEFAULT_PATH_FOR_NON_LISTED_NODES"
# KWOK completes a pod annotated so (roles/sandbox_cluster/files/kwok-stages.yaml): the sandbox's
# helper pods must "finish" for the provisioner to go on.
COMPLETE_AFTER_ANNOTATION = "clusterproof.io/complete-after"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
# The label of a KWOK-simulated node (sandbox.control_plane.SANDBOX_NODE_LABEL): a probe whose pods
# must really run, and local-path's helper pods, keep off such nodes, where a pod only seems to run.
SIMULATED_NODE_LABEL = "clusterproof.io/sandbox-node"
# The annotation of the provisioner's pod template that restarts it when its helper pod template changes.
HELPER_POD_DIGEST_ANNOTATION = "clusterproof.io/helper-pod-sha256"

CLASS_FIELDS = {
    "name": "the StorageClass name (a DNS subdomain)",
    "provisioner": "one of %s" % " | ".join(PROVISIONERS),
    "default": "whether this is the cluster's default class (exactly one class is)",
    "reclaim_policy": "what happens to a volume when its claim goes: %s" % " | ".join(RECLAIM_POLICIES),
    "access_modes": "the access modes the class offers (%s)" % ", ".join(ACCESS_MODES),
    "volume_binding_mode": "when a volume is made: %s" % " | ".join(BINDING_MODES),
    "local_path": "local-path settings: path, or shared_path for a filesystem all nodes share",
    "nfs": "nfs settings: server, path, mount_options",
    "trident": "trident settings: backends (name, storage_driver, management_lif, svm, credentials, data_lif)",
}
LOCAL_PATH_FIELDS = ("path", "shared_path")
NFS_FIELDS = ("server", "path", "mount_options")
TRIDENT_BACKEND_FIELDS = ("name", "storage_driver", "management_lif", "data_lif", "svm", "credentials")

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_HOST = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9.:\[\]]*[A-Za-z0-9\]])?$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class TridentBackend:
    name: str
    storage_driver: str
    management_lif: str
    svm: str
    # The name of the Ansible variable holding {username, password}; never the values.
    credentials: str
    data_lif: str | None = None


@dataclasses.dataclass(frozen=True)
class StorageClassDeclaration:
    name: str
    provisioner: str
    default: bool
    reclaim_policy: str
    access_modes: list[str]
    volume_binding_mode: str
    # local-path: a per-node directory (path), or a directory every node shares (shared_path,
    # ReadWriteMany). nfs: the export (path) on server.
    path: str | None = None
    shared_path: str | None = None
    server: str | None = None
    mount_options: list[str] = dataclasses.field(default_factory=list)
    # trident
    backends: list[TridentBackend] = dataclasses.field(default_factory=list)

    @property
    def offers_rwx(self) -> bool:
        return "ReadWriteMany" in self.access_modes


# An inventory error as (where, field, expected, found); inventory_schema makes them InventoryErrors.
Problem = tuple[str, str, str, str]


class _Problems:
    """Collects problems; calling it shows the value found, ``raw`` takes a description instead."""

    def __init__(self) -> None:
        self.found: list[Problem] = []

    def __call__(self, where: str, field: str, expected: str, value: Any) -> None:
        self.found.append((where, field, expected, _show(value)))

    def raw(self, where: str, field: str, expected: str, found: str) -> None:
        self.found.append((where, field, expected, found))


def _show(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return repr(value)


def _rwx_possible(provisioner: str, settings: Mapping[str, Any]) -> bool:
    if provisioner == "local-path":
        return bool(settings.get("shared_path"))
    if provisioner == "nfs":
        return True
    backends = settings.get("backends") or []
    return bool(backends) and all(
        isinstance(b, Mapping) and b.get("storage_driver") in TRIDENT_FILE_DRIVERS for b in backends
    )


def check_storage_classes(
    value: Any, site_vars: Mapping[str, Any]
) -> tuple[list[StorageClassDeclaration], list[Problem]]:
    """Check ``clusterproof_storage_classes``; ``site_vars`` are the site's variables, where the
    credential variables a Trident backend names must be defined. Returns the classes or problems."""
    problem = _Problems()
    problems = problem.found

    if value is None:
        return [], []
    if not isinstance(value, list):
        problem("group all", "clusterproof_storage_classes", "a list of storage classes", value)
        return [], problems
    classes: list[StorageClassDeclaration] = []
    seen: set[str] = set()
    defaults: list[str] = []
    for index, entry in enumerate(value):
        where = "clusterproof_storage_classes[%d]" % index
        if not isinstance(entry, Mapping):
            problem(where, "storage class", "a mapping with name and provisioner", entry)
            continue
        name = entry.get("name")
        if isinstance(name, str):
            where = "storage class %s" % name
        for key in sorted(set(entry) - set(CLASS_FIELDS), key=str):
            problem.raw(where, str(key), "one of %s" % ", ".join(CLASS_FIELDS), "an unknown field")
        before = len(problems)
        if not (isinstance(name, str) and _DNS_SUBDOMAIN.match(name) and len(name) <= 253):
            problem(where, "name", "a StorageClass name (lower-case DNS subdomain)", name)
        elif name in seen:
            problem(where, "name", "a name used by one storage class only", name)
        provisioner = entry.get("provisioner")
        if provisioner not in PROVISIONERS:
            problem(where, "provisioner", "one of %s" % ", ".join(PROVISIONERS), provisioner)
            continue
        default = entry.get("default", False)
        if not isinstance(default, bool):
            problem(where, "default", "true or false", default)
        reclaim = entry.get("reclaim_policy", "Delete")
        if reclaim not in RECLAIM_POLICIES:
            problem(where, "reclaim_policy", "one of %s" % ", ".join(RECLAIM_POLICIES), reclaim)
        settings_key = provisioner.replace("-", "_")
        for other in sorted({"local_path", "nfs", "trident"} - {settings_key}):
            if other in entry:
                problem.raw(
                    where,
                    other,
                    "only %s settings for provisioner %s" % (settings_key, provisioner),
                    "settings for another provisioner",
                )
        settings = entry.get(settings_key) or {}
        if not isinstance(settings, Mapping):
            problem(where, settings_key, "a mapping of %s settings" % provisioner, settings)
            continue
        modes = entry.get("access_modes", ["ReadWriteOnce"])
        if not isinstance(modes, list) or not modes or any(mode not in ACCESS_MODES for mode in modes):
            problem(where, "access_modes", "a non-empty list of %s" % ", ".join(ACCESS_MODES), modes)
            modes = []
        elif "ReadWriteMany" in modes and not _rwx_possible(provisioner, settings):
            expected = {
                "local-path": "ReadWriteMany only with local_path.shared_path (a filesystem all nodes share)",
                "trident": "ReadWriteMany only with file drivers (%s)" % ", ".join(TRIDENT_FILE_DRIVERS),
            }[provisioner]
            problem(where, "access_modes", expected, "ReadWriteMany")
        # A per-node directory only exists once the pod's node is known.
        per_node = provisioner == "local-path" and not settings.get("shared_path")
        binding = entry.get("volume_binding_mode", "WaitForFirstConsumer" if per_node else "Immediate")
        if binding not in BINDING_MODES:
            problem(where, "volume_binding_mode", "one of %s" % ", ".join(BINDING_MODES), binding)
        elif per_node and binding != "WaitForFirstConsumer":
            problem(where, "volume_binding_mode", "WaitForFirstConsumer for a per-node local path", binding)
        fields: dict[str, Any] = {}
        if provisioner == "local-path":
            fields = _check_local_path(problem, where, settings)
        elif provisioner == "nfs":
            fields = _check_nfs(problem, where, settings)
        else:
            fields = _check_trident(problem, where, settings, site_vars)
        if len(problems) > before:
            continue
        seen.add(name)
        if default:
            defaults.append(name)
        classes.append(
            StorageClassDeclaration(
                name=name,
                provisioner=provisioner,
                default=default,
                reclaim_policy=reclaim,
                access_modes=list(modes),
                volume_binding_mode=binding,
                **fields,
            )
        )
    if not problems and classes and len(defaults) != 1:
        found = "none" if not defaults else "%d: %s" % (len(defaults), ", ".join(defaults))
        problem.raw("group all", "clusterproof_storage_classes", "exactly one class with default: true", found)
    return (classes, []) if not problems else ([], problems)


def _check_local_path(problem: _Problems, where: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    for key in sorted(set(settings) - set(LOCAL_PATH_FIELDS), key=str):
        problem.raw(where, "local_path.%s" % key, "one of %s" % ", ".join(LOCAL_PATH_FIELDS), "an unknown field")
    if "path" in settings and "shared_path" in settings:
        problem.raw(where, "local_path", "either path or shared_path, not both", "both")
        return {}
    key = "shared_path" if "shared_path" in settings else "path"
    value = settings.get(key, DEFAULT_LOCAL_PATH)
    if not (isinstance(value, str) and value.startswith("/") and value.rstrip("/")):
        problem(where, "local_path.%s" % key, "an absolute directory other than /", value)
        return {}
    return {key: value.rstrip("/")}


def _check_nfs(problem: _Problems, where: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    for key in sorted(set(settings) - set(NFS_FIELDS), key=str):
        problem.raw(where, "nfs.%s" % key, "one of %s" % ", ".join(NFS_FIELDS), "an unknown field")
    server = settings.get("server")
    if not (isinstance(server, str) and _HOST.match(server)):
        problem(where, "nfs.server", "the NFS server's host name or address", server)
    path = settings.get("path")
    if not (isinstance(path, str) and path.startswith("/")):
        problem(where, "nfs.path", "the exported directory (an absolute path)", path)
    options = settings.get("mount_options") or []
    if not isinstance(options, list) or not all(isinstance(option, str) and option for option in options):
        problem(where, "nfs.mount_options", "a list of mount options such as nfsvers=4.1", options)
        options = []
    return {"server": server, "path": path, "mount_options": list(options)}


def _check_trident(
    problem: _Problems, where: str, settings: Mapping[str, Any], site_vars: Mapping[str, Any]
) -> dict[str, Any]:
    for key in sorted(set(settings) - {"backends"}, key=str):
        problem.raw(where, "trident.%s" % key, "only backends", "an unknown field")
    backends = settings.get("backends")
    if not isinstance(backends, list) or not backends:
        problem(where, "trident.backends", "a non-empty list of ONTAP backends", backends)
        return {}
    checked = []
    names: set[str] = set()
    for index, backend in enumerate(backends):
        field = "trident.backends[%d]" % index
        if not isinstance(backend, Mapping):
            problem(where, field, "a mapping with name, storage_driver, management_lif, svm, credentials", backend)
            continue
        for key in sorted(set(backend) - set(TRIDENT_BACKEND_FIELDS), key=str):
            problem.raw(
                where, "%s.%s" % (field, key), "one of %s" % ", ".join(TRIDENT_BACKEND_FIELDS), "an unknown field"
            )
        name = backend.get("name")
        if not (isinstance(name, str) and _DNS_LABEL.match(name)):
            problem(where, field + ".name", "a backend name (a lower-case DNS label)", name)
        elif name in names:
            problem(where, field + ".name", "a backend name used once in the class", name)
        names.add(str(name))
        driver = backend.get("storage_driver")
        if driver not in TRIDENT_DRIVERS:
            problem(where, field + ".storage_driver", "one of %s" % ", ".join(TRIDENT_DRIVERS), driver)
        for key, expected in (
            ("management_lif", "the ONTAP cluster or SVM management address (host name or IP)"),
            ("svm", "the storage VM's name"),
        ):
            value = backend.get(key)
            pattern = _HOST if key == "management_lif" else re.compile(r"^\S+$")
            if not (isinstance(value, str) and pattern.match(value)):
                problem(where, "%s.%s" % (field, key), expected, value)
        data_lif = backend.get("data_lif")
        if data_lif is not None and not (isinstance(data_lif, str) and _HOST.match(data_lif)):
            problem(where, field + ".data_lif", "the data address (host name or IP)", data_lif)
        credentials = backend.get("credentials")
        if not (isinstance(credentials, str) and _VARIABLE.match(credentials)):
            problem(where, field + ".credentials", "the name of a variable holding {username, password}", credentials)
        else:
            held = site_vars.get(credentials)
            if not (
                isinstance(held, Mapping)
                and isinstance(held.get("username"), str)
                and isinstance(held.get("password"), str)
                and held.get("username")
                and held.get("password")
            ):
                # Never show what the variable holds: it is a secret.
                found = "no such variable" if held is None else "a variable without a username and password"
                found = "variable %s: %s" % (credentials, found)
                problem.raw(where, field + ".credentials", "a variable holding {username, password}", found)
        if isinstance(backend, Mapping):
            checked.append(
                TridentBackend(
                    name=str(name),
                    storage_driver=str(driver),
                    management_lif=str(backend.get("management_lif")),
                    svm=str(backend.get("svm")),
                    credentials=str(credentials),
                    data_lif=None if data_lif is None else str(data_lif),
                )
            )
    return {"backends": checked}


def from_dicts(classes: Iterable[Mapping[str, Any]]) -> list[StorageClassDeclaration]:
    """Declarations back from their dict form (``clusterproof_site.storage_classes``)."""
    declared = []
    for data in classes:
        fields = dict(data)
        fields["backends"] = [TridentBackend(**backend) for backend in fields.get("backends") or []]
        fields.pop("offers_rwx", None)
        declared.append(StorageClassDeclaration(**fields))
    return declared


class ClassesArgumentError(ValueError):
    """A storage module's ``classes`` option is not what ``clusterproof_site.storage_classes`` holds."""


def classes_argument(classes: Iterable[Mapping[str, Any]]) -> list[StorageClassDeclaration]:
    """The ``classes`` option every storage module takes, as declarations, or why it is not one."""
    try:
        return from_dicts(classes)
    except TypeError as error:
        raise ClassesArgumentError("classes: expected clusterproof_site.storage_classes, found: %s" % error) from error


def default_class(classes: Iterable[StorageClassDeclaration]) -> StorageClassDeclaration | None:
    return next((cls for cls in classes if cls.default), None)


def rwx_class(classes: Iterable[StorageClassDeclaration]) -> StorageClassDeclaration | None:
    """The class the validator shares between two pods: the default if it offers ReadWriteMany,
    else the first declared that does."""
    classes = list(classes)
    candidates = [cls for cls in classes if cls.default and cls.offers_rwx] + [c for c in classes if c.offers_rwx]
    return candidates[0] if candidates else None


def nfs_release_name(cls: StorageClassDeclaration) -> str:
    """One chart release per NFS class (the export is a setting of the release); Helm release
    names are DNS labels of at most 53 characters."""
    return ("nfs-" + cls.name.replace(".", "-"))[:53].rstrip("-")


def provisioner_name(cls: StorageClassDeclaration) -> str:
    """The ``provisioner`` field of the class's StorageClass."""
    if cls.provisioner == "local-path":
        return LOCAL_PATH_PROVISIONER
    if cls.provisioner == "trident":
        return TRIDENT_PROVISIONER
    # Each NFS release provisions under its own name, so its classes reach that export only.
    return "clusterproof.io/" + nfs_release_name(cls)


def storage_class_manifest(cls: StorageClassDeclaration) -> dict[str, Any]:
    """The StorageClass object; the default annotation is set on every class (true or false), so
    that a class that stops being the default loses it."""
    parameters: dict[str, str] = {}
    if cls.provisioner == "nfs":
        # A released volume's directory is removed (Delete) or kept as archived-<name> (Retain).
        parameters["archiveOnDelete"] = "true" if cls.reclaim_policy == "Retain" else "false"
    elif cls.provisioner == "trident":
        drivers = sorted({backend.storage_driver for backend in cls.backends})
        if len(drivers) == 1:
            parameters["backendType"] = drivers[0]
        # Only this class's backends serve it, whatever other backends Trident knows.
        parameters["storagePools"] = ";".join("%s:.*" % backend.name for backend in cls.backends)
    manifest: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": cls.name,
            "labels": {MANAGED_BY_LABEL: "clusterproof"},
            "annotations": {DEFAULT_CLASS_ANNOTATION: "true" if cls.default else "false"},
        },
        "provisioner": provisioner_name(cls),
        "reclaimPolicy": cls.reclaim_policy,
        "volumeBindingMode": cls.volume_binding_mode,
        "allowVolumeExpansion": cls.provisioner != "local-path",
    }
    if parameters:
        manifest["parameters"] = parameters
    if cls.mount_options:
        manifest["mountOptions"] = list(cls.mount_options)
    return manifest


def local_path_class_config(cls: StorageClassDeclaration) -> dict[str, Any]:
    if cls.shared_path:
        return {"sharedFileSystemPath": cls.shared_path}
    return {"nodePathMap": [{"node": LOCAL_PATH_ANY_NODE, "paths": [cls.path or DEFAULT_LOCAL_PATH]}]}


def local_path_config(classes: Iterable[StorageClassDeclaration]) -> dict[str, Any]:
    """local-path-provisioner's config.json: one entry per local-path class."""
    return {
        "storageClassConfigs": {
            cls.name: local_path_class_config(cls) for cls in classes if cls.provisioner == "local-path"
        }
    }


def local_path_helper_pod(image: str, sandbox: bool) -> dict[str, Any]:
    """The template of the pods local-path runs to make and remove a volume's directory.

    On the sandbox no container runs: KWOK completes the pod when it sees the annotation, which is
    what the provisioner waits for. On a cluster the template is the chart's (priority class,
    disk-pressure toleration) plus a node affinity that keeps the pod off simulated nodes: the
    provisioner gives a shared volume's helper pod no node and a toleration of every taint, so it
    could land on a KWOK node, where nothing runs and the volume is never made or removed."""
    metadata: dict[str, Any] = {"name": "helper-pod"}
    spec: dict[str, Any] = {}
    if sandbox:
        metadata["annotations"] = {COMPLETE_AFTER_ANNOTATION: "1s"}
    else:
        real_nodes = {"matchExpressions": [{"key": SIMULATED_NODE_LABEL, "operator": "DoesNotExist"}]}
        required = {"nodeSelectorTerms": [real_nodes]}
        spec = {
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
        }
    spec["containers"] = [{"name": "helper-pod", "image": image, "imagePullPolicy": "IfNotPresent"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


# local-path names its helper pods so (provisioner.go createHelperPod, HelperPodNameMaxLength).
LOCAL_PATH_HELPER_POD_NAME_MAX = 128


def local_path_helper_pod_name(action: str, volume: str) -> str:
    """The name local-path gives the helper pod that does ``action`` ("create", "delete") for
    ``volume``: found by it, a helper pod stuck on a node that went away can be removed."""
    return ("helper-pod-%s-%s" % (action, volume))[:LOCAL_PATH_HELPER_POD_NAME_MAX]


def local_path_chart_values(classes: Iterable[StorageClassDeclaration], helper_image: str) -> dict[str, Any]:
    """Values for local-path-provisioner's chart (deploy/chart in its Go module): its classes'
    paths, and no StorageClass of the chart's own (clusterproof makes them)."""
    repository, _, tag = helper_image.rpartition(":")
    if not repository or "/" in tag:
        repository, tag = helper_image, "latest"
    return {
        # The provisioner answers to the name the StorageClasses give (the chart would make one up).
        "storageClass": {"create": False, "provisionerName": LOCAL_PATH_PROVISIONER},
        "nodePathMap": [],
        "storageClassConfigs": {
            cls.name: {"storageClass": {"create": False}, **local_path_class_config(cls)}
            for cls in classes
            if cls.provisioner == "local-path"
        },
        "helperImage": {"repository": repository, "tag": tag},
    }


def nfs_chart_values(cls: StorageClassDeclaration) -> dict[str, Any]:
    """Values for nfs-subdir-external-provisioner's chart (charts/ in its Go module), one release
    per NFS class."""
    nfs: dict[str, Any] = {"server": cls.server, "path": cls.path}
    if cls.mount_options:
        nfs["mountOptions"] = list(cls.mount_options)
    return {
        "nfs": nfs,
        "storageClass": {"create": False, "provisionerName": provisioner_name(cls)},
    }


def trident_chart_values() -> dict[str, Any]:
    """Values for Trident's operator chart (helm/trident-operator in its Go module)."""
    return {"tridentSilenceAutosupport": True}


def trident_secret_name(backend: TridentBackend) -> str:
    return "clusterproof-backend-%s" % backend.name


def trident_backend_objects(
    cls: StorageClassDeclaration, credentials: Mapping[str, Mapping[str, str]], namespace: str = TRIDENT_NAMESPACE
) -> list[dict[str, Any]]:
    """A Secret (the credentials) and a TridentBackendConfig per backend of a Trident class.
    ``credentials`` maps each credential variable's name to its {username, password}."""
    objects: list[dict[str, Any]] = []
    for backend in cls.backends:
        held = credentials.get(backend.credentials)
        if not held or not held.get("username") or not held.get("password"):
            raise ValueError(
                "backend %s of storage class %s: credentials variable %s has no username and password"
                % (backend.name, cls.name, backend.credentials)
            )
        secret = trident_secret_name(backend)
        # data, not stringData: the API server keeps only data, and comparing like with like
        # keeps a second run unchanged.
        data = {key: base64.b64encode(held[key].encode()).decode() for key in ("username", "password")}
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret, "namespace": namespace, "labels": {MANAGED_BY_LABEL: "clusterproof"}},
                "type": "Opaque",
                "data": data,
            }
        )
        spec: dict[str, Any] = {
            "version": 1,
            "backendName": backend.name,
            "storageDriverName": backend.storage_driver,
            "managementLIF": backend.management_lif,
            "svm": backend.svm,
            "credentials": {"name": secret},
        }
        if backend.data_lif:
            spec["dataLIF"] = backend.data_lif
        objects.append(
            {
                "apiVersion": "trident.netapp.io/v1",
                "kind": "TridentBackendConfig",
                "metadata": {
                    "name": "clusterproof-%s" % backend.name,
                    "namespace": namespace,
                    "labels": {MANAGED_BY_LABEL: "clusterproof"},
                },
                "spec": spec,
            }
        )
    return objects


# The charts, pinned (module_utils/versions.py says which release each pseudo-version is). local-path's
# is the version the sandbox runs. Where the module proxy does not serve them, the role takes a chart
# reference instead (storage_classes_charts).
CHART_SOURCES = {
    "local-path": ChartSource(
        versions.LOCAL_PATH_PROVISIONER.source,
        versions.LOCAL_PATH_PROVISIONER.version,
        "deploy/chart/local-path-provisioner",
    ),
    "nfs": ChartSource(
        versions.NFS_SUBDIR_EXTERNAL_PROVISIONER.source,
        versions.NFS_SUBDIR_EXTERNAL_PROVISIONER.version,
        versions.NFS_SUBDIR_EXTERNAL_PROVISIONER.path,
    ),
    "trident": ChartSource(versions.TRIDENT.source, versions.TRIDENT.version, versions.TRIDENT.path),
}


def releases(
    classes: Iterable[StorageClassDeclaration],
    helper_image: str,
    namespaces: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The chart releases a real cluster needs for the declared classes: one local-path release
    for all local-path classes, one nfs release per NFS class, one Trident operator."""
    classes = list(classes)
    spaces = {"local-path": LOCAL_PATH_NAMESPACE, "nfs": NFS_NAMESPACE, "trident": TRIDENT_NAMESPACE}
    spaces.update(namespaces or {})
    found: list[dict[str, Any]] = []
    if any(cls.provisioner == "local-path" for cls in classes):
        found.append(
            {
                "provisioner": "local-path",
                "name": "local-path-provisioner",
                "namespace": spaces["local-path"],
                "values": local_path_chart_values(classes, helper_image),
                # The chart has no value for it: the role writes it into the chart's ConfigMap.
                "helper_pod": local_path_helper_pod(helper_image, sandbox=False),
            }
        )
    for cls in classes:
        if cls.provisioner == "nfs":
            found.append(
                {
                    "provisioner": "nfs",
                    "name": nfs_release_name(cls),
                    "namespace": spaces["nfs"],
                    "values": nfs_chart_values(cls),
                }
            )
    if any(cls.provisioner == "trident" for cls in classes):
        found.append(
            {
                "provisioner": "trident",
                "name": "trident-operator",
                "namespace": spaces["trident"],
                "values": trident_chart_values(),
            }
        )
    return found


def credential_variables(classes: Iterable[StorageClassDeclaration]) -> list[str]:
    """The names of the variables the Trident backends take their credentials from."""
    return sorted({backend.credentials for cls in classes for backend in cls.backends})


# ---------------------------------------------------------------------------------------------
# The validator's probe objects


# The storage probe's namespaces carry this label: a run finds what an earlier one left by it.
PROBE_LABEL = "clusterproof.io/probe"
PROBE_LABEL_VALUE = "storage"


def probe_namespace(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: "clusterproof", PROBE_LABEL: PROBE_LABEL_VALUE}},
    }


def probe_claim(namespace: str, name: str, storage_class: str, access_mode: str, size: str = "1Mi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "storageClassName": storage_class,
            "accessModes": [access_mode],
            "resources": {"requests": {"storage": size}},
        },
    }


# What a probe pod writes to its claim (its own name, one line per pod) and the reader prints.
PROBE_FILE = "/data/probe"


def probe_node_affinity(real_nodes_only: bool, nodes: Sequence[str] = ()) -> dict[str, Any] | None:
    """A validator probe pod's required node affinity: off simulated nodes (``real_nodes_only``)
    and on ``nodes`` (the ones Ready when the run started) when given; None when neither."""
    expressions: list[dict[str, Any]] = []
    if real_nodes_only:
        expressions.append({"key": SIMULATED_NODE_LABEL, "operator": "DoesNotExist"})
    if nodes:
        expressions.append({"key": "kubernetes.io/hostname", "operator": "In", "values": sorted(nodes)})
    if not expressions:
        return None
    term = {"matchExpressions": expressions}
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}


def probe_pod(
    namespace: str,
    name: str,
    claim: str,
    image: str,
    group: str,
    real_nodes_only: bool = False,
    reader: bool = False,
    nodes: Sequence[str] = (),
) -> dict[str, Any]:
    """A pod that mounts ``claim`` and writes to it (a ``reader`` prints what the claim holds and
    ends). Pods of one ``group`` prefer different nodes, so that a shared claim is shown shared
    across nodes where there are several; ``real_nodes_only`` keeps them off simulated nodes, and
    ``nodes`` (when given) keeps them to those nodes: the ones Ready when the run started (the probe
    tolerates every taint, NotReady's too, to reach tainted GPU nodes)."""
    affinity: dict[str, Any] = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"clusterproof.io/probe-group": group}},
                    },
                }
            ]
        }
    }
    required = probe_node_affinity(real_nodes_only, nodes)
    if required is not None:
        affinity["nodeAffinity"] = required
    script = "cat %s" % PROBE_FILE if reader else 'echo "$(hostname)" >> %s && sleep 3600' % PROBE_FILE
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"clusterproof.io/probe-group": group}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            # The probe must land on whatever nodes the cluster has, GPU nodes with taints included.
            "tolerations": [{"operator": "Exists"}],
            "affinity": affinity,
            "containers": [
                {
                    "name": "probe",
                    "image": image,
                    "command": ["sh", "-c", script],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }


def local_path_config_text(classes: Iterable[StorageClassDeclaration]) -> str:
    return json.dumps(local_path_config(classes), indent=2, sort_keys=True) + "\n"
