"""The one Kubernetes client layer, and the runner every module goes through.

``base``: the auth options, ``KubeError`` and what an API error is, without the client library;
``client``: authentication, API clients, server-side apply (``Applier``), what a module applied
(``Changes``), waiting for CRDs; ``runner``: argument specs from shared pieces, ``run_module`` and
``fail_from_exception``, the one place that turns API and client errors into a module's failure
message (it imports ``base`` only, so host-side modules carry no client layer).

May import: ``common/`` (what an applied object must hold, the waiter, the numbers' bounds), the
``kubernetes`` client library and its transport ``urllib3`` in ``client`` alone (with a clear error
when they are missing: no other file of the collection imports them), and Ansible's module API in
``runner`` alone. Touches: the cluster named by the kubeconfig. Nothing under
``model/``, ``tenancy/``, ``validate/`` or ``report/`` imports this package: those stay pure
(``validate/scenario_runner.py``, ``storage_probe.py`` and ``reach_probe.py`` excepted: they run
scenarios, the storage probe and the connection probe on the cluster).
"""
