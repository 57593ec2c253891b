"""The offline bundle: one directory that holds everything a site's install needs, for air-gapped
sites and for the lab (docs/bundle.md).

``contents``: what goes in, worked out from the pins (pure); ``build``: making it, incrementally,
with Debian's tools for the job (apt, apt-ftparchive, gpg, dpkg-deb, debootstrap, umoci, skopeo,
docker-registry) and Go for the programs; ``serve``: serving the apt repository and the registry to
a site's hosts.

May import: the standard library, ``versions`` (the pins it is made from), ``common/`` (``serve``
and ``build`` wait with ``common.wait``), PyYAML (``build`` reads the CNI manifest and writes the
registry's configuration; the bundle is made on the controller), ``install.go_modules``,
``install.kubernetes_cni`` and ``sandbox.build`` (whose cache holds the Kubernetes programs): the
top of the install half's layers, which nothing of the collection imports.
Touches: the bundle's cache and output directories, the Go module and build caches, and the
processes ``serve`` starts.
"""
