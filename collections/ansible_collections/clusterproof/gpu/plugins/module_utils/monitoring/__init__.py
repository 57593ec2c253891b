"""Monitoring: Prometheus for a site, its scrape configuration, the rules it ships, and what the
validator reads back from it.

``prometheus_package``: Debian's Prometheus package at the pin, fetched and unpacked into the
per-machine cache (prometheus, promtool); ``settings``: the inventory's ``clusterproof_monitoring``
checked (pure); ``config``: the scrape configuration (pure); ``sandbox``: Prometheus as a local
process of the sandbox; ``cluster``: Prometheus and kube-state-metrics as pods of a kubeadm site,
the objects (pure); ``api``: Prometheus's HTTP API (targets, rules, instant queries), standard
library only; ``reach``: where the validator finds Prometheus (a URL, or the API server's proxy);
``checks``: the report's monitoring checks, pure comparisons of what Prometheus says with what the
cluster holds; ``timeline``: the scenario runs over time from range queries, made into charts for
the scenarios' sections (pure).

May import: ``common/``, ``tenancy/`` (the project label), ``report.model`` (the checks),
``scheduler.registry`` (the engine's metrics endpoints), ``sandbox.install`` and
``sandbox.control_plane`` (in ``sandbox`` alone: the install step, ports and processes),
``kube.client`` (in ``reach`` alone: the API server's proxy), PyYAML (configuration files) and the
standard library.
Touches: the monitoring cache (``~/.cache/clusterproof/monitoring``), apt's download of one package
(no root, nothing installed), the files and processes of the sandbox's Prometheus, and Prometheus's
HTTP API (through the API server's proxy on a kubeadm site).
"""
