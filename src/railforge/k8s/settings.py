"""The adapter's settings: a YAML file of the keys below, every one optional, checked before anything starts.

A bad setting is refused in one line that names the key, what it holds and what was expected
(``SettingsError``). ``policy`` takes a preset name and any SchedulerConfig field of the core.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import yaml

from railforge.scheduler import SchedulerConfig

LABEL_PREFIX = "railforge.io/"
QUEUE_KEY = LABEL_PREFIX + "queue"


@dataclass(frozen=True)
class TopologyLevel:
    """One level of the topology, widest first: the node labels that name a node's domain at this level (the
    first one a node carries wins) and the values that mean "this node alone" (the hardware facts write
    ``railforge.io/nvlink-domain: node`` for NVLink inside one node, ``none`` for no NVLink)."""

    name: str
    labels: tuple[str, ...]
    per_node_values: tuple[str, ...] = ()


DEFAULT_TOPOLOGY = (
    TopologyLevel("spine", ("railforge.io/spine", "fabric.topograph.run/tier-1", "network.topology.nvidia.com/spine")),
    TopologyLevel("leaf", ("railforge.io/leaf", "fabric.topograph.run/tier-0", "network.topology.nvidia.com/leaf")),
    TopologyLevel(
        "nvlink",
        (
            "railforge.io/nvlink-domain",
            "accelerator.topograph.run/domain",
            "network.topology.nvidia.com/accelerator",
            "nvidia.com/gpu.clique",
        ),
        per_node_values=("node", "none"),
    ),
)


@dataclass(frozen=True)
class LeaderElection:
    enabled: bool = True
    namespace: str = "railforge-system"
    lease_name: str = ""  # empty: the scheduler's name
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0


@dataclass(frozen=True)
class Settings:
    scheduler_name: str = "railforge"
    # the queue of a gang whose PodGroup, pods and namespace name none
    default_queue: str = "default"
    # label (or annotation) on a PodGroup, a pod or a namespace that names the queue
    queue_key: str = QUEUE_KEY
    # only nodes matching this label selector are scheduled on ("" = every node): comma-separated terms
    # key=value, key!=value, key (has it), !key (lacks it), all of which must hold
    node_selector: str = ""
    min_period_seconds: float = 0.1  # at most one decide() per period
    resync_seconds: float = 30.0  # decide() at least this often while gangs wait
    bind_workers: int = 16  # parallel binding calls (and pooled connections)
    # grace period of the pods an eviction, restart or failure deletes; None: each pod's own
    eviction_grace_seconds: int | None = None
    event_interval_seconds: float = 60.0  # the same reason on an object is repeated as an Event at most this often
    # waiting gangs behind the reserved ones given an expected start (railforge.scheduler.expected); 0: none
    expected_start_depth: int = 32
    # a gang restarted after members failed avoids their nodes this long, where it can fit elsewhere; 0: never
    avoid_failed_nodes_seconds: float = 1800.0
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    topology: tuple[TopologyLevel, ...] = DEFAULT_TOPOLOGY
    policy: SchedulerConfig = field(default_factory=SchedulerConfig)

    @property
    def lease_name(self) -> str:
        return self.leader_election.lease_name or self.scheduler_name

    def selects(self, labels: dict[str, str]) -> bool:
        """Whether a node with these labels is one the scheduler may use (``node_selector``)."""
        return all(_term_holds(term, labels) for term in _selector_terms(self.node_selector))


_SELECTOR_TERM = re.compile(r"^(!?)([A-Za-z0-9][-A-Za-z0-9_./]*)(?:(!=|==|=)([-A-Za-z0-9_.]*))?$")


def _selector_terms(selector: str) -> list[tuple[str, str, str]]:
    """(key, operator, value) terms of an equality-based label selector; ValueError for anything else."""
    terms = []
    for text in filter(None, (part.strip() for part in selector.split(","))):
        match = _SELECTOR_TERM.match(text)
        if match is None or (match.group(1) and match.group(3)):
            raise ValueError(f"{text!r}; expected key=value, key!=value, key or !key")
        negated, key, operator, value = match.groups()
        terms.append((key, "!" if negated else (operator or "exists").replace("==", "="), value or ""))
    return terms


def _term_holds(term: tuple[str, str, str], labels: dict[str, str]) -> bool:
    key, operator, value = term
    if operator == "exists":
        return key in labels
    if operator == "!":
        return key not in labels
    if operator == "=":
        return labels.get(key) == value
    return labels.get(key) != value


class SettingsError(ValueError):
    """A setting that cannot be used; the message is one line naming the key."""


def _number(key: str, value: object, minimum: float, strict: bool) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value < minimum
        or (strict and value == minimum)
    ):
        raise SettingsError(f"{key} is {value!r}; expected a number {'>' if strict else '>='} {minimum:g}")
    return float(value)


def _text(key: str, value: object, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value):
        raise SettingsError(f"{key} is {value!r}; expected a {'' if empty else 'non-empty '}string")
    return value


def _mapping(key: str, value: object) -> dict:
    if not isinstance(value, dict):
        raise SettingsError(f"{key} is {value!r}; expected a mapping")
    return value


def _known(key: str, given: dict, allowed: typing.Iterable[str]) -> None:
    allowed = sorted(allowed)
    for name in given:
        if name not in allowed:
            where = f"{key}.{name}" if key else name
            raise SettingsError(f"{where} is not a setting; expected one of: {', '.join(allowed)}")


def _leader_election(raw: object) -> LeaderElection:
    given = _mapping("leader_election", raw)
    _known("leader_election", given, (f.name for f in fields(LeaderElection)))
    values: dict[str, typing.Any] = {}  # LeaderElection's keyword arguments, each checked for its field
    for name, value in given.items():
        key = f"leader_election.{name}"
        if name == "enabled":
            if not isinstance(value, bool):
                raise SettingsError(f"{key} is {value!r}; expected true or false")
            values[name] = value
        elif name in ("namespace", "lease_name"):
            values[name] = _text(key, value, empty=name == "lease_name")
        else:
            values[name] = _number(key, value, 0, strict=True)
    election = LeaderElection(**values)
    if not election.retry_period_seconds < election.renew_deadline_seconds < election.lease_duration_seconds:
        raise SettingsError(
            "leader_election: expected retry_period_seconds < renew_deadline_seconds < lease_duration_seconds, got "
            f"{election.retry_period_seconds:g}, {election.renew_deadline_seconds:g}, "
            f"{election.lease_duration_seconds:g}"
        )
    return election


def _topology(raw: object) -> tuple[TopologyLevel, ...]:
    if not isinstance(raw, list) or not raw:
        raise SettingsError(f"topology is {raw!r}; expected a non-empty list of levels, widest first")
    levels = []
    for index, entry in enumerate(raw):
        key = f"topology[{index}]"
        given = _mapping(key, entry)
        _known(key, given, ("name", "labels", "per_node_values"))
        name = _text(f"{key}.name", given.get("name"))
        labels = given.get("labels")
        if not isinstance(labels, list) or not labels or not all(isinstance(label, str) and label for label in labels):
            raise SettingsError(f"{key}.labels is {labels!r}; expected a non-empty list of node label keys")
        per_node = given.get("per_node_values", [])
        if not isinstance(per_node, list) or not all(isinstance(value, str) for value in per_node):
            raise SettingsError(f"{key}.per_node_values is {per_node!r}; expected a list of label values")
        levels.append(TopologyLevel(name, tuple(labels), tuple(per_node)))
    names = [level.name for level in levels]
    if len(set(names)) != len(names):
        raise SettingsError(f"topology level names repeat in {names}; expected unique names")
    return tuple(levels)


def _policy(raw: object, topology: tuple[TopologyLevel, ...]) -> SchedulerConfig:
    given = dict(_mapping("policy", raw))
    preset = given.pop("preset", "railforge")
    settable = {f.name for f in fields(SchedulerConfig)} - {"topology_label_keys", "topology_level_names"}
    _known("policy", given, {*settable, "preset"})
    try:
        config = SchedulerConfig.preset(preset, **given)
    except (ValueError, TypeError) as error:
        raise SettingsError(f"policy: {error}") from None
    names = tuple(level.name for level in topology)
    # the adapter hands the core each node's path itself; the keys only keep the config consistent
    return replace(config, topology_level_names=names, topology_label_keys=tuple(level.labels[0] for level in topology))


def settings_from_mapping(raw: object) -> Settings:
    given = dict(_mapping("settings", raw if raw is not None else {}))
    _known("", given, (f.name for f in fields(Settings)))
    values: dict[str, typing.Any] = {}  # Settings' keyword arguments, each checked for its field
    for name in ("scheduler_name", "default_queue", "queue_key"):
        if name in given:
            values[name] = _text(name, given[name])
    if "node_selector" in given:
        selector = _text("node_selector", given["node_selector"], empty=True)
        try:
            _selector_terms(selector)
        except ValueError as error:
            raise SettingsError(f"node_selector term {error}") from None
        values["node_selector"] = selector
    for name, strict in (
        ("min_period_seconds", False),
        ("resync_seconds", True),
        ("event_interval_seconds", False),
        ("avoid_failed_nodes_seconds", False),
    ):
        if name in given:
            values[name] = _number(name, given[name], 0, strict)
    for name, low, high in (("bind_workers", 1, 256), ("expected_start_depth", 0, 1024)):
        if name in given:
            number = given[name]
            if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
                raise SettingsError(f"{name} is {number!r}; expected a whole number from {low} to {high}")
            values[name] = number
    if given.get("eviction_grace_seconds") is not None:
        grace = given["eviction_grace_seconds"]
        if isinstance(grace, bool) or not isinstance(grace, int) or grace < 0:
            raise SettingsError(f"eviction_grace_seconds is {grace!r}; expected null or a whole number of seconds >= 0")
        values["eviction_grace_seconds"] = grace
    if "leader_election" in given:
        values["leader_election"] = _leader_election(given["leader_election"])
    topology = _topology(given["topology"]) if "topology" in given else DEFAULT_TOPOLOGY
    values["topology"] = topology
    values["policy"] = _policy(given.get("policy", {}), topology)
    return Settings(**values)


def load_settings(path: Path | None) -> Settings:
    """Settings from a YAML file (None: every default)."""
    if path is None:
        return settings_from_mapping({})
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise SettingsError(f"cannot read settings file {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise SettingsError(f"settings file {path} is not text (UTF-8): expected YAML") from None
    except yaml.YAMLError as error:
        raise SettingsError(f"settings file {path} is not YAML: {str(error).splitlines()[0]}") from None
    return settings_from_mapping(raw)
