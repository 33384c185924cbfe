"""The objects a process holds when its first adapter is built, set aside from the garbage
collector's full collections.

A framework and its dependencies leave hundreds of thousands of objects behind when they
are imported. The first request through an adapter keeps a few tens of thousands more (a
history's entries, its nodes, the render's state), enough to start a full collection, and a
full collection walks every object the process holds: about 100–300 ms, counted in that
request. ``gc.freeze()`` moves what exists at the adapter's build (mostly modules, classes
and the framework's long-lived state) to the collector's permanent generation, so later full
collections walk only what was made after it. It costs no time itself. What it gives up:
a reference cycle among those objects that becomes garbage later is never collected.
``OPENPROGRAM_GC_FREEZE=0`` turns it off.
"""

from __future__ import annotations

import gc
import os
import threading

__all__ = ["ENV", "freeze_once"]

ENV = "OPENPROGRAM_GC_FREEZE"
_done = threading.Event()


def freeze_once() -> None:
    """Freeze the objects the process holds now, once per process (``OPENPROGRAM_GC_FREEZE=0``:
    never)."""
    if _done.is_set() or os.environ.get(ENV, "").strip().lower() in ("0", "false", "off", "no"):
        return
    _done.set()
    gc.freeze()
