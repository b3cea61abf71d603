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
- requests: ``exactly`` with ``allocationMode: ExactCount`` (``count``, 1 by default); not ``firstAvailable``,
  ``allocationMode: All``, ``adminAccess``, capacity requests;
- constraints: ``matchAttribute``; not ``distinctAttribute``;
- devices: in slices with ``nodeName`` (on that node) or ``allNodes`` (on every node); the newest generation of
  each pool;
- CEL, through cel-python (the version requirements.txt pins): the standard language (operators, ``in``,
  ``size``, ``startsWith``, ``endsWith``, ``contains``, ``matches``, ``has``, the macros) over ``device.driver`` and
  ``device.attributes[domain][name]`` (int, bool and string attributes; a version as its string). Not read:
  ``device.capacity`` and Kubernetes' CEL extensions (``quantity``, ``semver``, ``compareTo``...): an expression
  using one is refused as unsupported. An expression that fails on a device (an attribute it lacks) fails the claim,
  as with kube-scheduler: guard it with ``"name" in device.attributes[domain]``.
"""

from __future__ import annotations

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
EXTENSIONS = ("quantity", "semver", "compareTo", "isGreaterThan", "isLessThan", "isSemver", "isQuantity")


def served(api_client) -> bool:
    """Whether the API server serves resource.k8s.io/v1 (GA, on by default since 1.34)."""
    try:
        resources = rest.call(api_client, "GET", API).get("resources") or []
    except ApiException:
        return False
    return any(resource.get("name") == "resourceslices" for resource in resources)


class ClaimError(ValueError):
    """A claim the scheduler cannot allocate as written: ``code`` is the reason code (input.unsupported or
    input.invalid), the text names the claim and the field."""

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
        return {"device": celpy.json_to_cel({"driver": self.driver, "attributes": domains})}


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
            attributes = {
                name if "/" in name else f"{driver}/{name}": _attribute(value)
                for name, value in (device.get("attributes") or {}).items()
            }
            version = (obj.get("metadata") or {}).get("resourceVersion", "")
            devices.append(
                Device(driver, pool.get("name", ""), device["name"], spec.get("nodeName"), attributes, version)
            )
    return devices


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
        environment = celpy.Environment()
        try:
            self.program = environment.program(environment.compile(expression))
        except celpy.CELParseError as error:
            self.error = ClaimError("input.invalid", f"is not CEL: {str(error).splitlines()[0]}")

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
            verdict = str(error.args[0])
        self.results[device.key] = (device.version, verdict)
        return verdict


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
    name: str
    device_class: str
    count: int
    selectors: tuple[Selector, ...]


@dataclass(frozen=True)
class Constraint:
    requests: tuple[str, ...]  # empty: every request of the claim
    attribute: str


@dataclass
class Claim:
    """A ResourceClaim as the scheduler reads it."""

    namespace: str
    name: str
    obj: dict
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...]
    signature: str  # what two claims asking the same of a node share

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
    requests = []
    for index, request in enumerate(devices.get("requests") or []):
        where = f"{label} spec.devices.requests[{index}]"
        if "exactly" not in request:
            field_name = next((key for key in request if key != "name"), "exactly")
            raise ClaimError("input.unsupported", f"{where}.{field_name} is set; this scheduler reads only exactly")
        exactly = request["exactly"]
        mode = exactly.get("allocationMode", "ExactCount")
        for unsupported in ("adminAccess", "capacity", "tolerations"):
            if exactly.get(unsupported):
                raise ClaimError(
                    "input.unsupported", f"{where}.exactly.{unsupported} is set, which it does not allocate"
                )
        if mode != "ExactCount":
            raise ClaimError("input.unsupported", f"{where}.exactly.allocationMode is {mode}; expected ExactCount")
        class_name = exactly.get("deviceClassName", "")
        if class_name not in classes:
            raise ClaimError("dra.class-missing", f"{where} names DeviceClass {class_name!r}, which does not exist")
        class_selectors = ((classes[class_name].get("spec") or {}).get("selectors")) or []
        selectors = tuple(
            Selector(_program(programs, selector["cel"]["expression"]), f"{what}.selectors[{i}].cel.expression")
            for what, chosen in (
                (f"DeviceClass {class_name} spec", class_selectors),
                (f"{where}.exactly", exactly.get("selectors") or []),
            )
            for i, selector in enumerate(chosen)
            if "cel" in selector
        )
        requests.append(Request(request["name"], class_name, int(exactly.get("count") or 1), selectors))
    constraints = []
    for index, constraint in enumerate(devices.get("constraints") or []):
        if "matchAttribute" not in constraint:
            raise ClaimError(
                "input.unsupported",
                f"{label} spec.devices.constraints[{index}] has no matchAttribute; only matchAttribute is read",
            )
        constraints.append(Constraint(tuple(constraint.get("requests") or ()), constraint["matchAttribute"]))
    text = repr(
        (
            [(r.name, r.device_class, r.count, [s.expression for s in r.selectors]) for r in requests],
            [(c.requests, c.attribute) for c in constraints],
        )
    )
    signature = hashlib.sha256(text.encode()).hexdigest()[:8]
    return Claim(meta["namespace"], meta["name"], obj, tuple(requests), tuple(constraints), signature)


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
        self.rooms: dict[tuple[str, str], int] = {}  # (slot, node) -> pods of that kind its free devices hold

    def taken(self, stale: Iterable[tuple[str, str]] = ()) -> set[tuple[str, str, str]]:
        """The devices allocated to claims, but those of ``stale`` claims (namespace, name)."""
        mine = set(stale)
        return {device for device, claim in self.held.items() if claim not in mine}

    @cached_property
    def allocated(self) -> set[tuple[str, str, str]]:
        """The devices claims hold (``taken`` with no stale claims), once a pass."""
        return self.taken()

    def room(self, slot: str, claims: list[Claim], node: str) -> int:
        """How many pods whose own claims are ``claims`` (their ``slot``) the free devices of ``node`` hold; once
        a pass for each slot and node."""
        if (slot, node) not in self.rooms:
            reachable = self.reachable(node)
            self.rooms[(slot, node)] = node_slots(claims, reachable, self.allocated, len(reachable))
        return self.rooms[(slot, node)]

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
    matching = {
        request.name: [d for d in devices if d.key not in taken and all(s.matches(d) for s in request.selectors)]
        for request in claim.requests
    }

    def constrained(request: str) -> list[Constraint]:
        return [c for c in claim.constraints if not c.requests or request in c.requests]

    def search(index: int, used: set, values: dict[str, Any]) -> dict[str, list[Device]] | None:
        if index == len(claim.requests):
            return {}
        request = claim.requests[index]
        rules = constrained(request.name)
        free = [d for d in matching[request.name] if d.key not in used]
        for chosen in itertools.combinations(free, request.count):
            fixed = dict(values)
            if any(not _agrees(rule.attribute, chosen, fixed) for rule in rules):
                continue
            rest = search(index + 1, used | {d.key for d in chosen}, fixed)
            if rest is not None:
                return {request.name: list(chosen), **rest}
        return None

    return search(0, set(), {})


def _agrees(attribute: str, chosen: Iterable[Device], fixed: dict[str, Any]) -> bool:
    """Whether every device of ``chosen`` has ``attribute`` equal to the value ``fixed`` holds for it (set by the
    first device when unset)."""
    for device in chosen:
        if attribute not in device.attributes:
            return False
        value = device.attributes[attribute]
        if fixed.setdefault(attribute, value) != value:
            return False
    return True


def shortfall(claim: Claim, devices: list[Device], taken: set[tuple[str, str, str]]) -> str:
    """Why ``claim`` cannot be allocated from ``devices``: the first request short of matching free devices, or
    its constraints."""
    for request in claim.requests:
        free = sum(1 for d in devices if d.key not in taken and all(s.matches(d) for s in request.selectors))
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
    allocation: dict = {"devices": {"results": results}}
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


def claim_names(pod: dict) -> list[tuple[str, str | None]]:
    """Each of the pod's ``spec.resourceClaims``: its entry name and the ResourceClaim it uses (a template's claim
    as the pod's status names it; None until the resource-claim controller made it)."""
    generated = {
        entry.get("name"): entry.get("resourceClaimName")
        for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    out = []
    for entry in pod["spec"].get("resourceClaims") or []:
        name = entry.get("resourceClaimName") or generated.get(entry.get("name"))
        out.append((entry.get("name", ""), name))
    return out


@dataclass
class GangClaims:
    """The claims of a pending gang's pods: by pod name, and which of them several pods share or were allocated
    before."""

    by_pod: dict[str, list[Claim]] = field(default_factory=dict)
    shared: set[tuple[str, str]] = field(default_factory=set)  # (namespace, name)
    # allocated and reserved only for pods of this gang, none bound: a write an interrupted pass left, allocated anew
    stale: set[tuple[str, str]] = field(default_factory=set)

    def own(self, pod: str) -> list[Claim]:
        """The pod's claims that are its own: allocated with it, on its node."""
        return [c for c in self.by_pod.get(pod, []) if (c.namespace, c.name) not in self.shared]

    def slot_name(self, pod: str) -> str | None:
        """The resource name of "room for this pod's own claims" on a node (pods asking the same share it)."""
        own = self.own(pod)
        if not own:
            return None
        classes = "+".join(sorted({r.device_class for c in own for r in c.requests}))
        digest = hashlib.sha256("".join(sorted(c.signature for c in own)).encode()).hexdigest()[:6]
        return f"claims/{classes}#{digest}"


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
        field_.get("key") == "metadata.name" and field_.get("operator") == "In" and node in (field_.get("values") or [])
        for term in selector.get("nodeSelectorTerms") or []
        for field_ in term.get("matchFields") or []
    )


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
    for member in sorted(placement):
        node = placement[member]
        for claim in claims.by_pod.get(member, []):
            key = (claim.namespace, claim.name)
            pod = pods[member]
            if key in statuses:
                claim_now, status = statuses[key]
                claim_now = Claim(claim.namespace, claim.name, {**claim.obj, "status": status}, (), (), "")
            elif claim.allocation is not None and key not in claims.stale:
                claim_now, status = claim, dict(claim.obj.get("status") or {})
            else:
                reachable = devices.reachable(node)
                chosen = allocate(claim, reachable, used)
                if chosen is None:
                    return [], f"pod {member}: {claim.label} on node {node}: {shortfall(claim, reachable, used)}"
                picked = [d for ds in chosen.values() for d in ds]
                used |= {d.key for d in picked}
                local = any(d.node is not None for d in picked)
                statuses[key] = (claim, allocation_status(claim, chosen, node if local else None, [pod]))
                continue
            if not on_node(claim_now, node):
                return [], f"pod {member}: {claim.label} is allocated on other nodes than {node}"
            statuses[key] = (claim, {**status, "reservedFor": reservations(claim_now, [pod])})
    taken |= used
    return list(statuses.values()), None
