"""The health loop's far end on the real API server: a node quarantined after a failed check takes nothing new,
its gangs restart elsewhere when the policy says so, and release gives it back (issue 38)."""

import argparse
import json

from conftest import eventually

from railforge.cli import main
from railforge.k8s import quarantine
from railforge.validate import quarantine_failing


def taints(cluster, node: str) -> dict[str, str]:
    return {t.key: t.effect for t in cluster.core.read_node(node).spec.taints or []}


def note(cluster, node: str) -> dict | None:
    text = (cluster.core.read_node(node).metadata.annotations or {}).get(quarantine.KEY)
    return None if text is None else json.loads(text)


def test_a_quarantined_node_takes_nothing_new_and_release_gives_it_back(cluster, control_plane, run_scheduler, capsys):
    free, busy = cluster.add_nodes(2, gpus=8)
    kubeconfig = str(control_plane.admin_kubeconfig)
    cluster.core.patch_node(busy, {"spec": {"taints": [{"key": "example.com/other", "effect": "PreferNoSchedule"}]}})
    adapter = run_scheduler(cluster.settings())
    cluster.gang("first", 1)
    cluster.wait("the first gang bound", lambda: len(cluster.bound("first")) == 1)
    assert cluster.bound("first") == {"first-0": free}  # the other node's PreferNoSchedule taint
    # validate.yml's step for a failed node: tainted, annotated with what failed and the report; other taints kept
    args = argparse.Namespace(kubeconfig=kubeconfig, json_path="reports/validate-lab.json", quarantine="finish")
    quarantine_failing({busy: ["check nccl_allreduce", "floor: allreduce 9 GB/s < 40 GB/s"]}, args)
    assert taints(cluster, busy) == {"example.com/other": "PreferNoSchedule", quarantine.KEY: "NoSchedule"}
    recorded = note(cluster, busy)
    assert recorded["failed"] == ["check nccl_allreduce", "floor: allreduce 9 GB/s < 40 GB/s"]
    assert recorded["report"] == "reports/validate-lab.json" and recorded["at"].endswith("Z")
    assert f"release it with: railforge node release {busy}" in capsys.readouterr().out

    cluster.gang("second", 1)

    def waits_for_the_quarantine() -> None:
        waiting = [gang for gang in adapter.state.view().pending if gang.gang == f"{cluster.name}/second"]
        assert waiting, "not decided yet"
        assert f"node {busy} is quarantined (check nccl_allreduce; floor: allreduce" in waiting[0].reason, waiting

    eventually(waits_for_the_quarantine)
    assert cluster.bound("second") == {}
    assert main(["node", "release", busy, "--kubeconfig", kubeconfig]) == 0
    assert taints(cluster, busy) == {"example.com/other": "PreferNoSchedule"} and note(cluster, busy) is None
    cluster.wait("the second gang bound on the released node", lambda: cluster.bound("second") == {"second-0": busy})
    assert main(["node", "release", busy, "--kubeconfig", kubeconfig]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"node {busy}: was not quarantined"


def test_quarantine_with_restart_restarts_the_gangs_running_there(cluster, control_plane, run_scheduler):
    """Kubernetes evicts the gang's pod on the NoExecute node; the scheduler restarts the gang whole."""
    cluster.add_nodes(3, gpus=8)
    adapter = run_scheduler(cluster.settings(eviction_grace_seconds=60))
    cluster.gang("there", 2)
    cluster.wait("the gang bound", lambda: len(cluster.bound("there")) == 2)
    node = cluster.bound("there")["there-0"]
    command = ["node", "quarantine", node, "--failed", "check gpu_ecc", "--running", "restart"]
    assert main([*command, "--kubeconfig", str(control_plane.admin_kubeconfig)]) == 0
    assert taints(cluster, node) == {quarantine.KEY: "NoExecute"}

    def restarted() -> None:
        restarts = [d for d in adapter.state.view().recent if d.kind == "restart"]
        assert len(restarts) == 1, adapter.state.view().recent
        assert f"node {node} of member there-0 has taint {quarantine.KEY}:NoExecute" in restarts[0].detail

    eventually(restarted)
