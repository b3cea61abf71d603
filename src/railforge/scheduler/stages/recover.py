"""Recover: the running gangs that survive, and the free capacity they leave.

A running gang is restarted (whole) or failed when a member failed, or a node it uses is lost,
not ready, or has a NoExecute taint the gang does not tolerate (Kubernetes evicts such pods). The
survivors are indexed, and their use per node and per queue gives the cycle's free-capacity view
(``state.cluster``) and queue usage. A node reserved for maintenance is held whole from its window's
start on, as a reservation is: only gangs expected to end before then start there.
"""

from __future__ import annotations

import math

from railforge.scheduler import reasons
from railforge.scheduler.cycle import CycleState
from railforge.scheduler.incremental import RunningIndex
from railforge.scheduler.model import Fail, Restart, RunningGang
from railforge.scheduler.placement import Cluster


def run(state: CycleState) -> Cluster:
    """Settle the running gangs, then set and return ``state.cluster``."""
    handle_failures(state)
    state.cluster = build_cluster(state)
    return state.cluster


def handle_failures(state: CycleState) -> None:
    """Sort the running gangs into survivors and gangs to restart or fail; index the survivors."""
    snapshot = state.snapshot
    index = state.running_index.update(snapshot.running)
    ready = set()
    evicting = set()  # nodes with a NoExecute taint
    for node in snapshot.nodes:
        if node.ready:
            ready.add(node.name)
        if node.taints and any(taint.effect == "NoExecute" for taint in node.taints):
            evicting.add(node.name)
    overdue = _overdue(state)
    healthy = ready.issuperset(index.node_gangs) and evicting.isdisjoint(index.node_gangs)
    if not index.failed and healthy and not overdue:
        return
    nodes = {node.name: node for node in snapshot.nodes}
    survivors = []
    for running in sorted(snapshot.running, key=lambda r: r.gang.name):
        if running.gang.name in overdue:
            state.decisions.failures.append(Fail(running.gang.name, overdue[running.gang.name]))
            continue
        used = state.memo.placed_by_node(running)[0]
        if not running.failed_members and ready.issuperset(used) and evicting.isdisjoint(used):
            survivors.append(running)
            continue
        problem = _problem(running, nodes)
        if problem is None:
            survivors.append(running)
            continue
        gang = running.gang
        config = state.config
        limit = config.max_restarts
        if config.failure_policy == "fail" or (limit is not None and gang.restart_count >= limit):
            state.decisions.failures.append(Fail(gang.name, problem))
        elif gang.owner_max_restarts is not None and gang.restart_count >= gang.owner_max_restarts:
            state.decisions.failures.append(
                Fail(
                    gang.name,
                    reasons.owner_limit(problem, gang.owner_max_restarts, gang.restart_count, gang.owner_limit_reason),
                )
            )
        else:
            delay = config.restart_delay(gang.restart_count)
            state.decisions.restarts.append(
                Restart(gang.name, state.now + delay, f"{problem}; restarting the whole gang")
            )
    state.running_index = RunningIndex(state.memo).update(survivors)


def _overdue(state: CycleState) -> dict[str, str]:
    """The running gangs past their max runtime plus the walltime grace, with why they end ({} when off)."""
    grace = state.config.walltime_grace
    if grace is None:
        return {}
    return {
        running.gang.name: reasons.walltime(running.gang.max_runtime, grace)
        for running in state.snapshot.running
        if running.gang.max_runtime is not None and state.now > running.start_time + running.gang.max_runtime + grace
    }


def _problem(running: RunningGang, nodes: dict) -> str | None:
    """What ends the running gang: a failed member, or the first of its nodes that is lost, not
    ready or evicts it; None when nothing does."""
    if running.failed_members:
        return f"member {sorted(running.failed_members)[0]} failed"
    for member, node_name in sorted(running.placement.items()):
        node = nodes.get(node_name)
        if node is None or not node.ready:
            return f"node {node_name} of member {member} is lost or not ready"
        evicted_by = [
            taint for taint in node.taints if taint.effect == "NoExecute" and not running.gang.tolerates(taint)
        ]
        if evicted_by:
            return (
                f"node {node_name} of member {member} has taint {evicted_by[0].key}:NoExecute, "
                "which the gang does not tolerate"
            )
    return None


def build_cluster(state: CycleState) -> Cluster:
    """The free-capacity view and queue usage of the survivors (``state.running_index``)."""
    index = state.running_index
    for queue in sorted(index.by_queue):
        state.usage.add(queue, index.by_queue[queue])
    config = state.config
    static = state.memo.static(state.snapshot.nodes, tuple(state.level_names), tuple(config.topology_label_keys))
    cluster = Cluster(static, index.used, index.use_version)
    for start in sorted(static.maintenance):
        held = static.maintenance[start]
        cluster.reserve({i: cluster.nodes[i].allocatable for i in held}, start, math.inf)
        state.maintenance.append((start, tuple(cluster.nodes[i].name for i in held)))
    return cluster
