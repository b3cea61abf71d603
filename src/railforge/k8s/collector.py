"""The cyclic garbage collector between the adapter's passes.

At thousands of nodes the informers hold hundreds of thousands of API objects, and each of Python's full collections
walks them all: 0.15-0.3 s, more than once a pass, in whichever step it lands. After each pass what is alive is
frozen (``gc.freeze``): the full collections then walk only what later passes made. Reference counting still frees
the objects a later event replaces, frozen or not; only garbage in reference cycles needs the collector, and what of
it was frozen is collected by one whole collection every ``full_every`` seconds.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

FULL_EVERY_SECONDS = 600.0


class PassCollector:
    def __init__(self, full_every: float = FULL_EVERY_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.full_every = full_every
        self.clock = clock
        self.collected_at = clock()

    def after_pass(self) -> None:
        """Freeze what is alive now; first, once ``full_every`` has passed, collect everything frozen before."""
        if self.clock() - self.collected_at >= self.full_every:
            gc.unfreeze()
            gc.collect()
            self.collected_at = self.clock()
        gc.freeze()

    def stop(self) -> None:
        """Hand the frozen objects back to the collector (the process may go on without the adapter)."""
        gc.unfreeze()
