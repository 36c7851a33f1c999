"""Python's cyclic garbage collector, set up for a long-running service.

With CPython's default thresholds a young collection runs every 700 allocations of container
objects, and each one walks every young object still alive: under load, the in-flight work of
hundreds of sessions (events, models, futures) is walked again and again, and survivors are
walked once more in each older generation. The loop spent a fifth of its CPU there under the
200-session load (`perf`, bench/load.py). Two changes cut that (the loop's CPU per turn by a
sixth in interleaved runs, `bench/load_ab.py`; a threshold of 50,000 did no better):

- `gc.freeze()` once the service is built moves everything that exists at start (modules,
  classes, pydantic schemas, settings) out of the collector's sight for good;
- a young collection every `GEN0` allocations instead of 700: most objects of a request have
  died by then (reference counting frees them without the collector), so far fewer survivors
  are walked. Garbage in reference cycles waits a little longer, bounded by the threshold.
"""

from __future__ import annotations

import gc

GEN0 = 10_000
"""Allocations of container objects between young collections (CPython's default: 700)."""


def settle() -> None:
    """Collect what start-up left behind, freeze the survivors, and space out collections."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GEN0, middle, old)
