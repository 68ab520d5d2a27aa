"""The serving process's start-up heap, kept out of the garbage collector's full passes.

A full (generation 2) collection walks every object the collector tracks. After start-up that
is every imported module's objects, the models' Python side and the index's metadata: about
200,000 objects in the null-backend server. In a burst of 100 questions such a collection held
the event loop for 65-110 ms (measured with ``gc.callbacks``, docs/studies/bursts-and-admission.md
"Bursts again"), and everything on the loop waited behind it: arrivals, refusals, the streams'
events.

``freeze_startup_heap`` collects what start-up left as garbage, then moves every object still
alive into the collector's permanent generation (``gc.freeze``), which its passes skip: those
objects live as long as the process anyway. A full collection in the same bursts then took
about 4 ms. ``RAGTIME_GC_FREEZE=false`` turns it off; ``ragtime_heap_frozen_objects`` says how
many objects were frozen.
"""

from __future__ import annotations

import gc
import logging

from tracing.metrics import HEAP_FROZEN_OBJECTS

log = logging.getLogger("ragtime")


def freeze_startup_heap() -> int:
    """Collect, then freeze what is alive; how many objects are frozen now."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    HEAP_FROZEN_OBJECTS.set(frozen)
    log.info("start-up heap frozen: %d objects out of the collector's full passes", frozen)
    return frozen
