"""What the install half puts on a site: Kubernetes by kubeadm, the CNI, the GPU device layer, storage.

Declarations checked, configurations and Helm values rendered, charts taken out of their Go
modules. Pure except where a file says otherwise (``chart_source`` and ``gpu_charts`` touch the
Go module cache and the chart cache).

May import: the standard library, ``tomlkit`` (containerd's config), ``common/``, ``versions`` (the
pinned versions it installs), ``sandbox.build`` (``gpu_charts``: the build cache the charts are kept
in), and ``bundle.contents`` (pure) for the names of the bundle's charts.
Never imports a scheduler engine or the report.
"""
