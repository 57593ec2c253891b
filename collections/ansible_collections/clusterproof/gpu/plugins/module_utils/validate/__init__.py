"""The validator: the live cluster compared with what the inventory declares.

Nodes, projects, storage, quota trees, tenant isolation, the fairness scenarios, and the control plane
of a kubeadm site (``control_plane``: etcd and the API servers as each control-plane host read them).
Pure comparisons over API objects and host readings as JSON, returning ``report.model`` checks; the
cluster is read by the modules through the client layer and handed in. Three exceptions, each
creating and removing objects of its own through ``kube.client``: ``scenario_runner`` runs a scenario
on the cluster, ``storage_probe`` the storage probe (claims, their pods, and what earlier probes left),
``reach_probe`` the pods that try a connection between projects; and ``kubelets``, which only reads
each real kubelet's configuration through the API server's node proxy.

May import: ``common/``, ``versions`` (the probes' images), ``tenancy/``, ``model/``, ``report.model``,
``install/`` (storage declarations), ``scheduler.registry`` and ``scheduler.base`` (the engine through
its backend); the client layer ``kube.client`` and ``kube.base`` (what an unreachable server looks
like) in ``scenario_runner``, ``storage_probe``, ``reach_probe`` and ``kubelets`` alone; and
``sandbox.control_plane`` (the engine's process records, read on the sandbox to tell a stopped
scheduler) in ``scenario_runner`` alone. No third-party package. Never imports an engine file directly.
"""
