"""The one Kubernetes client layer of the collection.

Every module that talks to a cluster gets its client here, so that authentication, timeouts and
the error a missing client library gives are the same everywhere. Pure logic never imports this.
The only file of the collection that imports the ``kubernetes`` library (and ``urllib3``, its
transport): what else needs of it (a quantity parsed, a watch, the errors of a server that is
away) is a function or a name here.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.objects import is_subset
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube.base import AUTH_ARG_SPEC, KubeError

__all__ = ["AUTH_ARG_SPEC", "KubeError", "is_subset"]  # re-exported: modules name them through the client layer

KUBERNETES_IMPORT_ERROR: str | None
try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client.rest import ApiException
    from urllib3.exceptions import HTTPError as TransportError

    KUBERNETES_IMPORT_ERROR = None
except ImportError as error:  # the module reports this through fail_json
    k8s_client = None  # type: ignore[assignment]
    k8s_config = None  # type: ignore[assignment]
    ApiException = Exception  # type: ignore[assignment,misc]
    TransportError = OSError  # type: ignore[assignment,misc]
    KUBERNETES_IMPORT_ERROR = str(error)

# What an API server that is away (restarted, starting, stopping) looks like to a client that waits
# it out: refused or reset connections and timeouts (urllib3's errors, the socket's), and the errors
# it answers with meanwhile.
SERVER_AWAY_ERRORS: tuple[type[BaseException], ...] = (TransportError, OSError, ApiException)


def api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """An ApiClient for the kubeconfig given (or $KUBECONFIG, or ~/.kube/config)."""
    if KUBERNETES_IMPORT_ERROR is not None:
        raise KubeError(f"the Python 'kubernetes' package is needed on the controller: {KUBERNETES_IMPORT_ERROR}")
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    if not os.path.exists(path):
        raise KubeError(f"kubeconfig {path} does not exist")
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
    api = k8s_client.ApiClient(configuration)
    _bound_requests(api.rest_client)
    return api


# Seconds to connect, and to wait for the next bytes of an answer, on a request that sets no
# timeout of its own. The API server ends a request it cannot answer after 60 s
# (--request-timeout), so a call silent for longer is one whose connection is lost; without a
# bound it would block its module for good (urllib3 waits without limit by default).
DEFAULT_REQUEST_TIMEOUT = (10, 90)


def _bound_requests(rest_client: Any) -> None:
    """Give every request of ``rest_client`` DEFAULT_REQUEST_TIMEOUT unless it sets its own. The
    REST client's ``request`` is the one method every call passes through, in the generated clients
    of old (Debian 12's python3-kubernetes) and new (PyPI's) alike."""
    unbounded = rest_client.request

    def request(*args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        return unbounded(*args, _request_timeout=_request_timeout or DEFAULT_REQUEST_TIMEOUT, **kwargs)

    rest_client.request = request


def core_v1(api: Any) -> Any:
    return k8s_client.CoreV1Api(api)


def batch_v1(api: Any) -> Any:
    return k8s_client.BatchV1Api(api)


def apps_v1(api: Any) -> Any:
    return k8s_client.AppsV1Api(api)


def parse_quantity(raw: Any) -> Any:
    """A Kubernetes quantity (``"80"``, ``"80000m"``, ``"512Gi"``) as a Decimal, as the client
    library parses it; ValueError (or TypeError) when it is not one."""
    from kubernetes.utils import parse_quantity as parse

    return parse(raw)


def wait_for_change(list_call: Any, namespace: str, resource_version: str, timeout_s: int) -> None:
    """Return once an object that ``list_call`` (a namespaced list method of a typed API) lists in
    ``namespace`` changes after ``resource_version``, or after ``timeout_s`` seconds (the server ends
    the watch); at once when that version has expired (410: list again)."""
    from kubernetes import watch

    stream = watch.Watch()
    try:
        for _event in stream.stream(list_call, namespace, resource_version=resource_version, timeout_seconds=timeout_s):
            stream.stop()
    except ApiException as error:
        if error.status != 410:  # an expired resource version only means: list again
            raise


def api_error_message(error: Any) -> str:
    """An API error in a line: its status and reason, and the API server's own message."""
    try:
        message = json.loads(error.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return "%s %s%s" % (error.status, error.reason, ": %s" % message if message else "")


def service_proxy(api: Any, namespace: str, service: str, port: int) -> tuple[str, Any]:
    """An HTTP service in the cluster, reached through the API server's proxy with the client's own
    credentials (nothing exposed, no port forwarded): its address as the API server serves it, and
    ``fetch(path, params, timeout)`` that GETs ``path`` (with ``params`` as the query) from the
    service and returns the body. Any failure, the API server's or the service's, is a KubeError
    naming the request."""
    base = "/api/v1/namespaces/%s/services/%s:%d/proxy" % (namespace, service, port)

    def fetch(path: str, params: dict[str, str], timeout: float) -> bytes:
        doing = "GET %s%s" % (base, path)
        try:
            response = api.call_api(
                base + path,
                "GET",
                query_params=list(params.items()),
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=timeout,
            )
        except ApiException as error:
            body = error.body.decode(errors="replace") if isinstance(error.body, bytes) else error.body
            raise KubeError("%s: HTTP %s %s" % (doing, error.status, (body or error.reason or "")[:300])) from error
        except (TransportError, OSError) as error:
            raise KubeError("%s: %s" % (doing, error)) from error
        return response.data

    return api.configuration.host.rstrip("/") + base, fetch


def kubelet_configuration(api: Any, node: str, timeout: float = 10) -> dict[str, Any]:
    """The configuration ``node``'s kubelet runs, defaults applied (its ``/configz``, through the
    API server's node proxy: the caller needs ``nodes/proxy``). A KubeError names the request when
    it cannot be read."""
    path = "/api/v1/nodes/%s/proxy/configz" % node
    try:
        response = api.call_api(
            path,
            "GET",
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=timeout,
        )
        config = json.loads(response.data)["kubeletconfig"]
    except ApiException as error:
        raise KubeError("GET %s: %s" % (path, api_error_message(error))) from error
    except (TransportError, OSError) as error:
        raise KubeError("GET %s: %s" % (path, error)) from error
    except (ValueError, KeyError, TypeError) as error:
        raise KubeError("GET %s: not a kubelet's configuration (%s)" % (path, error)) from error
    if not isinstance(config, dict):
        raise KubeError("GET %s: not a kubelet's configuration (%s)" % (path, type(config).__name__))
    return config


def wait_for_default_service_account(api: Any, namespace: str, timeout_s: float = 60) -> None:
    """Return once ``namespace`` has its ``default`` ServiceAccount. The controller-manager makes it
    a moment after the namespace; until then the API server refuses every pod there (403, "error
    looking up service account"), and a controller creating them records a FailedCreate."""
    core = core_v1(api)

    def exists() -> bool:
        try:
            core.read_namespaced_service_account("default", namespace)
            return True
        except ApiException as error:
            if error.status != 404:
                doing = f"reading the default ServiceAccount of namespace {namespace}"
                raise KubeError(f"{doing} failed: {api_error_message(error)}") from error
        return False

    if wait_until(exists, timeout=timeout_s, interval=0.2).timed_out:
        raise KubeError(
            f"namespace {namespace} has no default ServiceAccount after {timeout_s:.0f} s: the "
            "kube-controller-manager (its serviceaccount controller) makes it; look at its pod or log"
        )


# The kinds a tenant's attempt may be sent as (``create_as``), with how the typed client makes them.
_CREATORS = {
    "Pod": lambda api: k8s_client.CoreV1Api(api).create_namespaced_pod,
    "Job": lambda api: k8s_client.BatchV1Api(api).create_namespaced_job,
    "Deployment": lambda api: k8s_client.AppsV1Api(api).create_namespaced_deployment,
    "Service": lambda api: k8s_client.CoreV1Api(api).create_namespaced_service,
    "ConfigMap": lambda api: k8s_client.CoreV1Api(api).create_namespaced_config_map,
    "PersistentVolumeClaim": lambda api: k8s_client.CoreV1Api(api).create_namespaced_persistent_volume_claim,
}

# The kinds ``create_as`` sends.
CREATABLE_AS = tuple(_CREATORS)


def _impersonated(api: Any, user: str, groups: tuple[str, ...]) -> Any:
    """A client on ``api``'s configuration that acts as ``user`` in ``groups`` (the caller's
    credentials must allow impersonation), its requests bounded as every client's are."""
    impersonated = k8s_client.ApiClient(api.configuration)
    impersonated.set_default_header("Impersonate-User", user)
    # The generated client keeps one value per header: one group is impersonated at most.
    for group in groups[:1]:
        impersonated.set_default_header("Impersonate-Group", group)
    _bound_requests(impersonated.rest_client)
    return impersonated


def create_as(
    api: Any, user: str, groups: tuple[str, ...], manifest: dict[str, Any]
) -> tuple[bool, int | None, str, dict[str, Any] | None]:
    """Send ``manifest`` (one of ``_CREATORS``' kinds) as ``user`` in ``groups`` (impersonated; the
    caller's credentials must allow it), as a server-side dry run: authorization and every admission
    step run, nothing is created. Returns (admitted, status, message, the object as admitted): a
    refusal (any 4xx: forbidden, invalid, not found) is an answer, a server error raises. A
    SubjectAccessReview is asked for ``user`` instead (``review_access``)."""
    if manifest["kind"] == "SubjectAccessReview":
        return review_access(api, user, groups, manifest)
    if manifest["kind"] not in _CREATORS:
        raise KubeError("create_as sends %s only, not %s" % (", ".join(_CREATORS), manifest["kind"]))
    creator, namespace = _CREATORS[manifest["kind"]], manifest["metadata"]["namespace"]
    return _dry_run_as(api, user, groups, lambda client: creator(client)(namespace, manifest, dry_run="All"))


def _dry_run_as(
    api: Any, user: str, groups: tuple[str, ...], send: Any
) -> tuple[bool, int | None, str, dict[str, Any] | None]:
    """``send(client)`` with a client impersonating ``user``: (True, None, "", the object as
    admitted), or a refusal (any 4xx) as (False, status, the API server's message, None); a server
    error raises."""
    impersonated = _impersonated(api, user, groups)
    try:
        return True, None, "", impersonated.sanitize_for_serialization(send(impersonated))
    except ApiException as error:
        if error.status is None or not 400 <= error.status < 500:
            raise
        return False, error.status, _refusal(error), None
    finally:
        impersonated.close()


def resume_as(
    api: Any, user: str, groups: tuple[str, ...], job: dict[str, Any]
) -> tuple[bool, int | None, str, dict[str, Any] | None]:
    """Make ``job`` (suspended) with the caller's credentials, then ask, as ``user`` in ``groups``
    and as a server-side dry run, to resume it (``spec.suspend: false``); the Job is deleted after.
    Returns what ``create_as`` returns, for the patch."""
    batch = k8s_client.BatchV1Api(api)
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    try:
        batch.create_namespaced_job(namespace, job)
    except ApiException as error:
        if error.status != 409:
            raise
    try:
        return _dry_run_as(
            api,
            user,
            groups,
            lambda client: k8s_client.BatchV1Api(client).patch_namespaced_job(
                name, namespace, {"spec": {"suspend": False}}, dry_run="All"
            ),
        )
    finally:
        try:
            batch.delete_namespaced_job(name, namespace, propagation_policy="Background")
        except ApiException as error:
            if error.status != 404:
                raise


def _refusal(error: Any) -> str:
    """The API server's message in a refusal (4xx), or its reason."""
    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)
    except ValueError:
        return str(error.reason)


def review_access(api: Any, user: str, groups: tuple[str, ...], review: dict[str, Any]) -> tuple[bool, int | None, str]:
    """Whether ``user`` in ``groups`` may do what ``review`` (a SubjectAccessReview) asks, as
    (allowed, status, message) like ``create_as``: the API server's authorizers answer, nothing is
    done. Denied, the message says "RBAC does not allow" with the request and the authorizer's reason."""
    body = {**review, "spec": {**review["spec"], "user": user, "groups": list(groups)}}
    body.pop("metadata", None)
    answer = k8s_client.AuthorizationV1Api(api).create_subject_access_review(body)
    attributes = review["spec"]["resourceAttributes"]
    asked = "%s %s%s%s" % (
        attributes["verb"],
        attributes["resource"],
        "/" + attributes["subresource"] if attributes.get("subresource") else "",
        " (%s)" % attributes["group"] if attributes.get("group") else "",
    )
    if answer.status.allowed:
        return True, None, "", None
    reason = answer.status.reason or answer.status.evaluation_error or "no rule allows it"
    return (
        False,
        403,
        "RBAC does not allow %s to %s in %s: %s" % (user, asked, review["metadata"]["namespace"], reason),
        None,
    )


def list_nodes(api: Any, request_timeout: int = 30) -> list[dict[str, Any]]:
    """Every Node as a plain dict (the API's JSON field names), paging through large clusters."""
    core = core_v1(api)
    return _list_pages(lambda **page: core.list_node(**page), "listing nodes", request_timeout)


def list_pods(api: Any, namespace: str, request_timeout: int = 30) -> list[dict[str, Any]]:
    """Every pod of ``namespace`` as a plain dict (the API's JSON field names), paging."""
    core = core_v1(api)
    return _list_pages(
        lambda **page: core.list_namespaced_pod(namespace, **page), "listing pods in %s" % namespace, request_timeout
    )


def list_resource_slices(api: Any, driver: str, request_timeout: int = 30) -> list[dict[str, Any]] | None:
    """Every ResourceSlice (``resource.k8s.io/v1``) of the DRA ``driver`` as a plain dict, paging
    through large clusters; None when the cluster does not serve that API (a 404: Kubernetes before
    1.34, or dynamic resource allocation turned off), which means no GPU is allocated through DRA."""

    selector = f"spec.driver={driver}"
    resource_api = getattr(k8s_client, "ResourceV1Api", None)  # None on a client without the class
    if resource_api is not None:
        resource = resource_api(api)

        def list_page(**page: Any) -> Any:
            return resource.list_resource_slice(field_selector=selector, **page)

    else:
        # The client Debian 12 packages (python3-kubernetes 22, on a site's control-plane host)
        # predates that API group's class: the same GET by path, through its call_api.
        def list_page(limit: int, _continue: str | None, **options: Any) -> Any:
            query = [("fieldSelector", selector), ("limit", limit)]
            if _continue:
                query.append(("continue", _continue))
            return api.call_api(
                "/apis/resource.k8s.io/v1/resourceslices",
                "GET",
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                **options,
            )

    try:
        return _list_pages(list_page, f"listing the ResourceSlices of {driver}", request_timeout)
    except KubeError as error:
        if getattr(error.__cause__, "status", None) == 404:
            return None
        raise


def _list_pages(list_page: Any, doing: str, request_timeout: int) -> list[dict[str, Any]]:
    """The items of a list call, 500 a page, as the API's JSON. Read raw (``_preload_content``
    off): building the client's model objects and serialising them back costs seconds per
    10,000 Nodes, for the same dicts."""
    items: list[dict[str, Any]] = []
    token = None
    while True:
        try:
            response = list_page(limit=500, _continue=token, _request_timeout=request_timeout, _preload_content=False)
        except ApiException as error:
            raise KubeError(f"{doing} failed: {error}") from error
        page = json.loads(response.data)
        items.extend(page.get("items") or ())
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items


@functools.cache
def _discovery_dir() -> str:
    path = tempfile.mkdtemp(prefix="clusterproof-discovery-")
    atexit.register(shutil.rmtree, path, True)
    return path


def discovery_cache_file(host: str) -> str:
    """Where this process keeps what it discovered of the API server at ``host``: a directory of its
    own, removed when it exits. The dynamic client's default is one file per server URL in the
    shared temporary directory, read by every later process that reaches the same
    ``https://127.0.0.1:PORT``: a test sandbox on a port an earlier sandbox had would be told the
    kinds that one served."""
    return os.path.join(_discovery_dir(), hashlib.sha256(host.encode()).hexdigest()[:16] + ".json")


class Applier:
    """Makes objects exist as given, with server-side apply, changing only what differs.

    ``apply`` returns (changed, before, after) where before/after are the object as it was and
    as it is (or would be, in check mode) for --diff.
    """

    def __init__(self, api: Any, check_mode: bool = False, field_manager: str = "clusterproof") -> None:
        from kubernetes.dynamic import DynamicClient

        self.api = api
        self.check_mode = check_mode
        self.field_manager = field_manager
        self.dynamic = DynamicClient(api, cache_file=discovery_cache_file(api.configuration.host))

    def _resource(self, manifest: dict[str, Any]) -> Any:
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        api_version, kind = manifest["apiVersion"], manifest["kind"]
        try:
            return self.dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError as error:
            # The client raises it bare (no message), which would end a module as "Module failed.".
            raise KubeError(
                f"the API server serves no {kind} in {api_version}: is its CustomResourceDefinition installed?"
            ) from error

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether the API server serves ``kind`` in ``api_version`` (a CRD's kind once established).
        Asked afresh: the client keeps what it discovered in a file per server, which still lists the
        kind of a CRD removed since."""
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        self.dynamic.resources.invalidate_cache()
        try:
            self.dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            return False
        return True

    def list_labelled(self, api_version: str, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        """The objects of ``kind`` in ``namespace`` that ``selector`` (a label selector) selects."""
        found = self.dynamic.resources.get(api_version=api_version, kind=kind).get(
            namespace=namespace, label_selector=selector
        )
        return [item.to_dict() for item in found.items]

    def get(self, manifest: dict[str, Any]) -> dict[str, Any] | None:
        from kubernetes.dynamic.exceptions import NotFoundError

        metadata = manifest["metadata"]
        try:
            found = self._resource(manifest).get(name=metadata["name"], namespace=metadata.get("namespace"))
        except NotFoundError:
            return None
        return found.to_dict()

    def apply(self, manifest: dict[str, Any]) -> tuple[bool, dict[str, Any] | None, dict[str, Any]]:
        existing = self.get(manifest)
        if existing is not None and is_subset(manifest, existing):
            return False, existing, existing
        if self.check_mode:
            return True, existing, manifest
        metadata = manifest["metadata"]
        applied = self._resource(manifest).server_side_apply(
            # As text: the client Debian 12 packages (python3-kubernetes 22, on a site's control-plane
            # host) sends a body under apply-patch+yaml only as text, and JSON is YAML.
            body=json.dumps(manifest),
            name=metadata["name"],
            namespace=metadata.get("namespace"),
            field_manager=self.field_manager,
            force_conflicts=True,
        )
        return True, existing, applied.to_dict()

    def delete(self, manifest: dict[str, Any]) -> bool:
        existing = self.get(manifest)
        if existing is None:
            return False
        if not self.check_mode:
            metadata = manifest["metadata"]
            self._resource(manifest).delete(name=metadata["name"], namespace=metadata.get("namespace"))
        return True

    def wait_established(self, names: Iterable[str], timeout: float) -> None:
        """Wait until each CustomResourceDefinition named is Established (its API is served)."""
        deadline = time.monotonic() + timeout

        def established(name: str) -> bool:
            crd = self.get(
                {
                    "apiVersion": "apiextensions.k8s.io/v1",
                    "kind": "CustomResourceDefinition",
                    "metadata": {"name": name},
                }
            )
            conditions = ((crd or {}).get("status") or {}).get("conditions") or []
            return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

        for name in names:
            # One deadline for them all: each name waits for what is left of it.
            left = deadline - time.monotonic()
            if wait_until(lambda name=name: established(name), timeout=left, interval=0.2).timed_out:
                raise KubeError("CRD %s was not established within %d s" % (name, timeout))

    def refresh_discovery(self) -> None:
        """Forget the API's resource list, after CRDs were added."""
        self.dynamic.resources.invalidate_cache()

    def wait_served(self, kinds: Iterable[tuple[str, str]], timeout: float) -> None:
        """Wait until the API server's discovery lists each (apiVersion, kind): a CRD is Established
        a moment before its group version is served (it answers 404 until then), and an object of
        it applied in between fails."""
        deadline = time.monotonic() + timeout
        for api_version, kind in kinds:
            left = deadline - time.monotonic()
            served = wait_until(lambda a=api_version, k=kind: self.serves(a, k), timeout=left, interval=0.2)
            if served.timed_out:
                raise KubeError(f"the API server did not serve {kind} in {api_version} within {timeout:.0f} s")


def served_kinds(crds: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """The (apiVersion, kind) of each version the CustomResourceDefinitions serve."""
    return [
        (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
        for crd in crds
        for version in crd["spec"].get("versions") or ()
        if version.get("served", True)
    ]


def name_of(manifest: dict[str, Any]) -> str:
    """How modules name an object they report: kind/name."""
    return "%s/%s" % (manifest["kind"], manifest["metadata"]["name"])


class Changes:
    """Objects made to exist through an :class:`Applier`, with what changed recorded (``applied``,
    as kind/name) the way every module reports it."""

    def __init__(self, applier: Any, check_mode: bool | None = None) -> None:
        # Without an applier (a step that only stops processes), check mode is said outright.
        self.applier = applier
        self.check_mode = bool(applier.check_mode if check_mode is None else check_mode)
        self.applied: list[str] = []

    @classmethod
    def connect(cls, kubeconfig: str | None, context: str | None = None, check_mode: bool = False) -> Changes:
        return cls(Applier(api_client(kubeconfig, context), check_mode=check_mode))

    @property
    def changed(self) -> bool:
        return bool(self.applied)

    def apply(self, wanted: Iterable[dict[str, Any]]) -> None:
        for manifest in wanted:
            if self.applier.apply(manifest)[0]:
                self.applied.append(name_of(manifest))

    def apply_crds(self, crds: list[dict[str, Any]], others: Iterable[dict[str, Any]], timeout: float) -> None:
        """Apply CRDs with objects that need none of them, and wait until the CRDs are served."""
        self.apply(crds + list(others))
        if not self.check_mode:
            self.applier.wait_established([crd["metadata"]["name"] for crd in crds], timeout)
            self.applier.wait_served(served_kinds(crds), timeout)

    def apply_custom(self, wanted: Iterable[dict[str, Any]]) -> None:
        """Apply objects of the CRDs just applied. In check mode, where CRDs would be applied the
        server cannot compare their objects yet: they are reported as to be applied."""
        if self.check_mode and self.applied:
            self.applied += [name_of(manifest) for manifest in wanted]
        else:
            self.apply(wanted)

    def delete(self, wanted: Iterable[dict[str, Any]]) -> None:
        for manifest in wanted:
            if self.applier.delete(manifest):
                self.applied.append("deleted %s" % name_of(manifest))
