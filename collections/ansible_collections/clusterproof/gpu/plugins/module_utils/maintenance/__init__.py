"""Keeping a kubeadm site alive after its install: removing a node, its certificates' expiry, etcd's backup.

``removal`` (pure) plans a node's removal from the checked declaration and the cluster's nodes, and
refuses what would break the site; ``host_cleanup`` removes what ``kubeadm reset`` leaves on a host
(the CNI's configuration and interfaces, the rules kube-proxy and the CNI wrote in iptables), and
touches the host it runs on; ``certificates`` reads the expiry of kubeadm's certificates and the
kubelet's client certificate (it runs ``kubeadm`` and ``openssl`` on the host), judges them, and
renews kubeadm's; ``control_plane_status`` reads, on a control-plane host, its etcd (through etcd's
JSON gateway), its API server, the API through the site's endpoint and the API server certificate's
names, for the validation's control-plane section (judged by ``validate/control_plane.py``);
``etcd`` names, describes, prunes, chooses and checks etcd snapshots, makes the report's check of the
newest one's age, and takes and restores them on a control plane (it runs etcdctl and etcdutl, and
replaces the host's etcd data directory, keeping the old one aside); ``disruption`` (pure) counts what
an upgrade's drains evicted from the projects and judges whether it runs again, for the report.

May import: the standard library, ``common/``, ``install.kubeadm_config`` (which hosts kubeadm
installed, in which role) and ``report.model`` (the checks of the report). Never imports a scheduler
engine, the Kubernetes client or the Ansible runner: the modules and playbooks do the cluster's I/O.
"""
