"""The stages of one scheduling cycle, in the order ``core.run_cycle`` runs them.

* ``recover``: restart or fail running gangs hit by a failure; the free-capacity view of the rest.
* ``admit``: which waiting gangs may be tried at all (timeouts, backoff, undeclared queues), queue
  limits, and the gangs that never fit.
* ``order``: the service order (aged first, then fair share, FIFO or oracle SJF), then shortest
  estimate first once every reservation is made.
* ``allocate``: try one gang: place it, or reclaim / preempt for it, or reserve for it; bind.
* ``reserve``: a blocked gang's earliest start and the reservation that holds it.
* ``reclaim``: evict borrowed gangs (reclaim) or gangs that backfilled past a reservation (preempt).
* ``explain``: the reasons of gangs that did not start, those the pass never tried included.

Each is a module of functions over ``state.CycleState``.
"""
