"""The lab: Debian 12 hosts booted with systemd on this machine (systemd-nspawn), on a bridge of
their own, for the install half of a site to run on real hosts (../shared/design/REAL-HOSTS.md).

``plan``: the lab as data (hosts, addresses, bridge) and its checks, pure; ``machines``: building
the Debian root once per machine, booting and stopping the hosts, and leaving nothing behind.

LAB ONLY: a real site never runs anything from here. May import: the standard library, ``common/``
and ``versions`` (the hosts' Debian suite). Touches: the lab's state directory and cache, its bridge,
its cgroups, the processes it started itself, and the kernel settings a kubelet changes (saved at
``up``, restored at ``down``).
"""
