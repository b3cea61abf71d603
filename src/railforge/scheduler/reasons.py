"""Wording of the reasons shown for pending gangs and for decisions: short and actionable, each
a ``Reason`` carrying its stable ``ReasonCode``."""

from __future__ import annotations

import math
import time

from railforge.scheduler.model import CPU, GPU, MEMORY, Reason, ReasonCode, Spread


def duration(seconds: float) -> str:
    """Human duration: 45s, 7m, 2h13m, 3d4h."""
    if math.isinf(seconds):
        return "never"
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def clock(at: float) -> str:
    """A time as UTC to the second, 2026-11-29T01:23:45Z: a reason names when, never how long from now, so its
    words change only when their cause does."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def amount(resource: str, value: int) -> str:
    """A resource amount with its unit, e.g. '16 GPUs', '4 CPUs', '64Gi memory'."""
    if resource == GPU:
        return f"{value} GPU" + ("" if value == 1 else "s")
    if resource == CPU:
        return f"{value / 1000:g} CPUs" if value % 1000 == 0 or value >= 10_000 else f"{value}m CPU"
    if resource == MEMORY:
        return f"{value / 2**30:g}Gi memory"
    return f"{value} {resource}"


def at_limit(queue: str, resource: str, limit: int) -> Reason:
    return Reason(f"queue {queue} is at its limit of {amount(resource, limit)}", ReasonCode.QUOTA_LIMIT)


def over_limit_alone(queue: str, resource: str, need: int, limit: int) -> Reason:
    text = f"needs {amount(resource, need)} but queue {queue} is limited to {amount(resource, limit)}"
    return Reason(text, ReasonCode.QUOTA_LIMIT_ALONE)


def within_domain(need: int, level: str, best: int) -> Reason:
    text = f"needs {amount(GPU, need)} within one {level}; the best {level} has {best} free"
    return Reason(text, ReasonCode.CAPACITY_DOMAIN)


def cluster_short(resource: str, need: int, free: int) -> Reason:
    text = f"needs {amount(resource, need)}; the cluster has {free if resource == GPU else amount(resource, free)} free"
    return Reason(text, ReasonCode.CAPACITY_CLUSTER)


UNFIT = "does not fit even with nothing running: "


# The node rules (placement.NODE_RULES) that keep a gang off nodes -> the code naming them
_RULE_CODES: dict[tuple[str, ...], tuple[ReasonCode, ReasonCode]] = {
    ("node selector",): (ReasonCode.CAPACITY_SELECTOR, ReasonCode.NEVER_FITS_SELECTOR),
    ("node affinity",): (ReasonCode.CAPACITY_AFFINITY, ReasonCode.NEVER_FITS_AFFINITY),
    ("taints",): (ReasonCode.CAPACITY_TAINTS, ReasonCode.NEVER_FITS_TAINTS),
}


def _rule_code(rules: list[str], never: bool) -> ReasonCode:
    """The code of a shortfall on the nodes the gang may use: the one rule that rules nodes out,
    or ``node-rules`` for several."""
    codes = _RULE_CODES.get(tuple(rules), (ReasonCode.CAPACITY_NODE_RULES, ReasonCode.NEVER_FITS_NODE_RULES))
    return codes[never]


def unfit_total(need: int, capacity: int, excluded: str = "", rules: list[str] | None = None) -> Reason:
    """``excluded``/``rules``: what keeps the gang off nodes (``admit.excluded``), if anything."""
    nodes = f"nodes it may use ({excluded})" if excluded else "schedulable nodes"
    code = _rule_code(rules, never=True) if rules else ReasonCode.NEVER_FITS
    return Reason(f"{UNFIT}needs {amount(GPU, need)}; the {nodes} have {capacity} in all", code)


def unfit_domain(need: int, level: str, best: int) -> Reason:
    text = f"{UNFIT}needs {amount(GPU, need)} within one {level}; the largest {level} has {best} in all"
    return Reason(text, ReasonCode.NEVER_FITS_DOMAIN)


def unfit_pods(count: int, resource: str, each: int, room: int) -> Reason:
    pods = "pod" if count == 1 else "pods"
    text = f"{UNFIT}needs {count} {pods} of {amount(resource, each)}; the schedulable nodes have room for {room}"
    return Reason(text, ReasonCode.NEVER_FITS_PODS)


def spread_short(count: int, spread: Spread, room: int | None) -> Reason:
    """Pods that must spread over nodes or wider domains: ``room``, how many the nodes it may use take at that
    rate (None: with what runs now, no placement keeps the spread)."""
    pods = "pod" if count == 1 else "pods"
    per = "node" if spread.topology_key is None else f"{spread.topology_key} domain"
    if spread.max_skew is None:
        rule = f"needs {count} {pods} at most {spread.max_per_domain} per {per} ({spread.source})"
    else:
        most = f"at most {spread.max_skew} more in one {per} than in another"
        rule = f"needs {count} {pods} spread with {most} ({spread.source})"
    if room is not None:
        return Reason(f"{UNFIT}{rule}; the nodes it may use take {room}", ReasonCode.NEVER_FITS_SPREAD)
    return Reason(f"{rule}; with what runs now, no placement keeps that", ReasonCode.CAPACITY_SPREAD)


def larger_than_any_node(count: int, resource: str, each: int, largest: int) -> Reason:
    pods = "pod" if count == 1 else "pods"
    has = largest if resource == GPU else amount(resource, largest)
    text = f"{UNFIT}needs {count} {pods} of {amount(resource, each)}; no node has that much (the largest has {has})"
    return Reason(text, ReasonCode.NEVER_FITS_PODS)


def unfit_requests(resources: list[str]) -> Reason:
    named = ", ".join({CPU: "CPU", GPU: "GPU"}.get(name, name) for name in resources)
    text = f"{UNFIT}the schedulable nodes cannot hold its pods' {named} requests together"
    return Reason(text, ReasonCode.NEVER_FITS_REQUESTS)


def unfit_pinned(member: str, node: str, problem: str) -> Reason:
    """``problem``: what keeps the node from ever holding the member, e.g. "is not a schedulable, ready node"."""
    return Reason(f"{UNFIT}member {member} is pinned to node {node}, which {problem}", ReasonCode.NEVER_FITS_PINNED)


def pinned_short(node: str, resource: str, need: int, free: int) -> Reason:
    has = free if resource == GPU else amount(resource, free)
    text = f"needs {amount(resource, need)} on node {node}, where its members are pinned; it has {has} free"
    return Reason(text, ReasonCode.CAPACITY_PINNED)


def unknown_level(level: str, names: tuple[str, ...]) -> Reason:
    text = f"requires topology level {level!r}, which is not one of the scheduler's levels ({', '.join(names)})"
    return Reason(text, ReasonCode.UNKNOWN_LEVEL)


def fragmented(need: int, largest_member: int, best_node: int) -> Reason:
    text = (
        f"needs {amount(GPU, need)} in pods of up to {largest_member}; free GPUs are fragmented "
        f"(the emptiest node has {best_node} free)"
    )
    return Reason(text, ReasonCode.CAPACITY_FRAGMENTED)


def pods_short(count: int, resource: str, each: int, room: int, most: int) -> Reason:
    pods = "pod" if count == 1 else "pods"
    text = (
        f"needs {count} {pods} of {amount(resource, each)}; the nodes it may use have room for {room} "
        f"(the most free on one node is {amount(resource, most)})"
    )
    return Reason(text, ReasonCode.CAPACITY_PODS)


def requests_apart(need: int, largest_member: int) -> Reason:
    text = (
        f"needs {amount(GPU, need)} in pods of up to {largest_member}; the nodes it may use do not have "
        "each pod's GPU, CPU, memory and other requests free together"
    )
    return Reason(text, ReasonCode.CAPACITY_APART)


def no_matching_nodes(need: int, free: int, excluded: str, rules: list[str]) -> Reason:
    text = f"needs {amount(GPU, need)} on the nodes it may use ({excluded}); those have {free} free"
    return Reason(text, _rule_code(rules, never=False))


def excluded(rules: list[tuple[str, int]]) -> str:
    """Which of a gang's node rules keep it off how many nodes: [(rule, nodes ruled out)]."""
    return "; ".join(f"{rule} rules out {count} node{'' if count == 1 else 's'}" for rule, count in rules)


def names(items: list[str], most: int = 4) -> str:
    shown = ", ".join(items[:most])
    return shown if len(items) <= most else f"{shown} and {len(items) - most} more"


def reserved(start: float, now: float, nodes: list[str], domain: str | None, waits_for: list[str]) -> Reason:
    """``start`` is ``now`` when what it waits for is past its max runtime: it starts once that ends."""
    where = f" on {names(nodes)}" + (f" ({domain})" if domain else "")
    when = f"at {clock(start)}" if start > now else "as soon as its nodes are free (past the max runtime ahead)"
    text = f"reserved to start {when}{where}"
    if waits_for:
        gangs = "gang" if len(waits_for) == 1 else "gangs"
        ends = "ends" if len(waits_for) == 1 else "end"
        text += f", when {gangs} {names(waits_for)} {ends}"
    return Reason(text, ReasonCode.RESERVED)


def behind_reservation(gang: str, start: float, now: float) -> Reason:
    when = f"starts at {clock(start)}" if start > now else "starts once its nodes are free"
    text = f"blocked behind reservation of gang {gang} ({when}); a shorter max runtime would let it backfill"
    return Reason(text, ReasonCode.RESERVED_BLOCKED)


def behind_maintenance(start: float, nodes: tuple[str, ...]) -> Reason:
    text = (
        f"the nodes it fits on now are reserved for maintenance from {clock(start)} ({names(list(nodes))}); "
        "it starts there only with a max runtime that ends before"
    )
    return Reason(text, ReasonCode.MAINTENANCE)


def no_start_before_maintenance(need: int, free: int, start: float, nodes: list[str]) -> Reason:
    text = (
        f"needs {amount(GPU, need)}, {free} free now; cannot be reserved: no start leaves it its max runtime before "
        f"the maintenance of {names(nodes)} from {clock(start)}"
    )
    return Reason(text, ReasonCode.MAINTENANCE)


def in_maintenance(reason: Reason, since: float, nodes: list[str]) -> Reason:
    """``reason`` with the nodes it may use that are in maintenance now (not counted as free from then on)."""
    return Reason(f"{reason}; {names(nodes)} in maintenance since {clock(since)}", reason.code)


# Why the head of the line did not evict: (what it would have done, why not) -> text
DECLINED = {
    ("reclaiming", "cost"): "evicting the borrowers would destroy more work than the wait it saves",
    ("reclaiming", "served"): "the borrowing queues would end up less served (held / quota) than this one",
    ("reclaiming", "room"): "evicting the borrowers that may be taken would not make room",
    ("preempting", "cost"): "evicting the gangs that backfilled past it would destroy more work than the wait it saves",
    ("preempting", "room"): "evicting the gangs that backfilled past it and may be taken would not make room",
}


def declined(reason: Reason, action: str, why: str) -> Reason:
    """The reason with why the gang did not evict added; the code stays the reason's."""
    return Reason(f"{reason}; not {action}: {DECLINED[action, why]}", reason.code)


def no_start_time(need: int, free: int) -> Reason:
    """``need``: its required members' GPUs; ``free``: the cluster's free GPUs now."""
    text = (
        f"needs {amount(GPU, need)}, {free} free now; cannot be reserved: running gangs without a max runtime hold "
        "the capacity it needs"
    )
    return Reason(text, ReasonCode.RESERVED_NO_START)


def strict_order(gang: str) -> Reason:
    text = f"waiting behind gang {gang} (strict FIFO: nothing starts before the head of the queue)"
    return Reason(text, ReasonCode.STRICT_ORDER)


def undeclared_queue(queue: str) -> Reason:
    text = f"queue {queue} is not declared; it waits until the queue is declared or the gang names a declared one"
    return Reason(text, ReasonCode.UNDECLARED_QUEUE)


def backoff(end: float) -> Reason:
    return Reason(f"restarting after a failure; backoff ends at {clock(end)}", ReasonCode.BACKOFF)


def walltime(max_runtime: float, grace: float) -> str:
    """Why a running gang is ended (a ``Fail``'s reason)."""
    return f"ran past its max runtime of {duration(max_runtime)} and the walltime grace of {duration(grace)}"


def owner_limit(problem: str, allowed: int, restarts: int, why: str = "") -> str:
    """Why a failed gang is not restarted: its owner would fail the job, on the removals or by a rule of its own
    (``why``: ``Gang.owner_limit_reason``; a ``Fail``'s reason)."""
    if why:
        return f"{problem}; not restarted: {why}; the failure is left to it"
    return (
        f"{problem}; not restarted: its owner counts a restart's removed pods against its own limit, which allows "
        f"{allowed} restart{'' if allowed == 1 else 's'} ({restarts} done); the failure is left to it"
    )


def schedule_timeout(timeout: float) -> Reason:
    return Reason(f"not scheduled within its schedule timeout of {duration(timeout)}", ReasonCode.SCHEDULE_TIMEOUT)
