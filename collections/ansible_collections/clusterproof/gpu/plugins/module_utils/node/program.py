"""Running the program a node check starts in a subprocess (the GPU benchmark runner on the host, the
GPU host suite on the controller), the same way for both: a scratch file it reads or writes, removed
afterwards, and its run to the end, output captured as text, where each way it can fail to get there
(not found, not started, out of time) becomes the check's own error saying what to change.

May import: the standard library. Touches: the scratch file, and what the program it starts touches.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any


@contextlib.contextmanager
def scratch_file(prefix: str, suffix: str, workdir: str | None, text: str = "") -> Iterator[str]:
    """A new file in ``workdir`` (the system's temporary folder when None) holding ``text``; its path,
    removed when the block ends however it ends."""
    handle, path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=workdir)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as scratch:
            scratch.write(text)
        yield path
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def run_to_end(
    command: Sequence[str],
    *,
    timeout: float,
    error: Callable[[str], Exception],
    not_found: Callable[[OSError], str],
    not_started: Callable[[OSError], str],
    timed_out: Callable[[subprocess.TimeoutExpired], str],
    execute: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    **options: Any,
) -> subprocess.CompletedProcess:
    """``execute(command)`` with its output captured as text and its exit status left to the caller.

    Raises ``error`` with what ``not_found``, ``not_started`` or ``timed_out`` say of the exception where
    the program is not there, is there but could not be started, or ran past ``timeout`` seconds.
    ``options`` go to ``execute`` as they are (``cwd``, ``env``).
    """
    try:
        return execute(command, capture_output=True, text=True, timeout=timeout, check=False, **options)
    except FileNotFoundError as missing:
        raise error(not_found(missing)) from missing
    except OSError as failed:
        raise error(not_started(failed)) from failed
    except subprocess.TimeoutExpired as expired:
        raise error(timed_out(expired)) from expired
