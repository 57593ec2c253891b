"""What ``kubeadm reset`` leaves on a host, found and removed: the rules kube-proxy and the CNI wrote
in iptables, and the CNI's network interfaces.

kubeadm says so itself after a reset ("The reset process does not clean your iptables rules ... or
CNI configuration"): a host reset and joined again would keep the old rules, which route Service
addresses to pods that are gone. The pure half (``without_chains``) reads ``iptables-save`` output and
writes it again without the chains whose names start with the given prefixes (KUBE-, FLANNEL-, CNI-)
and without the rules that jump to them; every other rule, the host's own, stays as it was.

``clean_host`` touches the host it runs on: it runs ``iptables-save``/``iptables-restore`` (and the
ip6tables pair) and ``ip link delete`` (through ``host_command``). May import: the standard library
and ``host_command``. Never the cluster.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Sequence

from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import host_command

# The chains kube-proxy (KUBE-), flannel (FLANNEL-) and the CNI plugins' portmap and masquerade (CNI-) make.
DEFAULT_PREFIXES = ("KUBE-", "FLANNEL-", "CNI-")
# The interfaces flannel's vxlan backend and the bridge plugin make.
DEFAULT_INTERFACES = ("cni0", "flannel.1")
IPTABLES_COMMANDS = (("iptables-save", "iptables-restore"), ("ip6tables-save", "ip6tables-restore"))


@dataclasses.dataclass
class Removed:
    """What ``without_chains`` took out of one command's rules: chains and rules, per table."""

    chains: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    rules: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def anything(self) -> bool:
        return bool(self.chains) or any(self.rules.values())


def _target(words: Sequence[str]) -> str:
    """The chain a rule jumps or goes to (-j/--jump, -g/--goto), or empty."""
    for flag, value in zip(words, words[1:], strict=False):
        if flag in ("-j", "--jump", "-g", "--goto"):
            return value
    return ""


def without_chains(saved: str, prefixes: Iterable[str] = DEFAULT_PREFIXES) -> tuple[str, Removed]:
    """``iptables-save`` output without the chains named with ``prefixes`` and the rules jumping to them.

    Comments (lines starting with #) are dropped, as iptables-restore ignores them; the rest is kept
    line for line. Raises ValueError naming the line when a line cannot be read."""
    prefixes = tuple(prefixes)
    kept: list[str] = []
    removed = Removed()
    table = ""
    for number, line in enumerate(saved.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith(":"):
            chain = line[1:].split()[0] if line[1:].split() else ""
            if chain.startswith(prefixes):
                removed.chains.setdefault(table, []).append(chain)
                continue
        elif line.startswith("-A "):
            try:
                words = shlex.split(line)
            except ValueError as error:
                raise ValueError("iptables-save line %d: cannot read %r (%s)" % (number, line, error)) from error
            if len(words) < 2:
                raise ValueError("iptables-save line %d: a rule without its chain: %r" % (number, line))
            if words[1].startswith(prefixes) or _target(words).startswith(prefixes):
                removed.rules[table] = removed.rules.get(table, 0) + 1
                continue
        kept.append(line)
    return ("\n".join(kept) + "\n" if kept else ""), removed


def clean_iptables(prefixes: Sequence[str], apply: bool) -> dict[str, dict[str, object]]:
    """Per command found on the host (iptables, ip6tables): the chains and rule counts removed (or that
    would be, when ``apply`` is false). A command the host lacks is left out."""
    report: dict[str, dict[str, object]] = {}
    for save, restore in IPTABLES_COMMANDS:
        if shutil.which(save) is None or shutil.which(restore) is None:
            continue
        rules, removed = without_chains(host_command.run([save]), prefixes)
        if not removed.anything:
            continue
        if apply:
            host_command.run([restore], stdin=rules)
        report[save.removesuffix("-save")] = {"chains": removed.chains, "rules": removed.rules}
    return report


def present_interfaces(names: Iterable[str]) -> list[str]:
    """The interfaces of ``names`` the host has (``ip link show`` answers for them)."""
    if shutil.which("ip") is None:
        return []
    return [name for name in names if subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0]


def clean_interfaces(names: Sequence[str], apply: bool) -> list[str]:
    """The interfaces of ``names`` the host had, deleted when ``apply``."""
    present = present_interfaces(names)
    if apply:
        for name in present:
            host_command.run(["ip", "link", "delete", name])
    return present
