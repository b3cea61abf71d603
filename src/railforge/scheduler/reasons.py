"""Wording of the reasons shown for pending gangs and for decisions: short and actionable."""

from __future__ import annotations

import math

from railforge.scheduler.model import CPU, GPU, MEMORY


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


def amount(resource: str, value: int) -> str:
    """A resource amount with its unit, e.g. '16 GPUs', '4 CPUs', '64Gi memory'."""
    if resource == GPU:
        return f"{value} GPU" + ("" if value == 1 else "s")
    if resource == CPU:
        return f"{value / 1000:g} CPUs" if value % 1000 == 0 or value >= 10_000 else f"{value}m CPU"
    if resource == MEMORY:
        return f"{value / 2**30:g}Gi memory"
    return f"{value} {resource}"


def at_limit(queue: str, resource: str, limit: int) -> str:
    return f"queue {queue} is at its limit of {amount(resource, limit)}"


def over_limit_alone(queue: str, resource: str, need: int, limit: int) -> str:
    return f"needs {amount(resource, need)} but queue {queue} is limited to {amount(resource, limit)}"


def within_domain(need: int, level: str, best: int) -> str:
    return f"needs {amount(GPU, need)} within one {level}; the best {level} has {best} free"


def cluster_short(resource: str, need: int, free: int) -> str:
    return f"needs {amount(resource, need)}; the cluster has {free if resource == GPU else amount(resource, free)} free"


UNFIT = "does not fit even with nothing running: "


def unfit_total(need: int, capacity: int, excluded: str) -> str:
    nodes = f"nodes it may use ({excluded})" if excluded else "schedulable nodes"
    return f"{UNFIT}needs {amount(GPU, need)}; the {nodes} have {capacity} in all"


def unfit_domain(need: int, level: str, best: int) -> str:
    return f"{UNFIT}needs {amount(GPU, need)} within one {level}; the largest {level} has {best} in all"


def unfit_pods(count: int, resource: str, each: int, room: int) -> str:
    pods = "pod" if count == 1 else "pods"
    return f"{UNFIT}needs {count} {pods} of {amount(resource, each)}; the schedulable nodes have room for {room}"


def unfit_requests(resources: list[str]) -> str:
    named = ", ".join({CPU: "CPU", GPU: "GPU"}.get(name, name) for name in resources)
    return f"{UNFIT}the schedulable nodes cannot hold its pods' {named} requests together"


def unknown_level(level: str, names: tuple[str, ...]) -> str:
    return f"requires topology level {level!r}, which is not one of the scheduler's levels ({', '.join(names)})"


def fragmented(need: int, largest_member: int, best_node: int) -> str:
    return (
        f"needs {amount(GPU, need)} in pods of up to {largest_member}; free GPUs are fragmented "
        f"(the emptiest node has {best_node} free)"
    )


def pods_short(count: int, resource: str, each: int, room: int, most: int) -> str:
    pods = "pod" if count == 1 else "pods"
    return (
        f"needs {count} {pods} of {amount(resource, each)}; the nodes it may use have room for {room} "
        f"(the most free on one node is {amount(resource, most)})"
    )


def requests_apart(need: int, largest_member: int) -> str:
    return (
        f"needs {amount(GPU, need)} in pods of up to {largest_member}; the nodes it may use do not have "
        "each pod's GPU, CPU, memory and other requests free together"
    )


def no_matching_nodes(need: int, free: int, excluded: str) -> str:
    return f"needs {amount(GPU, need)} on the nodes it may use ({excluded}); those have {free} free"


def excluded(rules: list[tuple[str, int]]) -> str:
    """Which of a gang's node rules keep it off how many nodes: [(rule, nodes ruled out)]."""
    return "; ".join(f"{rule} rules out {count} node{'' if count == 1 else 's'}" for rule, count in rules)


def names(items: list[str], most: int = 4) -> str:
    shown = ", ".join(items[:most])
    return shown if len(items) <= most else f"{shown} and {len(items) - most} more"


def reserved(start_in: float, nodes: list[str], domain: str | None, waits_for: list[str]) -> str:
    where = f" on {names(nodes)}" + (f" ({domain})" if domain else "")
    if not waits_for:
        return f"reserved to start at +{duration(start_in)}{where}"
    gangs = "gang" if len(waits_for) == 1 else "gangs"
    ends = "ends" if len(waits_for) == 1 else "end"
    return f"reserved to start at +{duration(start_in)}{where}, when {gangs} {names(waits_for)} {ends}"


def behind_reservation(gang: str, start_in: float) -> str:
    return (
        f"blocked behind reservation of gang {gang} (starts at +{duration(start_in)}); "
        "a shorter max runtime would let it backfill"
    )


# Why the head of the line did not evict: (what it would have done, why not) -> text
DECLINED = {
    ("reclaiming", "cost"): "evicting the borrowers would destroy more work than the wait it saves",
    ("reclaiming", "served"): "the borrowing queues would end up less served (held / quota) than this one",
    ("reclaiming", "room"): "evicting the borrowers that may be taken would not make room",
    ("preempting", "cost"): "evicting the gangs that backfilled past it would destroy more work than the wait it saves",
    ("preempting", "room"): "evicting the gangs that backfilled past it and may be taken would not make room",
}


def declined(reason: str, action: str, why: str) -> str:
    return f"{reason}; not {action}: {DECLINED[action, why]}"


def no_start_time() -> str:
    return "cannot be reserved: running gangs without a max runtime hold the capacity it needs"


def strict_order(gang: str) -> str:
    return f"waiting behind gang {gang} (strict FIFO: nothing starts before the head of the queue)"


def undeclared_queue(queue: str) -> str:
    return f"queue {queue} is not declared; it waits until the queue is declared or the gang names a declared one"


def backoff(wait: float) -> str:
    return f"restarting after a failure; backoff ends in {duration(wait)}"


def schedule_timeout(timeout: float) -> str:
    return f"not scheduled within its schedule timeout of {duration(timeout)}"
