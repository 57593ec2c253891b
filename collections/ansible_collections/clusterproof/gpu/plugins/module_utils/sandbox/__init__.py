"""The sandbox site: a real control plane and engines as local processes, KWOK for the GPU nodes.

``control_plane``: processes, ports, the simulated nodes; ``lifecycle``: up, status and down
through the API server; ``install``: the one install step (CRDs, files, processes) every engine
on the sandbox goes through; ``pki``: its CA and kubeconfigs; ``build``: the binaries from
their Go modules into the per-machine cache; ``gpu_agent`` and ``local_path``: the sandbox's stand-ins
for what a node runs; ``simulated_nodes``: the same KWOK nodes attached to a real cluster without
GPUs (a test bed such as the lab).

SANDBOX AND TEST BEDS ONLY: real sites never run anything from here. May import: ``install/`` (for
what the sandbox runs of it), the client layer ``kube.client`` and ``kube.base`` (in ``install``,
``lifecycle``, ``simulated_nodes`` and ``gpu_agent`` alone; never the module runner: the modules
run themselves), ``common/`` (the waiter), ``versions`` (the pins ``build`` builds), the standard
library, PyYAML (manifests, kubeconfigs: the sandbox runs on the controller) and ``cryptography``
(in ``pki`` alone). Touches: the
sandbox state directory (and a test bed's simulated-node state), the build cache, the Go caches and
the processes it started itself.
"""
