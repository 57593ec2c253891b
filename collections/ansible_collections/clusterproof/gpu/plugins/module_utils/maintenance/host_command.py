"""One command run on the host a maintenance module runs on, its failure an error that names it.

Used by ``host_cleanup`` (iptables-save/-restore, ip), ``certificates`` (kubeadm, openssl) and
``control_plane_status`` (openssl). May import: the standard library. Touches the host: it runs the
command.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence


def run(command: Sequence[str], stdin: str | None = None) -> str:
    """``command``'s standard output; RuntimeError when the host lacks the program or it exits non-zero."""
    if shutil.which(command[0]) is None:
        raise RuntimeError("%s is not installed on this host (it runs: %s)" % (command[0], " ".join(command)))
    done = subprocess.run(list(command), input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(command), done.returncode, done.stderr.strip()))
    return done.stdout
