"""The adapter's collector between passes: cycles a pass left wait for the periodic whole collection."""

import gc
import weakref

from railforge.k8s.collector import PassCollector


class Linked:
    pass


def garbage_cycle() -> weakref.ref:
    """An object reachable only through its own reference cycle: reference counting never frees it."""
    obj = Linked()
    obj.self = obj
    return weakref.ref(obj)


def test_frozen_cycles_wait_for_the_whole_collection():
    now = [0.0]
    collector = PassCollector(full_every=600, clock=lambda: now[0])
    try:
        left = garbage_cycle()
        collector.after_pass()
        assert gc.get_freeze_count() > 0
        gc.collect()
        assert left() is not None  # frozen: the passes' collections no longer walk it

        now[0] = 599.0
        collector.after_pass()
        gc.collect()
        assert left() is not None

        made_now = garbage_cycle()
        now[0] = 600.0
        collector.after_pass()  # due: everything frozen is collected once, then what lives is frozen again
        assert left() is None and made_now() is None
        assert collector.collected_at == 600.0

        later = garbage_cycle()
        collector.stop()  # the collector has them all back
        assert gc.get_freeze_count() == 0
        gc.collect()
        assert later() is None
    finally:
        gc.unfreeze()


def test_objects_without_cycles_are_freed_frozen_or_not():
    collector = PassCollector(full_every=600, clock=lambda: 0.0)
    try:
        kept = Linked()
        ref = weakref.ref(kept)
        collector.after_pass()
        del kept  # an informer replacing an object: its last reference goes
        assert ref() is None
    finally:
        collector.stop()
