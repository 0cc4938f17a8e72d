"""Worker processes that end when the process that started them dies.

A comparison's parent stops its workers when it is interrupted or terminated
(:mod:`.execution`), but a parent killed outright (``kill -9``, the out-of-memory killer) runs
no code: its workers would train on, and a comparison started again at once would train the
same run directories beside them. Each worker therefore calls :func:`end_with_parent` as it
starts. On Linux the kernel sends it SIGKILL the moment its parent dies
(``prctl(PR_SET_PDEATHSIG)``); everywhere, a daemon thread checks every ``interval_s`` whether
the parent is still its parent (an orphan is adopted by another process) and ends the worker
otherwise. A worker killed this way resumes from its last checkpoint next time, as after Ctrl-C.
Once the workers are gone, multiprocessing's resource tracker (which the workers kept open)
sees its last client go and exits too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

__all__ = ["end_with_parent"]

#: ``PR_SET_PDEATHSIG`` of ``<linux/prctl.h>``.
_PR_SET_PDEATHSIG = 1


def end_with_parent(parent_pid: int, *, interval_s: float = 0.5) -> None:
    """End this process as soon as ``parent_pid`` is no longer its parent.

    Args:
        parent_pid: the process that started this one (its ``os.getpid()``, passed down).
        interval_s: how often the watching thread checks.
    """
    _kill_on_parent_death()
    # The parent may have died before the line above: then no signal will ever come.
    if os.getppid() != parent_pid:
        os._exit(1)
    watcher = threading.Thread(target=_watch, args=(parent_pid, interval_s),
                               name="filterformer-parent-watch", daemon=True)
    watcher.start()


def _kill_on_parent_death() -> bool:
    """Ask Linux to SIGKILL this process when its parent dies; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int, interval_s: float) -> None:
    while os.getppid() == parent_pid:
        time.sleep(interval_s)
    # Nothing of the run under way is worth saving: it resumes from its last checkpoint.
    os._exit(1)
