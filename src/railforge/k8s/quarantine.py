"""Quarantine: keep a node that failed a health check (``validate.yml``, a benchmark floor) out of new work.

A quarantined node carries the taint ``railforge.io/quarantine`` and the annotation of the same key, which names
the failed checks, the report and when (JSON). The taint's effect is the policy for the gangs running there:
``NoSchedule`` lets them finish, ``NoExecute`` restarts them elsewhere now (the Railforge scheduler restarts a gang
whole when one of its nodes has a NoExecute taint it does not tolerate; Kubernetes evicts the pods too). Nothing new
is placed there by any scheduler. ``railforge node release`` removes both.
"""

from __future__ import annotations

import argparse

from railforge.cliargs import UsageError, k8s_name, kube_client, text_file
from railforge.k8s.annotations import QUARANTINE as KEY
from railforge.k8s.annotations import QUARANTINE_TAINT_VALUE, Quarantine

EFFECTS = {"finish": "NoSchedule", "restart": "NoExecute"}  # policy for the running gangs -> the taint's effect


def register(sub: argparse._SubParsersAction) -> None:
    node = sub.add_parser("node", help="quarantine nodes that failed a health check, or release them")
    actions = node.add_subparsers(dest="action", required=True, metavar="ACTION")
    put = actions.add_parser("quarantine", help="taint and annotate nodes: nothing new is placed there")
    put.add_argument("nodes", nargs="+", type=k8s_name, metavar="NODE")
    put.add_argument("--failed", required=True, help="what failed, e.g. 'check nccl_allreduce'")
    put.add_argument("--report", default="", help="the report that says so")
    put.add_argument(
        "--running", choices=sorted(EFFECTS), default="finish", help="gangs running there: finish, or restart now"
    )
    release_parser = actions.add_parser("release", help="remove the quarantine taint and annotation")
    release_parser.add_argument("nodes", nargs="+", type=k8s_name, metavar="NODE")
    for parser in (put, release_parser):
        parser.add_argument("--kubeconfig", type=text_file, required=True)
    put.set_defaults(func=_quarantine_command)
    release_parser.set_defaults(func=_release_command)


def _quarantine_command(args: argparse.Namespace) -> int:
    api = kube_client(args.kubeconfig)
    for name in args.nodes:
        quarantine(api, name, [args.failed], args.report, args.running)
        print(f"node {name}: quarantined ({EFFECTS[args.running]}): {args.failed}")
    return 0


def _release_command(args: argparse.Namespace) -> int:
    api = kube_client(args.kubeconfig)
    for name in args.nodes:
        print(f"node {name}: {'released' if release(api, name) else 'was not quarantined'}")
    return 0


def quarantine(api, node: str, failed: list[str], report: str, running: str) -> None:
    """Taint and annotate the node (again, with the new reasons, if it already is)."""
    from railforge.k8s import rest

    note = Quarantine(tuple(failed), report, rest.now_rfc3339()).encode()
    taint = {"key": KEY, "value": QUARANTINE_TAINT_VALUE, "effect": EFFECTS[running]}
    _update(api, node, lambda taints: [*(t for t in taints if t.get("key") != KEY), taint], {KEY: note})


def release(api, node: str) -> bool:
    """Remove the taint and the annotation; whether the node was quarantined."""
    return _update(api, node, lambda taints: [t for t in taints if t.get("key") != KEY], {KEY: None})


def _update(api, node: str, taints_of, annotations: dict) -> bool:
    """Replace the node's taints by ``taints_of(taints)`` and merge ``annotations`` (None removes), guarded by the
    node's resourceVersion so that a taint added meanwhile by someone else is not lost; whether it had the key."""
    from kubernetes.client import ApiException

    from railforge.k8s import rest

    path = f"/api/v1/nodes/{node}"
    for _ in range(5):
        try:
            obj = rest.call(api, "GET", path)
        except ApiException as error:
            raise UsageError(f"node {node}: {rest.api_error(error)}") from None
        taints = obj["spec"].get("taints") or []
        had = any(t.get("key") == KEY for t in taints) or KEY in (obj["metadata"].get("annotations") or {})
        body = {
            "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"], "annotations": annotations},
            "spec": {"taints": taints_of(taints)},
        }
        try:
            rest.call(api, "PATCH", path, body=body, content_type=rest.MERGE_PATCH)
            return had
        except ApiException as error:
            if error.status != 409:
                raise UsageError(f"node {node}: {rest.api_error(error)}") from None
    raise UsageError(f"node {node}: changed by others five times in a row; try again")
