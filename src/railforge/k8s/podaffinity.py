"""Pod affinity, anti-affinity and topology spread of a pending gang's pods, read into the core's rules.

What the gang's pods ask of each other becomes a ``Spread`` (at most so many of them to a node, or to a domain of a
wider topology key); what they ask of pods already bound, on any topology key, becomes a node rule on that key
(``NotIn`` the domains to avoid, ``In`` the domains to join). A rule is never loosened: where the pods' terms
differ (a launcher that avoids its workers, workers that do not avoid each other), the gang is held to the
stricter reading (every pod the term names kept apart). What cannot be honoured keeps the gang waiting with
an ``AffinityError`` naming the pod and the field; nothing is dropped silently. Preferred terms are weighed:
those that spread the gang's own pods as a spread kept when it can be; those towards bound pods, and
``ScheduleAnyway`` for a gang's one pod on a wider key, as preferred node rules (a node that breaks one is tried
last). Their weights are not summed. Required pod affinity among the gang's own pods, none of the pods it names
bound, keeps the whole gang in one domain of its key (``Together``).
``matchLabelKeys`` of affinity terms and topology spreads are folded into their selectors; a bound pod's term
whose namespaces this scheduler cannot read counts as naming every namespace (stricter, never looser).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from railforge.scheduler import NodeSelectorRequirement, Spread, Together

HOSTNAME = "kubernetes.io/hostname"
ANTI = "spec.affinity.podAntiAffinity"
AFFINITY = "spec.affinity.podAffinity"
SPREAD = "spec.topologySpreadConstraints"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


class AffinityError(ValueError):
    """Why a gang's pod affinity keeps it waiting; ``code``: input.unsupported (a form this scheduler does not
    honour) or gang.affinity (honoured, and unmet until other pods run)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class BoundPod:
    """A pod bound to a node, as pod affinity reads it."""

    namespace: str
    labels: Mapping[str, str]
    node: str
    anti_affinity: tuple[dict, ...]  # its own required podAntiAffinity terms, which new pods must respect too


def required_anti_affinity(pod: dict) -> list[dict]:
    """The pod's required podAntiAffinity terms."""
    return ((pod["spec"].get("affinity") or {}).get("podAntiAffinity") or {}).get(REQUIRED) or []


def bound_pod(pod: dict) -> BoundPod:
    meta = pod["metadata"]
    return BoundPod(
        meta["namespace"], meta.get("labels") or {}, pod["spec"]["nodeName"], tuple(required_anti_affinity(pod))
    )


def selects(selector: dict | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against labels; no selector selects no pod (as in an affinity term)."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        value = labels.get(expression["key"])
        operator, values = expression["operator"], expression.get("values") or []
        if operator == "In" and value not in values:
            return False
        if operator == "NotIn" and value is not None and value in values:
            return False
        if operator == "Exists" and value is None:
            return False
        if operator == "DoesNotExist" and value is not None:
            return False
    return True


def _with_label_keys(term: dict, labels: Mapping[str, str]) -> dict:
    """The term with its matchLabelKeys (and mismatchLabelKeys) folded into its labelSelector as ``In`` (``NotIn``)
    the value the pod that has the term carries, as the API server folds them when it admits the pod (folding them
    again adds nothing); a key the pod does not carry is ignored, as there."""
    folded = [
        {"key": key, "operator": operator, "values": [labels[key]]}
        for field, operator in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn"))
        for key in term.get(field) or []
        if key in labels
    ]
    selector = term.get("labelSelector")
    if not folded or selector is None:  # the API refuses label keys without a labelSelector
        return term
    expressions = [*(selector.get("matchExpressions") or []), *folded]
    return {**term, "labelSelector": {**selector, "matchExpressions": expressions}}


def _topology_key(term: dict, where: str) -> str:
    """The term's topologyKey; an AffinityError naming ``where`` when it has none (the API server requires one)."""
    key = term.get("topologyKey")
    if not key:
        raise AffinityError("input.invalid", f"{where} has no topologyKey; expected a node label key")
    return key


def _namespaces(term: dict, own: str, where: str | None) -> frozenset[str] | None:
    """The namespaces a term's selector looks in (None: all). A non-empty namespaceSelector (namespaces by their
    labels) is not read: refused for the gang's own terms (``where`` names them), taken as every namespace for
    others' (``where`` None), which keeps their pods apart from more pods, never from fewer."""
    if term.get("namespaceSelector") is not None:
        if term["namespaceSelector"] and where is not None:
            raise AffinityError(
                "input.unsupported",
                f"{where} sets a non-empty namespaceSelector, which this scheduler does not read; "
                "expected namespaces, or an empty namespaceSelector (every namespace)",
            )
        return None
    return frozenset(term.get("namespaces") or [own])


def _matches(term: dict, namespaces: frozenset[str] | None, namespace: str, labels: Mapping[str, str]) -> bool:
    return (namespaces is None or namespace in namespaces) and selects(term.get("labelSelector"), labels)


@dataclass
class _Spread:
    """A ``Spread`` as it is read, pod by pod (``on``: domain -> pods counted)."""

    members: set[str]
    max_per_domain: int | None
    max_skew: int | None
    on: Counter
    required: bool
    source: str
    key: str


class _Gang:
    """The rules of one gang as they are read from its pods."""

    def __init__(self, pods: list[dict], bound: list[BoundPod], node_labels: Mapping[str, Mapping[str, str]]):
        self.pods = pods
        self.bound = bound
        self.guarded = [other for other in bound if other.anti_affinity]
        self.node_labels = node_labels
        self.avoid: dict[str, set[str]] = {}  # topology key -> domains none may join
        self.join: list[tuple[str, set[str]]] = []  # (topology key, domains) each pod must be in one of
        self.prefer_avoid: dict[str, set[str]] = {}  # the same, preferred
        self.prefer_join: list[tuple[str, set[str]]] = []
        self.spreads: dict[tuple, _Spread] = {}
        self.together: Together | None = None  # the one domain of the gang's pods that bring each other together

    def domain(self, node: str, key: str) -> str | None:
        return (self.node_labels.get(node) or {}).get(key)

    def members(self, term: dict, namespaces: frozenset[str] | None) -> set[str]:
        return {
            pod["metadata"]["name"]
            for pod in self.pods
            if _matches(term, namespaces, pod["metadata"]["namespace"], pod["metadata"].get("labels") or {})
        }

    def spread(self, signature: tuple, rule: _Spread) -> None:
        """``rule``; a term of several pods (``signature``: the field, and the term) is one rule of all they name."""
        held = self.spreads.setdefault(signature, rule)
        if held is not rule:
            held.members.update(rule.members)

    def read(self, pod: dict) -> None:
        name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels") or {}
        affinity = pod["spec"].get("affinity") or {}
        for term in required_anti_affinity(pod):
            self.anti_affinity(name, namespace, _with_label_keys(term, labels), required=True)
        for weighted in (affinity.get("podAntiAffinity") or {}).get(PREFERRED) or []:
            term = _with_label_keys(weighted.get("podAffinityTerm") or {}, labels)
            self.anti_affinity(name, namespace, term, required=False)
        for term in (affinity.get("podAffinity") or {}).get(REQUIRED) or []:
            self.affinity(name, namespace, labels, _with_label_keys(term, labels))
        for weighted in (affinity.get("podAffinity") or {}).get(PREFERRED) or []:
            term = _with_label_keys(weighted.get("podAffinityTerm") or {}, labels)
            self.preferred_affinity(name, namespace, term)
        for constraint in pod["spec"].get("topologySpreadConstraints") or []:
            self.topology_spread(name, namespace, _with_label_keys(constraint, labels))
        for other in self.guarded:  # a bound pod's own anti-affinity keeps pods it names out of its domain
            for term in other.anti_affinity:
                term = _with_label_keys(term, other.labels)
                namespaces = _namespaces(term, other.namespace, None)
                key = term.get("topologyKey") or ""
                value = self.domain(other.node, key)
                if value is not None and _matches(term, namespaces, namespace, labels):
                    self.avoid.setdefault(key, set()).add(value)

    def anti_affinity(self, name: str, namespace: str, term: dict, required: bool) -> None:
        where = f"pod {name}: {ANTI}.{REQUIRED if required else PREFERRED}"
        namespaces = _namespaces(term, namespace, where)
        key = _topology_key(term, where)
        members = self.members(term, namespaces) - {name}
        if members:
            signature = (ANTI, required, json.dumps(term, sort_keys=True))
            self.spread(signature, _Spread(members | {name}, 1, None, Counter(), required, f"{ANTI} on {key}", key))
        domains = self.domains_of_bound(term, namespaces, key)
        if domains:
            (self.avoid if required else self.prefer_avoid).setdefault(key, set()).update(domains)

    def domains_of_bound(self, term: dict, namespaces: frozenset[str] | None, key: str) -> set[str]:
        """The domains on ``key`` of the bound pods ``term`` names."""
        return {
            value
            for other in self.bound
            if _matches(term, namespaces, other.namespace, other.labels)
            and (value := self.domain(other.node, key)) is not None
        }

    def preferred_affinity(self, name: str, namespace: str, term: dict) -> None:
        """Towards bound pods: their domains preferred (none bound, nothing to prefer); among the gang's own pods
        not weighed (a gang is packed by its topology)."""
        where = f"pod {name}: {AFFINITY}.{PREFERRED}"
        namespaces = _namespaces(term, namespace, where)
        key = _topology_key(term, where)
        domains = self.domains_of_bound(term, namespaces, key)
        if domains:
            self.prefer_join.append((key, domains))

    def affinity(self, name: str, namespace: str, labels: Mapping[str, str], term: dict) -> None:
        where = f"pod {name}: {AFFINITY}.{REQUIRED}"
        namespaces = _namespaces(term, namespace, where)
        key = _topology_key(term, where)
        domains = self.domains_of_bound(term, namespaces, key)
        if domains:
            self.join.append((key, domains))
            return
        if self.members(term, namespaces) - {name}:
            # pods of its own gang, none bound: the whole gang in one domain of the key (stricter, never looser)
            if self.together is not None and self.together.topology_key != key:
                raise AffinityError(
                    "input.unsupported",
                    f"{where} on {key} brings pods of the same gang together beside another term on "
                    f"{self.together.topology_key}; expected one topology key",
                )
            self.together = Together(key, f"{AFFINITY} on {key}")
        elif not _matches(term, namespaces, namespace, labels):
            raise AffinityError("gang.affinity", f"{where} on {key}: no bound pod matches it yet; the gang waits")
        # else it names only itself: as kube-scheduler lets the first such pod go anywhere

    def topology_spread(self, name: str, namespace: str, constraint: dict) -> None:
        where = f"pod {name}: {SPREAD}"
        key = _topology_key(constraint, where)
        skew = int(constraint.get("maxSkew") or 1)
        required = (constraint.get("whenUnsatisfiable") or "DoNotSchedule") == "DoNotSchedule"
        only = frozenset([namespace])
        members = self.members(constraint, only)
        counts: Counter = Counter()
        for other in self.bound:
            value = self.domain(other.node, key)
            if value is not None and _matches(constraint, only, other.namespace, other.labels):
                counts[value] += 1
        domains = {value for labels in self.node_labels.values() if (value := labels.get(key)) is not None}
        few = len(domains) < int(constraint.get("minDomains") or 1)  # then the fewest count as 0
        least = 0 if few else min((counts[value] for value in domains), default=0)
        if required and not domains:
            raise AffinityError("gang.affinity", f"{where} on {key}: no node has that label; the gang waits")
        if key == HOSTNAME or members - {name}:
            # several pods of the gang (or nodes as domains): the core keeps the skew once they have all landed,
            # every domain counted (a node without the key takes none when required, and is not counted)
            if key == HOSTNAME:
                on = Counter({node: counts[labels[key]] for node, labels in self.node_labels.items() if key in labels})
            else:
                on = Counter({value: counts[value] for value in domains})
            cap, max_skew = (skew, None) if few else (None, skew)
            rule = _Spread(members | {name}, cap, max_skew, on, required, f"{SPREAD} on {key}", key)
            self.spread((SPREAD, json.dumps(constraint, sort_keys=True)), rule)
            if required and key != HOSTNAME:
                self.join.append((key, domains))
            return
        # its one pod here: at most least + maxSkew in a domain, least counted now
        room = {value for value in domains if counts[value] + 1 <= least + skew}
        if not required:
            if room:
                self.prefer_join.append((key, room))
            return
        if not room:
            raise AffinityError("gang.affinity", f"{where} on {key}: no domain keeps the skew; the gang waits")
        self.join.append((key, room))

    def node_rules(self, required: bool = True) -> tuple[NodeSelectorRequirement, ...]:
        avoid, join = (self.avoid, self.join) if required else (self.prefer_avoid, self.prefer_join)
        rules = [NodeSelectorRequirement(key, "NotIn", tuple(sorted(values))) for key, values in avoid.items()]
        rules += [NodeSelectorRequirement(key, "In", tuple(sorted(values))) for key, values in join]
        return tuple(dict.fromkeys(rules))  # each pod of the gang carrying one term adds the same rule

    def spread_rules(self) -> tuple[Spread, ...]:
        order = [pod["metadata"]["name"] for pod in self.pods]
        return tuple(
            Spread(
                tuple(name for name in order if name in rule.members),
                rule.max_per_domain,
                # a topology spread counts its domains' zeros too: they are its fewest
                tuple(sorted((domain, count) for domain, count in rule.on.items() if count or rule.max_skew)),
                rule.required,
                rule.source,
                None if rule.key == HOSTNAME else rule.key,
                rule.max_skew,
            )
            for rule in self.spreads.values()
        )


def _keeping_apart(pod: dict) -> list[tuple[dict, frozenset[str] | None]]:
    """A pod's required terms that count other pods where they land (required anti-affinity, topology spread
    that does not schedule anyway), each with the namespaces it looks in (``_namespaces`` for others' terms)."""
    spec, namespace = pod["spec"], pod["metadata"]["namespace"]
    terms = []
    for term in required_anti_affinity(pod):
        term = _with_label_keys(term, pod["metadata"].get("labels") or {})
        terms.append((term, _namespaces(term, namespace, None)))
    for constraint in spec.get("topologySpreadConstraints") or []:
        if (constraint.get("whenUnsatisfiable") or "DoNotSchedule") == "DoNotSchedule":
            terms.append((_with_label_keys(constraint, pod["metadata"].get("labels") or {}), frozenset([namespace])))
    return terms


def _names(keeping: list[dict], named: list[dict]) -> bool:
    return any(
        _matches(term, namespaces, pod["metadata"]["namespace"], pod["metadata"].get("labels") or {})
        for keeper in keeping
        for term, namespaces in _keeping_apart(keeper)
        for pod in named
    )


def keeps_apart(pods: list[dict]) -> bool:
    """Whether some of the pods count others where they land (``_keeping_apart``)."""
    return any(_keeping_apart(pod) for pod in pods)


def kept_apart(ours: list[dict], theirs: list[dict]) -> bool:
    """Whether a required anti-affinity or topology spread of either gang's pods names pods of the other. Each
    gang's rules were read against bound pods only: two such gangs bound in one pass could break them."""
    return _names(ours, theirs) or _names(theirs, ours)


def asks(pod: dict) -> bool:
    """Whether the pod names other pods in its placement rules."""
    affinity = pod["spec"].get("affinity") or {}
    return bool(
        affinity.get("podAffinity") or affinity.get("podAntiAffinity") or pod["spec"].get("topologySpreadConstraints")
    )


def gang_rules(pods: list[dict], bound: list[BoundPod], node_labels: Mapping[str, Mapping[str, str]]) -> dict:
    """The ``build_gang`` arguments for what a pending gang's ``pods`` ask, beside the ``bound`` pods of other
    gangs on nodes of ``node_labels`` (node name -> labels): required node rules, spreads and preferred node rules;
    raises ``AffinityError`` for what keeps it waiting."""
    gang = _Gang(pods, bound, node_labels)
    for pod in pods:
        gang.read(pod)
    return {
        "pod_rules": gang.node_rules(),
        "spreads": gang.spread_rules(),
        "preferred_affinity": gang.node_rules(required=False),
        "together": gang.together,
    }
