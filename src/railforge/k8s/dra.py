"""Dynamic Resource Allocation (``resource.k8s.io/v1``): the devices a pod's ResourceClaims take, allocated with its
gang.

Drivers publish devices in ResourceSlices; a DeviceClass and a claim's request select them with CEL expressions; a
claim's constraints ask that the devices of some requests share an attribute (a GPU and the NIC on its PCIe root).
What the scheduler does with them, as kube-scheduler's DynamicResources plugin does for one pod, but for every pod of
a gang at once: it allocates each claim a pod uses on the node the pod is placed on, from devices no other claim
holds, writes the allocation and the pod's reservation on the claim, and only then binds; a claim several pods
share is allocated once. Releasing is Kubernetes' own: once a claim's pods are gone the resource-claim controller
drops their reservations and the allocation.

The covered subset (anything else keeps the gang waiting with a reason naming the field):
- requests: ``exactly`` and ``firstAvailable`` (the first alternative that can be allocated, its results named
  request/subrequest), ``allocationMode`` ``ExactCount`` (``count``, 1 by default) or ``All`` (every matching device
  of the node, none held by another claim); not ``adminAccess``, capacity requests, device taints' tolerations;
- constraints: ``matchAttribute`` and ``distinctAttribute``, naming requests or subrequests;
- configuration: the classes' and the claim's own ``config``, copied into the allocation for the drivers;
- devices: in slices with ``nodeName`` (on that node) or ``allNodes`` (on every node); the newest generation of
  each pool; a device tainted NoSchedule or NoExecute is never given;
- CEL, through cel-python (the version requirements-dev.txt pins): the standard language (operators, ``in``,
  ``size``, ``startsWith``, ``endsWith``, ``contains``, ``matches``, ``has``, the macros) over ``device.driver`` and
  ``device.attributes[domain][name]`` (int, bool and string attributes; a version as its string). Not read:
  ``device.capacity`` and Kubernetes' CEL extensions (``quantity``, ``semver``, ``compareTo``...): an expression
  using one is refused as unsupported. An expression that fails on a device (an attribute it lacks) fails the claim,
  as with kube-scheduler: guard it with ``"name" in device.attributes[domain]``.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import celpy
from celpy import celtypes
from kubernetes.client import ApiException

from railforge.k8s import rest

GROUP = "resource.k8s.io"
VERSION = "v1"
API = f"/apis/{GROUP}/{VERSION}"
# kube-scheduler's finalizer on a claim it allocated: the claim is not deleted while its devices are allocated
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
UNCOUNTED = 1 << 20  # a node's room for what is not counted per node
MAX_RESULTS = 32  # devices one claim's allocation may hold (the API's limit)
MAX_RESERVED = 256  # pods one claim may be reserved for (the API's limit)
SEARCH_STEPS = 20_000  # device combinations one allocation search tries before it gives up
EXTENSIONS = ("quantity", "semver", "compareTo", "isGreaterThan", "isLessThan", "isSemver", "isQuantity")


def served(api_client) -> bool:
    """Whether the API server serves resource.k8s.io/v1 (GA, on by default since 1.34)."""
    try:
        resources = rest.call(api_client, "GET", API).get("resources") or []
    except ApiException:
        return False
    return any(resource.get("name") == "resourceslices" for resource in resources)


class ClaimError(ValueError):
    """Why a gang's claims cannot be allocated now: ``code`` is the reason code (``input.*`` for a claim written
    outside the covered subset, ``dra.*`` for one that waits), the text names the claim and the field or shortfall."""

    def __init__(self, code: str, text: str):
        super().__init__(text)
        self.code = code


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    node: str | None  # None: every node reaches it (a slice with allNodes)
    attributes: Mapping[str, Any]  # fully qualified name (domain/name) -> value
    version: str = ""  # its slice's resourceVersion: what a selector said of it holds until the slice changes

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)

    @cached_property
    def activation(self) -> dict:
        domains: dict[str, dict[str, Any]] = {}
        for qualified, value in self.attributes.items():
            domain, name = qualified.rsplit("/", 1)
            domains.setdefault(domain, {})[name] = value
        attributes = _Domains({celtypes.StringType(d): celpy.json_to_cel(names) for d, names in domains.items()})
        device = celtypes.MapType({celtypes.StringType("driver"): celtypes.StringType(self.driver)})
        device[celtypes.StringType("attributes")] = attributes
        return {"device": device}


class _Domains(celtypes.MapType):
    """``device.attributes``: a domain the device has no attribute of is an empty map, as Kubernetes has it (so
    ``"name" in device.attributes[domain]`` holds on any device)."""

    def __getitem__(self, key):
        return super().__getitem__(key) if key in self else celtypes.MapType()


def _attribute(value: Mapping[str, Any]) -> Any:
    for kind in ("int", "bool", "string", "version"):
        if kind in value:
            return value[kind]
    return None


def devices_of(slices: Iterable[dict]) -> list[Device]:
    """The devices of the newest generation of each pool; slices with a node selector (or per-device node
    selection) are not read."""
    newest: dict[tuple[str, str], int] = {}
    for obj in slices:
        spec = obj.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (spec.get("driver", ""), pool.get("name", ""))
        newest[key] = max(newest.get(key, 0), int(pool.get("generation") or 0))
    devices = []
    for obj in slices:
        spec = obj.get("spec") or {}
        pool = spec.get("pool") or {}
        driver = spec.get("driver", "")
        if int(pool.get("generation") or 0) != newest[(driver, pool.get("name", ""))]:
            continue
        if not spec.get("nodeName") and not spec.get("allNodes"):
            continue
        for device in spec.get("devices") or []:
            if any(taint.get("effect") in ("NoSchedule", "NoExecute") for taint in device.get("taints") or []):
                continue  # tainted: only a claim tolerating it may have it, and tolerations are not read
            attributes = {
                name if "/" in name else f"{driver}/{name}": _attribute(value)
                for name, value in (device.get("attributes") or {}).items()
            }
            version = (obj.get("metadata") or {}).get("resourceVersion", "")
            devices.append(
                Device(driver, pool.get("name", ""), device["name"], spec.get("nodeName"), attributes, version)
            )
    return devices


@functools.cache
def cel_environment() -> celpy.Environment:
    """The CEL environment every selector compiles in. Its first building builds the CEL parser (about 0.1 s): the
    adapter does that when it starts, not in the pass that meets the first claim."""
    return celpy.Environment()


class Program:
    """One CEL expression, compiled once a pass, and what it said of each device."""

    def __init__(self, expression: str):
        self.expression = expression
        self.error: ClaimError | None = None
        # device -> (its slice's resourceVersion, the verdict then): one entry a device, replaced when it changes
        self.results: dict[tuple[str, str, str], tuple[str, bool | str]] = {}
        used = [name for name in EXTENSIONS if f"{name}(" in expression]
        if "device.capacity" in expression or used:
            what = "device.capacity" if not used else f"{used[0]}()"
            self.error = ClaimError("input.unsupported", f"uses {what}, which this scheduler's CEL does not provide")
            return
        environment = cel_environment()
        try:
            self.program = environment.program(environment.compile(expression))
        except celpy.CELParseError as error:
            self.error = ClaimError("input.invalid", f"is not CEL: {_first_line(error)}")
        except Exception as error:  # a nesting too deep for the parser, for one: refused, never a failed pass
            self.error = ClaimError("input.unsupported", f"cannot be compiled here: {_first_line(error)}")

    def result(self, device: Device) -> bool | str:
        """True or False, or the error the expression met on ``device``."""
        known = self.results.get(device.key)
        if known is not None and known[0] == device.version:
            return known[1]
        verdict: bool | str
        try:
            value = self.program.evaluate(device.activation)
            verdict = bool(value) if isinstance(value, celtypes.BoolType) else "not a boolean"
        except celpy.CELEvalError as error:
            verdict = _first_line(error.args[0])
        except Exception as error:  # RecursionError on a deep expression: the claim fails, the pass goes on
            verdict = _first_line(error)
        self.results[device.key] = (device.version, verdict)
        return verdict


def _first_line(error: object) -> str:
    """An error's first line, cut to 200 characters (celpy's can carry its whole activation)."""
    return str(error).splitlines()[0][:200] if str(error) else type(error).__name__


class Selector:
    """A CEL selector where a claim or class has it."""

    def __init__(self, program: Program, where: str):
        self.program = program
        self.where = where
        if program.error is not None:
            raise ClaimError(program.error.code, f"{where} {program.expression!r} {program.error}")

    @property
    def expression(self) -> str:
        return self.program.expression

    def matches(self, device: Device) -> bool:
        result = self.program.result(device)
        if isinstance(result, str):
            raise ClaimError(
                "dra.selector-error", f"{self.where} {self.expression!r} fails on device {device.name}: {result}"
            )
        return result


@dataclass(frozen=True)
class Request:
    name: str  # as the allocation's results name it: the request's, or request/subrequest of a firstAvailable
    device_class: str
    count: int  # with every_one: 0 (as many as match)
    selectors: tuple[Selector, ...]
    every_one: bool = False  # allocationMode All: every matching device of the node, none of them held
    class_config: tuple[dict, ...] = ()  # its DeviceClass's spec.config

    @property
    def parent(self) -> str:
        """The claim's request it is (or is an alternative of): what constraints name."""
        return self.name.split("/")[0]


@dataclass(frozen=True)
class Constraint:
    requests: tuple[str, ...]  # empty: every request of the claim
    attribute: str
    distinct: bool = False  # distinctAttribute: no two devices share a value; else matchAttribute: all share one


@dataclass
class Claim:
    """A ResourceClaim as the scheduler reads it."""

    namespace: str
    name: str
    obj: dict
    requests: tuple[tuple[Request, ...], ...]  # each request's alternatives, in order (one but for firstAvailable)
    constraints: tuple[Constraint, ...]
    signature: str  # what two claims asking the same of a node share
    config: tuple[dict, ...] = ()  # its own spec.devices.config

    @property
    def classes(self) -> set[str]:
        return {alternative.device_class for alternatives in self.requests for alternative in alternatives}

    @property
    def label(self) -> str:
        return f"ResourceClaim {self.namespace}/{self.name}"

    @property
    def allocation(self) -> dict | None:
        return (self.obj.get("status") or {}).get("allocation")

    @property
    def reserved_for(self) -> set[str]:
        return {ref.get("uid", "") for ref in (self.obj.get("status") or {}).get("reservedFor") or []}


def allocated_devices(obj: dict) -> set[tuple[str, str, str]]:
    """The devices a claim object's allocation holds."""
    allocation = (obj.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return {(r.get("driver", ""), r.get("pool", ""), r.get("device", "")) for r in results}


def read_claim(obj: dict, classes: Mapping[str, dict], programs: dict[str, Program]) -> Claim:
    """A claim's requests and constraints (``programs``: the pass's compiled expressions, by text); ClaimError when
    it asks what the covered subset lacks."""
    meta = obj["metadata"]
    label = f"ResourceClaim {meta['namespace']}/{meta['name']}"
    devices = (obj.get("spec") or {}).get("devices") or {}
    requests: list[tuple[Request, ...]] = []
    for index, request in enumerate(devices.get("requests") or []):
        where = f"{label} spec.devices.requests[{index}]"
        if "exactly" in request:
            requests.append((_request(request["name"], request["exactly"], f"{where}.exactly", classes, programs),))
        elif request.get("firstAvailable"):
            requests.append(
                tuple(
                    _request(f"{request['name']}/{sub['name']}", sub, f"{where}.firstAvailable[{i}]", classes, programs)
                    for i, sub in enumerate(request["firstAvailable"])
                )
            )
        else:
            raise ClaimError("input.invalid", f"{where} has neither exactly nor firstAvailable")
    constraints = []
    for index, constraint in enumerate(devices.get("constraints") or []):
        attribute = constraint.get("matchAttribute") or constraint.get("distinctAttribute")
        if not attribute:
            raise ClaimError(
                "input.invalid", f"{label} spec.devices.constraints[{index}] has no matchAttribute or distinctAttribute"
            )
        distinct = "matchAttribute" not in constraint
        constraints.append(Constraint(tuple(constraint.get("requests") or ()), attribute, distinct))
    config = tuple({"source": "FromClaim", **entry} for entry in devices.get("config") or [])
    text = repr(
        (
            [
                [(r.name, r.device_class, r.count, r.every_one, [s.expression for s in r.selectors]) for r in request]
                for request in requests
            ],
            [(c.requests, c.attribute, c.distinct) for c in constraints],
        )
    )
    signature = hashlib.sha256(text.encode()).hexdigest()[:8]
    return Claim(meta["namespace"], meta["name"], obj, tuple(requests), tuple(constraints), signature, config)


def _request(name: str, spec: dict, where: str, classes: Mapping[str, dict], programs: dict[str, Program]) -> Request:
    """One request (an ``exactly``, or one alternative of a ``firstAvailable``) with its class's selectors."""
    mode = spec.get("allocationMode", "ExactCount")
    for unsupported in ("adminAccess", "capacity", "tolerations"):
        if spec.get(unsupported):
            raise ClaimError("input.unsupported", f"{where}.{unsupported} is set, which it does not allocate")
    if mode not in ("ExactCount", "All"):
        raise ClaimError("input.invalid", f"{where}.allocationMode is {mode}; expected ExactCount or All")
    class_name = spec.get("deviceClassName", "")
    if class_name not in classes:
        raise ClaimError("dra.class-missing", f"{where} names DeviceClass {class_name!r}, which does not exist")
    class_spec = classes[class_name].get("spec") or {}
    sources = (
        (f"DeviceClass {class_name} spec", class_spec.get("selectors") or []),
        (where, spec.get("selectors") or []),
    )
    selectors = tuple(
        Selector(_program(programs, selector["cel"]["expression"]), f"{what}.selectors[{i}].cel.expression")
        for what, chosen in sources
        for i, selector in enumerate(chosen)
        if "cel" in selector
    )
    every_one = mode == "All"
    count = 0 if every_one else int(spec.get("count") or 1)
    return Request(name, class_name, count, selectors, every_one, tuple(class_spec.get("config") or ()))


def _program(programs: dict[str, Program], expression: str) -> Program:
    if expression not in programs:
        programs[expression] = Program(expression)
    return programs[expression]


class Devices:
    """Every published device and which claims hold them: what a node can still give."""

    def __init__(
        self,
        slices: Iterable[dict],
        claims: Iterable[dict],
        classes: Iterable[dict],
        programs: dict[str, Program] | None = None,
    ):
        self.by_node: dict[str | None, list[Device]] = {}
        for device in devices_of(list(slices)):
            self.by_node.setdefault(device.node, []).append(device)
        self.claims = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
        self.classes = {c["metadata"]["name"]: c for c in classes}
        self.held: dict[tuple[str, str, str], tuple[str, str]] = {}  # device -> the claim holding it
        for key, obj in self.claims.items():
            for held in allocated_devices(obj):
                self.held[held] = key
        # compiled CEL by text, with what each said of each device: kept from pass to pass by the caller
        self.programs: dict[str, Program] = {} if programs is None else programs
        # (slot, node) -> pods of that kind its free devices hold; (class, node) -> its free devices of that class
        self.rooms: dict[tuple[str, str], int] = {}
        self.tables: dict[str, list[str]] = {}  # slot -> the nodes that hold a pod of that kind (rooms_of)

    @cached_property
    def allocated(self) -> set[tuple[str, str, str]]:
        """The devices claims hold."""
        return set(self.held)

    def room(self, slot: str, claims: list[Claim], node: str) -> int:
        """How many pods whose own claims are ``claims`` (their ``slot``) the free devices of ``node`` hold; once
        a pass for each slot and node."""
        if (slot, node) not in self.rooms:
            reachable = self.reachable(node)
            self.rooms[(slot, node)] = node_slots(claims, reachable, self.allocated, len(reachable))
        return self.rooms[(slot, node)]

    def class_room(self, name: str, node: str) -> int:
        """The free devices of DeviceClass ``name`` on ``node``; a large number for a class some device every node
        reaches belongs to (a per-node count would not hold it)."""
        if (name, node) not in self.rooms:
            spec = (self.classes.get(name) or {}).get("spec") or {}
            programs = [
                _program(self.programs, s["cel"]["expression"]) for s in spec.get("selectors") or [] if "cel" in s
            ]

            def member(device: Device) -> bool:
                return all(p.error is None and p.result(device) is True for p in programs)

            if any(member(device) for device in self.everywhere()):
                self.rooms[(name, node)] = UNCOUNTED
            else:
                free = [d for d in self.by_node.get(node, []) if d.key not in self.allocated]
                self.rooms[(name, node)] = sum(1 for device in free if member(device))
        return self.rooms[(name, node)]

    def rooms_of(self, slot: str, claims: list[Claim], needs: Mapping[str, int], nodes: list[str]) -> dict[str, dict]:
        """Each of ``nodes``' room for pods whose own claims are ``claims`` (``slot``; ``needs``: what such a pod asks,
        its slot and its devices by class); ``tables[slot]`` keeps the nodes that hold one such pod."""
        rooms = {}
        for node in nodes:
            room = {slot: self.room(slot, claims, node)}
            room.update({need: self.class_room(need.removeprefix("devices/"), node) for need in needs if need != slot})
            rooms[node] = room
        self.tables[slot] = [node for node, room in rooms.items() if all(room[n] >= a for n, a in needs.items())]
        return rooms

    def claim(self, namespace: str, name: str) -> Claim | None:
        """The claim, read (ClaimError when it asks what is not covered), or None when it does not exist."""
        obj = self.claims.get((namespace, name))
        return None if obj is None else read_claim(obj, self.classes, self.programs)

    def reachable(self, node: str) -> list[Device]:
        return self.by_node.get(node, []) + self.everywhere()

    def everywhere(self) -> list[Device]:
        """The devices every node reaches (slices with allNodes)."""
        return self.by_node.get(None, [])


def allocate(claim: Claim, devices: list[Device], taken: set[tuple[str, str, str]]) -> dict[str, list[Device]] | None:
    """Request name -> the devices ``claim`` gets from ``devices`` not in ``taken``, keeping its constraints; None
    when they cannot. Each request's matching devices are tried in order, a constraint's value fixed by the first
    device it covers."""
    alternatives = [alternative for request in claim.requests for alternative in request]
    every = {r.name: [d for d in devices if all(s.matches(d) for s in r.selectors)] for r in alternatives}
    matching = {name: [d for d in found if d.key not in taken] for name, found in every.items()}

    def constrained(request: Request) -> list[tuple[int, Constraint]]:
        return [
            (i, c)
            for i, c in enumerate(claim.constraints)
            if not c.requests or request.parent in c.requests or request.name in c.requests
        ]

    steps = itertools.count()

    def search(index: int, used: set, values: dict[int, Any]) -> dict[str, list[Device]] | None:
        if index == len(claim.requests):
            return {}
        for request in claim.requests[index]:  # the first alternative that can be allocated
            free = [d for d in matching[request.name] if d.key not in used]
            if request.every_one and (not every[request.name] or len(free) < len(every[request.name])):
                continue  # All: at least one device, and none of them held
            rules = constrained(request)
            for chosen in itertools.combinations(free, len(free) if request.every_one else request.count):
                if next(steps) > SEARCH_STEPS:
                    return None  # constraints no combination keeps, among many devices: given up, not a proof
                state = dict(values)
                if any(not _keeps(rule, chosen, state, key) for key, rule in rules):
                    continue
                rest = search(index + 1, used | {d.key for d in chosen}, state)
                if rest is not None:
                    return {request.name: list(chosen), **rest}
        return None

    return search(0, set(), {})


def _keeps(rule: Constraint, chosen: Iterable[Device], state: dict[int, Any], key: int) -> bool:
    """Whether ``chosen`` keeps ``rule`` beside the devices already chosen, whose part of it ``state[key]`` holds (a
    matchAttribute's value, set by the first device; a distinctAttribute's values so far). Every device it covers
    must have the attribute."""
    for device in chosen:
        value = device.attributes.get(rule.attribute)
        if value is None:  # lacking it, or of a type not read (a list)
            return False
        if rule.distinct:
            seen = state.get(key, frozenset())
            if value in seen:
                return False
            state[key] = seen | {value}
        elif state.setdefault(key, value) != value:
            return False
    return True


def shortfall(claim: Claim, devices: list[Device], taken: set[tuple[str, str, str]]) -> str:
    """Why ``claim`` cannot be allocated from ``devices``: the first request short of matching free devices, or
    its constraints."""
    for alternatives in claim.requests:
        request = alternatives[0]  # what it asks first
        found = [d for d in devices if all(s.matches(d) for s in request.selectors)]
        free = sum(1 for d in found if d.key not in taken)
        if request.every_one and (not found or free < len(found)):
            return (
                f"request {request.name} needs every device of class {request.device_class} matching its "
                f"selectors ({len(found)}), {free} free"
            )
        if free < request.count:
            return (
                f"request {request.name} needs {request.count} device(s) of class {request.device_class} matching "
                f"its selectors, {free} free"
            )
    attributes = ", ".join(sorted({c.attribute for c in claim.constraints}))
    return f"no free devices share {attributes} as its constraints ask"


def allocation_status(claim: Claim, chosen: dict[str, list[Device]], node: str | None, pods: Iterable[dict]) -> dict:
    """The claim's status once allocated on ``node`` (None: devices every node reaches) and reserved for
    ``pods``, as the API server takes it."""
    results = [
        {"request": request, "driver": d.driver, "pool": d.pool, "device": d.name}
        for request, devices in chosen.items()
        for d in devices
    ]
    by_name = {alternative.name: alternative for alternatives in claim.requests for alternative in alternatives}
    config = [
        {"source": "FromClass", "requests": [name], **entry} for name in chosen for entry in by_name[name].class_config
    ]
    config += claim.config
    allocation: dict = {"devices": {"results": results, **({"config": config} if config else {})}}
    if node is not None:
        allocation["nodeSelector"] = {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
        }
    return {"allocation": allocation, "reservedFor": reservations(claim, pods)}


def reservations(claim: Claim, pods: Iterable[dict]) -> list[dict]:
    """The claim's reservedFor with ``pods`` added."""
    current = list((claim.obj.get("status") or {}).get("reservedFor") or [])
    known = {ref.get("uid") for ref in current}
    for pod in pods:
        if pod["metadata"]["uid"] not in known:
            current.append({"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]})
    return current


def unprotected(devices: Devices, namespace: str, pods: list[dict]) -> dict[tuple[str, str], dict]:
    """The ResourceClaims ``pods`` use, by (namespace, name), that do not have kube-scheduler's delete protection
    yet, are not allocated and not being deleted: given it while their gang waits, their bind writes only their
    allocations. Kubernetes' resource-claim controller takes it off a claim deleted unallocated, so it never keeps
    one alive."""
    found: dict[tuple[str, str], dict] = {}
    for pod in pods:
        for _, name in claim_names(pod):
            if name is None:
                continue  # not made from its template yet
            obj = devices.claims.get((namespace, name))
            if obj is None or obj["metadata"].get("deletionTimestamp") or (obj.get("status") or {}).get("allocation"):
                continue
            if DELETE_PROTECTION not in (obj["metadata"].get("finalizers") or []):
                found[(namespace, name)] = obj
    return found


def claim_names(pod: dict) -> list[tuple[str, str | None]]:
    """Each of the pod's ``spec.resourceClaims``: its entry name and the ResourceClaim it uses (a template's claim
    as the pod's status names it; None until the resource-claim controller made it). A template entry the status
    lists without a claim needs none, and is left out."""
    generated = {
        entry.get("name"): entry.get("resourceClaimName")
        for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    out = []
    for entry in pod["spec"].get("resourceClaims") or []:
        if entry.get("resourceClaimName"):
            out.append((entry.get("name", ""), entry["resourceClaimName"]))
        elif entry.get("name") not in generated or generated[entry.get("name")]:
            out.append((entry.get("name", ""), generated.get(entry.get("name"))))
    return out


@dataclass
class GangClaims:
    """The claims of a pending gang's pods: by pod name, and which of them several pods share or were allocated
    before."""

    by_pod: dict[str, list[Claim]] = field(default_factory=dict)
    shared: set[tuple[str, str]] = field(default_factory=set)  # (namespace, name)
    extra: dict[str, dict[str, int]] = field(default_factory=dict)  # pod -> what it asks of nodes for its own claims

    def own(self, pod: str) -> list[Claim]:
        """The pod's claims that are its own: allocated with it, on its node."""
        return [c for c in self.by_pod.get(pod, []) if (c.namespace, c.name) not in self.shared]

    def slot_name(self, pod: str) -> str | None:
        """The resource name of "room for this pod's own claims" on a node (pods asking the same share it)."""
        own = self.own(pod)
        if not own:
            return None
        classes = "+".join(sorted({name for claim in own for name in claim.classes}))
        digest = hashlib.sha256("".join(sorted(c.signature for c in own)).encode()).hexdigest()[:6]
        return f"claims/{classes}#{digest}"


def class_counts(claims: list[Claim]) -> dict[str, int]:
    """The devices of each class ``claims`` ask for by count (firstAvailable and All left out: their count varies)."""
    counts: dict[str, int] = {}
    for claim in claims:
        for alternatives in claim.requests:
            if len(alternatives) == 1 and not alternatives[0].every_one:
                request = alternatives[0]
                counts[request.device_class] = counts.get(request.device_class, 0) + request.count
    return counts


def node_slots(claims: list[Claim], devices: list[Device], taken: set, limit: int) -> int:
    """How many pods each needing ``claims`` (their own) fit in ``devices`` not ``taken``, at most ``limit``."""
    used = set(taken)
    for count in range(limit):
        for claim in claims:
            chosen = allocate(claim, devices, used)
            if chosen is None:
                return count
            used |= {d.key for ds in chosen.values() for d in ds}
    return limit


def on_node(claim: Claim, node: str) -> bool:
    """Whether ``claim``'s allocation can serve a pod on ``node`` (node-local on it, or reachable from every node)."""
    selector = (claim.allocation or {}).get("nodeSelector")
    if not selector:
        return True
    return any(
        not term.get("matchExpressions")  # node labels are not read here: such an allocation serves no pod of ours
        and all(
            rule.get("key") == "metadata.name" and rule.get("operator") == "In" and node in (rule.get("values") or [])
            for rule in term.get("matchFields") or []
        )
        for term in selector.get("nodeSelectorTerms") or []
    )


def ready_on(pod: dict, node: str, devices: Devices | None) -> bool:
    """Whether every ResourceClaim ``pod`` uses is allocated for it (reserved for its uid) where ``node`` can use
    it: what binding it needs (trivially so without claims)."""
    for _, name in claim_names(pod):
        obj = devices.claims.get((pod["metadata"]["namespace"], name)) if devices is not None and name else None
        if obj is None:
            return False
        claim = Claim(obj["metadata"]["namespace"], obj["metadata"]["name"], obj, (), (), "")
        if claim.allocation is None or pod["metadata"]["uid"] not in claim.reserved_for or not on_node(claim, node):
            return False
    return True


def allocate_gang(
    devices: Devices,
    claims: GangClaims,
    pods: Mapping[str, dict],
    placement: Mapping[str, str],
    taken: set[tuple[str, str, str]],
) -> tuple[list[tuple[Claim, dict]], str | None]:
    """The status each claim of a gang placed by ``placement`` (pod name -> node) gets: every pod's own claims
    allocated on its node from devices not in ``taken``, a shared claim once (where its first pod is) and reserved
    for each pod using it, one allocated before reserved for more. On success ``taken`` gains the devices; else no
    status, and the first claim that could not be allocated with its shortfall."""
    statuses: dict[tuple[str, str], tuple[Claim, dict]] = {}
    used = set(taken)
    spans: dict[tuple[str, str], set[str]] = {}  # claim -> the nodes of the pods using it
    for member, node in placement.items():
        for claim in claims.by_pod.get(member, []):
            spans.setdefault((claim.namespace, claim.name), set()).add(node)
    for member in sorted(placement):
        node = placement[member]
        for claim in claims.by_pod.get(member, []):
            key = (claim.namespace, claim.name)
            pod = pods[member]
            if key in statuses:
                claim_now, status = statuses[key]
                claim_now = Claim(claim.namespace, claim.name, {**claim.obj, "status": status}, (), (), "")
            elif claim.allocation is not None:
                claim_now, status = claim, dict(claim.obj.get("status") or {})
            else:
                # a claim pods on several nodes share can only be of devices every node reaches
                reachable = devices.reachable(node) if len(spans[key]) == 1 else devices.everywhere()
                chosen = allocate(claim, reachable, used)
                if chosen is None:
                    where = f"on node {node}" if len(spans[key]) == 1 else "shared across nodes, of devices all reach"
                    return [], f"pod {member}: {claim.label} {where}: {shortfall(claim, reachable, used)}"
                picked = [d for ds in chosen.values() for d in ds]
                if len(picked) > MAX_RESULTS:
                    return [], f"{claim.label} would take {len(picked)} devices; the API allows {MAX_RESULTS} a claim"
                used |= {d.key for d in picked}
                local = any(d.node is not None for d in picked)
                statuses[key] = (claim, allocation_status(claim, chosen, node if local else None, [pod]))
                continue
            if not on_node(claim_now, node):
                return [], f"pod {member}: {claim.label} is allocated on other nodes than {node}"
            statuses[key] = (claim, {**status, "reservedFor": reservations(claim_now, [pod])})
    taken |= used
    return list(statuses.values()), None
