"""What a ``Scheduler`` works out once per snapshot object and keeps between its calls.

Snapshot objects are immutable (frozen dataclasses whose mappings refuse changes), so a value
derived from one, such as a gang's profile or a running gang's use per node, stays true while the
same object is handed in again. The values live here, never on the caller's objects, keyed by
object identity (each entry keeps its object alive, so an identity is never reused while its entry
lives). ``Scheduler.indexes_for`` drops the values of objects gone, and starts a fresh memo when
its structural keys far outnumber the snapshot's gangs, so no cache grows without bound.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from railforge.scheduler.model import Gang, Node, RunningGang, Snapshot, add_resources
from railforge.scheduler.placement import GangProfile, Static, gang_profile

PerNode = tuple[tuple[str, ...], list[tuple[str, Mapping[str, int]]], Mapping[str, int]]


class Memo:
    __slots__ = ("_gangs", "_key_ids", "_placed", "_profiles", "_static", "_use_versions")

    def __init__(self) -> None:
        # id -> profile, and id -> the gang itself, kept alive so that its id stays its own (two
        # dicts rather than one of pairs: a pair per gang is one more object for the collector)
        self._profiles: dict[int, GangProfile] = {}
        self._gangs: dict[int, Gang] = {}
        self._placed: dict[int, tuple[RunningGang, PerNode]] = {}
        # Structural keys (selectors, pod shapes) as small ints: the keys nest tuples and frozen
        # dataclasses, which Python re-hashes on every dict lookup; in passes over thousands of
        # gangs that hashing cost more than the placement work.
        self._key_ids: dict[tuple, int] = {}
        self._static: tuple[Sequence[Node], tuple, Static] | None = None
        # shared by every index of this memo, so no two hand out the same one (see Static.free)
        self._use_versions = itertools.count(1)

    def next_use_version(self) -> int:
        """A number no index of this memo has handed out for a node's use (``RunningIndex``)."""
        return next(self._use_versions)

    def object_entries(self) -> int:
        """Entries kept per snapshot object (``keep_only`` drops those of objects gone)."""
        return len(self._profiles) + len(self._placed)

    def key_entries(self) -> int:
        """Entries kept per structural key: the key ids and the static view's per-key caches. The
        indexes hold the ids, so these go only with the whole memo."""
        static = 0 if self._static is None else self._static[2].size()
        return len(self._key_ids) + static

    def keep_only(self, snapshot: Snapshot) -> None:
        """Forget the values of the gangs and running gangs the snapshot no longer holds."""
        running = {id(r) for r in snapshot.running}
        gangs = {id(g) for g in snapshot.pending} | {id(r.gang) for r in snapshot.running}
        self._profiles = {key: held for key, held in self._profiles.items() if key in gangs}
        self._gangs = {key: gang for key, gang in self._gangs.items() if key in gangs}
        self._placed = {key: held for key, held in self._placed.items() if key in running}

    def key_id(self, key: tuple) -> int:
        """A small int standing for a structural key; equal keys get the same one."""
        return self._key_ids.setdefault(key, len(self._key_ids))

    def profile(self, gang: Gang) -> GangProfile:
        """``placement.gang_profile``, worked out once per Gang object."""
        held = self._profiles.get(id(gang))
        if held is None:
            held = self._profiles[id(gang)] = gang_profile(gang, self.key_id)
            self._gangs[id(gang)] = gang
        return held

    def placed_by_node(self, running: RunningGang) -> PerNode:
        """(distinct node names, [(node name, summed requests of the gang's members there)], charge)
        of a running gang, worked out once per RunningGang object, so decide() does not walk every
        member of every running gang on every call. A gang of one pod (most) is read off its member
        each time instead: that costs less than keeping it (and leaves the collector less to walk)."""
        held = self._placed.get(id(running))
        if held is not None:
            return held[1]
        gang = running.gang  # no GangProfile: a running gang is not placed, only counted
        if len(gang.members) == 1 and len(running.placement) == 1:  # most gangs: its one member's (read-only) requests
            (node,) = running.placement.values()
            requests = gang.members[0].requests
            return ((node,), [(node, requests)], requests)
        by_member = {member.name: member.requests for member in gang.members}
        per_node: dict[str, dict[str, int]] = {}
        for member, node in running.placement.items():
            add_resources(per_node.setdefault(node, {}), by_member[member])
        if len(running.placement) == len(gang.members):
            charge = gang.total_requests()
        else:
            charge = {}
            for member in running.placement:
                add_resources(charge, by_member[member])
        result: PerNode = (tuple(per_node), list(per_node.items()), charge)
        self._placed[id(running)] = (running, result)
        return result

    def static(self, nodes: Sequence[Node], level_names: tuple[str, ...], label_keys: tuple[str, ...]) -> Static:
        """The static cluster view, reused while decide() is handed the same node tuple, as a
        simulator or controller does between node changes; rebuilt otherwise."""
        topology = (level_names, label_keys)
        held = self._static
        if held is not None and held[0] is nodes and held[1] == topology:
            return held[2]
        static = Static(nodes, level_names, label_keys)
        self._static = (nodes, topology, static)
        return static
