"""What every cluster-facing piece shares without the client library: the auth options and errors.

``runner`` (which every module goes through, also those that run on GPU hosts) needs to know how
a cluster is named and how its failures look, but not the ``kubernetes`` library itself: from
here, a host-side module's payload carries neither the client layer nor an import of the library.

May import: the standard library. Touches nothing.
"""

from __future__ import annotations

from typing import Any

# Shared module arguments for anything that reaches a cluster (the kube_auth doc fragment).
AUTH_ARG_SPEC: dict[str, dict[str, Any]] = {
    "kubeconfig": {"type": "path", "required": False},
    "context": {"type": "str", "required": False},
    "request_timeout": {"type": "int", "default": 30},
}


class KubeError(RuntimeError):
    """A cluster could not be reached or answered with an error; the message says which."""


def is_api_error(error: BaseException) -> bool:
    """Whether ``error`` is the client library's ApiException: the API server answered with an
    HTTP error (the dynamic client's errors, NotFoundError and the like, are ApiExceptions too).
    Known by its class's name, so that no caller needs the library to ask."""
    return any(cls.__name__ == "ApiException" for cls in type(error).__mro__) and hasattr(error, "status")


def unreachable_message(error: BaseException) -> str | None:
    """For the client's "could not connect" error (urllib3's MaxRetryError: the connection refused,
    reset or timed out), a line naming the API server's address and the socket's error; None for
    any other error. Known by its attributes, so that no caller needs the library to ask."""
    pool, reason = getattr(error, "pool", None), getattr(error, "reason", None)
    if pool is None or reason is None or not hasattr(pool, "host"):
        return None
    said = str(reason).rsplit(": ", 1)[-1]
    if said.endswith(("')", '")')):  # the end of the reason's repr, as in NewConnectionError('...refused')
        said = said[:-2]
    return "the API server at %s:%s cannot be reached: %s" % (pool.host, pool.port, said)
