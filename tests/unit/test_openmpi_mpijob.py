"""The lab's MPIJob template (deploy/openmpi/mpijob.yml.j2) rendered with plain Jinja2, as Ansible's template would."""

from pathlib import Path

import jinja2
import pytest
import yaml

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy/openmpi/mpijob.yml.j2"
REQUIRED = {
    "job_name": "allreduce",
    "job_namespace": "mpi-lab",
    "image": "localhost/railforge-openmpi:0.1.0",
    "workers": 2,
    "slots_per_worker": 1,
}


def render(**variables) -> dict:
    """Rendered as plain Jinja2 does and as Ansible's template does (trim_blocks): both must give the same job."""
    jobs = [
        yaml.safe_load(
            jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=trim_blocks)
            .from_string(TEMPLATE.read_text())
            .render(**variables)
        )
        for trim_blocks in (False, True)
    ]
    assert jobs[0] == jobs[1]
    return jobs[0]


def pods(job: dict) -> dict:
    """Role -> (pod template spec, its one container)."""
    return {
        role: (spec["template"]["spec"], spec["template"]["spec"]["containers"][0])
        for role, spec in job["spec"]["mpiReplicaSpecs"].items()
    }


def test_the_job_runs_allreduce_on_every_slot_of_every_worker():
    job = render(**{**REQUIRED, "workers": 3, "slots_per_worker": 2})
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v2beta1", "MPIJob")
    assert job["metadata"] == {"name": "allreduce", "namespace": "mpi-lab"}
    assert job["spec"]["slotsPerWorker"] == 2
    assert job["spec"]["mpiImplementation"] == "OpenMPI"
    assert job["spec"]["sshAuthMountPath"] == "/home/mpiuser/.ssh"
    assert job["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] == 1
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 3
    (_, launcher), (_, worker) = pods(job)["Launcher"], pods(job)["Worker"]
    assert launcher["command"] == ["wait-for-workers", "mpirun", "-np", "6", "--bind-to", "none", "allreduce"]
    assert worker["command"] == ["/usr/sbin/sshd", "-De", "-f", "/etc/ssh/mpi/sshd_config"]
    assert worker["readinessProbe"]["tcpSocket"] == {"port": 2222}
    assert {launcher["image"], worker["image"]} == {"localhost/railforge-openmpi:0.1.0"}


def test_every_pod_runs_as_uid_1000_without_privileges():
    for spec, container in pods(render(**REQUIRED)).values():
        assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000}
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }
        # a read-only root file system: OpenMPI's session directory goes to /tmp
        assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
        assert spec["volumes"] == [{"name": "tmp", "emptyDir": {}}]
        assert set(container["resources"]["requests"]) == {"cpu", "memory"}


def test_workers_are_kept_on_different_nodes():
    spec, _ = pods(render(**REQUIRED))["Worker"]
    (term,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"] == {
        "matchLabels": {"training.kubeflow.org/job-name": "allreduce", "training.kubeflow.org/job-role": "worker"}
    }
    assert "affinity" not in pods(render(**REQUIRED))["Launcher"][0]


def test_workers_may_share_a_node_when_asked():
    spec, _ = pods(render(**REQUIRED, spread_workers=False))["Worker"]
    assert "affinity" not in spec
    pinned, _ = pods(render(**REQUIRED, spread_workers=False, node_names=["n1"]))["Worker"]
    assert list(pinned["affinity"]) == ["nodeAffinity"]


def test_the_queue_labels_every_pod_and_no_queue_labels_none():
    for variables, labels in (({"queue": "research"}, {"railforge.io/queue": "research"}), ({}, {})):
        for replica in render(**REQUIRED, **variables)["spec"]["mpiReplicaSpecs"].values():
            assert replica["template"]["metadata"]["labels"] == labels


def test_gpus_and_sizes_go_to_the_workers_requests_and_limits():
    _, worker = pods(render(**REQUIRED, gpus_per_worker=8, worker_cpu="2", worker_memory="1Gi"))["Worker"]
    assert worker["resources"] == {
        "requests": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": 8},
        "limits": {"memory": "1Gi", "nvidia.com/gpu": 8},
    }
    _, worker = pods(render(**REQUIRED))["Worker"]
    assert worker["resources"] == {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"memory": "256Mi"}}


def test_allreduce_arguments_follow_the_program():
    _, launcher = pods(render(**REQUIRED, allreduce_args=["--elements", 4096, "--iterations=5"]))["Launcher"]
    assert launcher["command"][-4:] == ["allreduce", "--elements", "4096", "--iterations=5"]


@pytest.mark.parametrize("missing", sorted(REQUIRED))
def test_a_missing_variable_is_named(missing):
    with pytest.raises(jinja2.UndefinedError, match=f"'{missing}' is undefined"):
        render(**{key: value for key, value in REQUIRED.items() if key != missing})


def test_workers_request_further_devices_attach_networks_and_print_their_devices():
    job = render(
        **REQUIRED,
        gpus_per_worker=1,
        worker_resources={"rdma/rail0": 1},
        worker_networks=["railforge-network/rail0"],
        device_env=["NVIDIA_VISIBLE_DEVICES", "RAILFORGE_RDMA_DEVICES"],
    )
    worker_spec = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    _, worker = pods(job)["Worker"]
    assert worker["resources"]["limits"] == {"memory": "256Mi", "nvidia.com/gpu": 1, "rdma/rail0": 1}
    assert worker_spec["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/networks": "railforge-network/rail0"}
    assert worker["command"] == [
        "/bin/sh",
        "-c",
        "echo devices NVIDIA_VISIBLE_DEVICES=${NVIDIA_VISIBLE_DEVICES} RAILFORGE_RDMA_DEVICES=${RAILFORGE_RDMA_DEVICES}"
        "; exec /usr/sbin/sshd -De -f /etc/ssh/mpi/sshd_config",
    ]
    _, launcher = pods(job)["Launcher"]
    assert {env["name"]: env["value"] for env in launcher["env"]} == {
        "OMPI_MCA_btl_tcp_if_include": "eth0",
        "OMPI_MCA_oob_tcp_if_include": "eth0",
    }
    plain = render(**REQUIRED)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    assert plain["metadata"]["annotations"] == {}
    assert pods(render(**REQUIRED))["Launcher"][1]["env"] == []
    assert plain["spec"]["containers"][0]["command"] == ["/usr/sbin/sshd", "-De", "-f", "/etc/ssh/mpi/sshd_config"]
