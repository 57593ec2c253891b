"""The one Kubernetes client layer, and the runner every cluster module goes through.

``client``: authentication, API clients, server-side apply (``Applier``), waiting for CRDs.
``runner``: the shared ``kube_auth`` argument spec, ``run_module`` and ``fail_from_exception``,
the one place that turns API and client errors into a module's failure message.

May import: the ``kubernetes`` client library (lazily, with a clear error when it is missing) and
Ansible's module API in ``runner``. Touches: the cluster named by the kubeconfig. Nothing under
``model/``, ``tenancy/``, ``validate/`` or ``report/`` imports this package: those stay pure
(``validate/scenario_runner.py`` excepted: it runs scenarios on the cluster).
"""
