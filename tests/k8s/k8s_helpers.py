"""Helpers several test-bed test modules share (a test module never imports another)."""

import importlib.util
import re
import subprocess
import urllib.request
from pathlib import Path

from conftest import ROOT, mpi_release, run_playbook
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from railforge.testbed.build import TEST_IMAGE
from railforge.testbed.controlplane import create_namespace


def refused_words(result: subprocess.CompletedProcess) -> str:
    """The output of a run that bad input stopped before any change (exit 2, changed=0), its whitespace joined as the
    callback wraps long messages."""
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "changed=0" in output
    return " ".join(output.split())


def changed_count(result: subprocess.CompletedProcess) -> int:
    """The recap's changed= of a successful run (every task, the CRD's included)."""
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return int(re.search(r"^localhost\s+: ok=\d+\s+changed=(\d+)", output, re.MULTILINE).group(1))


def ensure_namespace(plane, name: str) -> None:
    if not client.CoreV1Api(plane.api).list_namespace(field_selector=f"metadata.name={name}").items:
        create_namespace(plane, name)


def dgx_h100_facts() -> dict:
    spec = importlib.util.spec_from_file_location("networks_example", ROOT / "scripts/networks_example.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example.shape_facts("dgx_h100")


def mpijob(name: str, workers: int, gpus: str = "8", cpu: str = "4") -> dict:
    def template(role: str, command: list[str], limits: dict) -> dict:
        return {
            "spec": {
                "containers": [
                    {
                        "name": role,
                        "image": TEST_IMAGE,
                        "command": command,
                        "resources": {"requests": limits, "limits": limits},
                    }
                ]
            }
        }

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 8,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template("launcher", ["echo", "mpirun"], {"cpu": "100m"})},
                "Worker": {
                    "replicas": workers,
                    "template": template("worker", ["sleep", "3600"], {"nvidia.com/gpu": gpus, "cpu": cpu}),
                },
            },
        },
    }


def end_member(core, namespace: str, pod: str, container: str, message: str | None = None) -> None:
    """Pod ``pod``'s container ends with exit code 3, as its kubelet would report it."""
    ended = {"exitCode": 3, "reason": "Error", **({"message": message} if message else {})}
    status = {
        "name": container,
        "ready": False,
        "restartCount": 0,
        "image": "",
        "imageID": "",
        "state": {"terminated": ended},
    }
    core.patch_namespaced_pod_status(pod, namespace, {"status": {"phase": "Failed", "containerStatuses": [status]}})


def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels) -> float:
    return samples[(name, frozenset(labels.items()))]


def scheduler_play(plane, tmp_path: Path, *args: str, **variables) -> subprocess.CompletedProcess:
    """playbooks/scheduler.yml's railforge_scheduler role on the test bed, the PodGroup CRD from the test bed's copy."""
    variables = {
        "railforge_scheduler_kubeconfig": str(plane.admin_kubeconfig),
        "railforge_scheduler_podgroup_crd_url": f"file://{mpi_release() / 'scheduling.x-k8s.io_podgroups.yaml'}",
        **variables,
    }
    return run_playbook("playbooks/scheduler.yml", variables, tmp_path, "--tags=railforge_scheduler", *args)
