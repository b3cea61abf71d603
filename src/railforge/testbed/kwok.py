"""KWOK against the test bed's control plane: fake nodes and the lifecycles of the pods bound to them.

KWOK (built from its pinned module, ``railforge testbed build``) manages the nodes labelled ``FAKE_NODE_LABEL``:
a pod bound to one is made Running at once (the release's ``pod-ready`` stage), runs for the duration its
``RUNTIME_ANNOTATION`` says and then ends with the exit code of ``EXIT_CODE_ANNOTATION`` (0 when absent: our
``pod-end`` stage, ``kwok-stages.yaml``); a deleted pod is removed (``pod-delete``). Nothing runs: no kubelet, no
container, no traffic. The nodes themselves are API objects the caller creates (``add_fake_nodes``), Ready from the
start; the release's node stages keep them so.
"""

from __future__ import annotations

from pathlib import Path

from railforge.testbed.build import binary, component
from railforge.testbed.controlplane import ControlPlane, add_api_node
from railforge.testbed.procs import Process, wait_for

FAKE_NODE_LABEL = "railforge.io/kwok"  # value "fake": the nodes KWOK manages
RUNTIME_ANNOTATION = "kwok.railforge.io/runtime"  # how long the pod runs once Running, e.g. "90s"
EXIT_CODE_ANNOTATION = "kwok.railforge.io/exit-code"  # how it ends; "0" (Succeeded) when absent
STAGES = Path(__file__).with_name("kwok-stages.yaml")
RELEASE_STAGES = ("node-initialize", "node-heartbeat-with-lease", "pod-ready", "pod-delete")


def start_kwok(plane: ControlPlane, workdir: Path) -> Process:
    """KWOK for the plane's fake nodes, its log in workdir; stop it with .stop()."""
    built = component("kwok").out_dir
    configs = [built / f"stage-{name}.yaml" for name in RELEASE_STAGES] + [STAGES]
    workdir.mkdir(parents=True, exist_ok=True)
    argv = [
        binary("kwok"),
        f"--kubeconfig={plane.admin_kubeconfig}",
        f"--manage-nodes-with-label-selector={FAKE_NODE_LABEL}=fake",
        *(f"--config={path}" for path in configs),
    ]
    # HOME: KWOK also reads ~/.kwok/kwok.yaml; an empty home keeps the host's out of the test bed
    process = Process("kwok", argv, workdir / "kwok.log", env={"HOME": str(workdir), "PATH": "/usr/bin:/bin"})
    wait_for("kwok to watch its nodes", lambda: "Watch nodes" in process.log.read_text(), 30, [process])
    return process


def add_fake_nodes(
    plane: ControlPlane, names: list[str], allocatable: dict[str, str], labels: dict[str, str] | None = None
) -> None:
    """API nodes (Ready, with these resources and labels) that KWOK manages: pods bound there run as annotated."""
    for name in names:
        add_api_node(plane, name, allocatable, labels={FAKE_NODE_LABEL: "fake", **(labels or {})})
