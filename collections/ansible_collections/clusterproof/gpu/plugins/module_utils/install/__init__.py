"""What the install half puts on a site: Kubernetes by kubeadm, the CNI, the GPU device layer, storage.

Declarations checked, configurations and Helm values rendered, charts taken out of their Go
modules. Pure except where a file says otherwise (``chart_source`` and ``gpu_charts`` touch the
Go module cache and the chart cache).

May import: the standard library, ``tomlkit`` (containerd's config, in ``runtime_config`` alone),
PyYAML (in ``kubeadm_config`` alone, lazily: kubeadm's configuration file), ``common/`` and
``versions`` (the pinned versions it installs). Below the sandbox and the bundle, which build and pack what it
installs: ``gpu_charts`` is handed the build cache's folders, and ``kubeadm_config`` names a
mirror's chart files itself. Never imports a scheduler engine or the report.
"""
