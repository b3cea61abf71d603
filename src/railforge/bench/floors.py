"""Floors per hardware class: ``floors.yml`` merged with an operator's ``railforge_benchmark_floors``.

Both have one shape::

    classes:                     # in an override the top level is the class mapping itself
      h100-sxm-cx7-ndr:
        gpu: ... nic: ... link: ...
        floors:
          ib_write_bw: {bw_avg_gbps: 375.0, message_bytes: 8388608, source: "https://..."}

An override merges per floor and per key (set ``bw_avg_gbps`` alone and the default's message size stays; its
source becomes "operator override"); a floor set to ``null`` is dropped; a new class needs all its keys.
Anything else (unknown class or floor kind, a figure that is not a positive number, a floor without source) is
a :class:`FloorsError` naming the variable path and what was expected, raised before anything is judged.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import yaml

DEFAULTS = Path(__file__).with_name("floors.yml")
VARIABLE = "railforge_benchmark_floors"
CLASS_KEYS = ("gpu", "nic", "link")


@dataclass(frozen=True)
class FloorKind:
    metric: str  # the key holding the figure
    unit: str
    ceiling: bool = False  # latency: the figure is a maximum
    sized: bool = True  # measured at message_bytes
    buffers: bool = False  # perftest: the figure is for buffers in host or GPU memory (``memory``)


KINDS = {
    "nccl_all_reduce_1node": FloorKind("busbw_gbps", "GB/s"),
    "nccl_all_reduce_multinode": FloorKind("busbw_gbps", "GB/s"),
    "ib_write_bw": FloorKind("bw_avg_gbps", "Gb/s", buffers=True),
    "ib_read_bw": FloorKind("bw_avg_gbps", "Gb/s", buffers=True),
    "ib_send_bw": FloorKind("bw_avg_gbps", "Gb/s", buffers=True),
    "ib_write_lat": FloorKind("t_typical_usec", "us", ceiling=True, buffers=True),
    "ib_read_lat": FloorKind("t_typical_usec", "us", ceiling=True, buffers=True),
    "ib_send_lat": FloorKind("t_typical_usec", "us", ceiling=True, buffers=True),
    "resnet50_per_gpu": FloorKind("images_per_sec", "images/s per GPU", sized=False),
    "resnet50_scaling": FloorKind("efficiency", "of linear", sized=False),
    # the CPU fallback of playbooks/benchmark.yml: allreduce (deploy/openmpi) over the pod network
    "mpi_allreduce": FloorKind("busbw_gbps", "GB/s"),
}


MEMORIES = ("gpu", "host")  # where a perftest floor's buffers are: GPU memory (--use_cuda) or host memory


class FloorsError(ValueError):
    """A floors table or override that does not have the expected shape."""


@dataclass(frozen=True)
class Floor:
    kind: str
    value: float
    source: str
    message_bytes: int | None = None
    memory: str | None = None  # perftest floors: "gpu" (--use_cuda, GPUDirect RDMA) or "host" buffers

    @property
    def spec(self) -> FloorKind:
        return KINDS[self.kind]


@dataclass(frozen=True)
class HardwareClass:
    name: str
    gpu: str
    nic: str
    link: str
    floors: dict[str, Floor]
    not_set: dict[str, str] = field(default_factory=dict)


def _positive(value: object, path: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise FloorsError(f"{path}: expected a positive number, got {value!r}")
    return value


def _message_bytes(value: object, path: str) -> int:
    size = _positive(value, path)
    if size != int(size):
        raise FloorsError(f"{path}: expected a whole number of bytes, got {value!r}")
    return int(size)


def _floor(kind: str, spec: dict, path: str) -> Floor:
    if kind not in KINDS:
        raise FloorsError(f"{path}: unknown floor kind; expected one of {', '.join(KINDS)}")
    if not isinstance(spec, dict):
        raise FloorsError(f"{path}: expected a mapping with {KINDS[kind].metric} and source, got {spec!r}")
    meta = KINDS[kind]
    allowed = (
        {meta.metric, "source"} | ({"message_bytes"} if meta.sized else set()) | ({"memory"} if meta.buffers else set())
    )
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise FloorsError(f"{path}: unknown key {unknown[0]!r}; expected {', '.join(sorted(allowed))}")
    if meta.metric not in spec:
        raise FloorsError(f"{path}.{meta.metric}: missing; expected a positive number ({meta.unit})")
    source = spec.get("source")
    if not isinstance(source, str) or not source.strip():
        raise FloorsError(f"{path}.source: expected a URL or 'measured: <file>', got {source!r}")
    message = spec.get("message_bytes")
    if meta.sized and message is None:
        raise FloorsError(f"{path}.message_bytes: missing; expected the message size the figure is for")
    memory = spec.get("memory", "host") if meta.buffers else None
    if memory not in (None, *MEMORIES):
        raise FloorsError(
            f"{path}.memory: expected gpu (--use_cuda) or host, the buffers the figure is for; got {memory!r}"
        )
    return Floor(
        kind=kind,
        value=float(_positive(spec[meta.metric], f"{path}.{meta.metric}")),
        source=" ".join(source.split()),
        message_bytes=_message_bytes(message, f"{path}.message_bytes") if meta.sized else None,
        memory=memory,
    )


def _merge(defaults: dict, overrides: object, origin: str) -> dict:
    if not isinstance(overrides, dict):
        raise FloorsError(f"{origin}: expected a mapping of hardware class -> floors, got {overrides!r}")
    merged = copy.deepcopy(defaults)
    for name, change in overrides.items():
        path = f"{origin}.{name}"
        if not isinstance(change, dict):
            raise FloorsError(f"{path}: expected a mapping with gpu, nic, link and floors, got {change!r}")
        target = merged.setdefault(name, {"floors": {}})
        for key, value in change.items():
            if key != "floors":
                target[key] = value
                continue
            if not isinstance(value, dict):
                raise FloorsError(f"{path}.floors: expected a mapping of floor kind -> figure, got {value!r}")
            for kind, spec in value.items():
                floors = target.setdefault("floors", {})
                if spec is None:
                    floors.pop(kind, None)
                elif isinstance(spec, dict) and isinstance(floors.get(kind), dict):
                    floors[kind] = {**floors[kind], "source": f"operator override ({origin})", **spec}
                else:
                    floors[kind] = spec
    return merged


def _hardware_class(name: str, raw: object, path: str) -> HardwareClass:
    if not isinstance(raw, dict):
        raise FloorsError(f"{path}: expected a mapping with gpu, nic, link and floors, got {raw!r}")
    for key in CLASS_KEYS:
        if not isinstance(raw.get(key), str):
            raise FloorsError(f"{path}.{key}: expected a string naming the {key}, got {raw.get(key)!r}")
    unknown = sorted(set(raw) - {*CLASS_KEYS, "floors", "not_set"})
    if unknown:
        raise FloorsError(f"{path}: unknown key {unknown[0]!r}; expected gpu, nic, link, floors, not_set")
    floors = raw.get("floors") or {}
    if not isinstance(floors, dict):
        raise FloorsError(f"{path}.floors: expected a mapping of floor kind -> figure, got {floors!r}")
    return HardwareClass(
        name=name,
        gpu=raw["gpu"],
        nic=raw["nic"],
        link=raw["link"],
        floors={kind: _floor(kind, spec, f"{path}.floors.{kind}") for kind, spec in floors.items()},
        not_set={k: " ".join(str(v).split()) for k, v in (raw.get("not_set") or {}).items() if k not in floors},
    )


def default_classes() -> dict:
    return yaml.safe_load(DEFAULTS.read_text())["classes"]


def load_floors(name: str, overrides: object = None, origin: str = VARIABLE) -> HardwareClass:
    """The floors of hardware class ``name``: defaults merged with ``overrides`` (validated whole)."""
    classes = default_classes() if overrides is None else _merge(default_classes(), overrides, origin)
    overridden = overrides if isinstance(overrides, dict) else {}  # _merge refuses any other override
    for changed in overridden:  # a mistake in any overridden class is reported, not only in this one
        _hardware_class(changed, classes[changed], f"{origin}.{changed}")
    if name not in classes:
        raise FloorsError(f"hardware class {name!r} is not known; expected one of {', '.join(sorted(classes))}")
    where = f"{origin}.{name}" if name in overridden else f"{DEFAULTS.name}:{name}"
    return _hardware_class(name, classes[name], where)


def read_overrides(path: Path) -> object:
    """An override file: a group_vars-style file with ``railforge_benchmark_floors:`` or that mapping alone."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise FloorsError(f"{path}: not valid YAML ({exc})") from None
    if isinstance(data, dict) and VARIABLE in data:
        return data[VARIABLE]
    return data
