"""The lab's MPIJob template (deploy/openmpi/mpijob.yml.j2) against the real API server and the real mpi-operator of
the pinned release: the API server takes it with strict field validation, and the pods and hostfile the operator
makes from it are what the OpenMPI image expects (tests/k8s/test_openmpi_image.py runs the image that way)."""

import jinja2
from conftest import GROUP_LABEL, ROOT, kubectl
from kubernetes import client

from railforge.testbed.controlplane import create_namespace
from railforge.testbed.procs import wait_for

NAMESPACE = "openmpi-template"
JOB = "allreduce"


def test_the_operator_makes_the_pods_the_image_expects(control_plane, mpi_operator, tmp_path):
    variables = {
        "job_name": JOB,
        "job_namespace": NAMESPACE,
        "image": "localhost/railforge-openmpi:0.1.0",
        "workers": 2,
        "slots_per_worker": 1,
        "queue": "lab",
    }
    rendered = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(
        (ROOT / "deploy/openmpi/mpijob.yml.j2").read_text()
    )
    manifest = tmp_path / "mpijob.yml"
    manifest.write_text(rendered.render(**variables))
    create_namespace(control_plane, NAMESPACE)
    # strict: a field the CRD's schema does not know fails here instead of being pruned silently
    kubectl(control_plane, "create", "--validate=strict", f"--filename={manifest}")
    core = client.CoreV1Api(control_plane.api)
    try:

        def gang() -> list[dict]:
            pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"{GROUP_LABEL}={JOB}").items
            return [control_plane.api.sanitize_for_serialization(pod) for pod in pods]

        wait_for("the launcher and both workers", lambda: len(gang()) == 3, 60, [mpi_operator])
        pods = sorted(gang(), key=lambda pod: pod["metadata"]["name"])
        roles = [pod["metadata"]["labels"]["training.kubeflow.org/job-role"] for pod in pods]
        assert roles == ["launcher", "worker", "worker"]
        launcher, *workers = pods
        assert [worker["metadata"]["name"] for worker in workers] == [f"{JOB}-worker-0", f"{JOB}-worker-1"]
        for pod in [launcher, *workers]:
            spec, container = pod["spec"], pod["spec"]["containers"][0]
            assert pod["metadata"]["labels"]["railforge.io/queue"] == "lab"
            assert spec["schedulerName"] == "railforge"  # --gang-scheduling=railforge
            assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000}
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            # the job's key where the image's sshd_config and ssh look for it; root's files, readable by uid 1000
            (ssh_mount,) = [mount for mount in container["volumeMounts"] if mount["mountPath"] == "/home/mpiuser/.ssh"]
            (ssh_volume,) = [volume for volume in spec["volumes"] if volume["name"] == ssh_mount["name"]]
            assert [item["path"] for item in ssh_volume["secret"]["items"]] == [
                "id_rsa",
                "id_rsa.pub",
                "authorized_keys",
            ]
            assert ssh_volume["secret"]["defaultMode"] == 0o644
        for worker in workers:
            assert worker["spec"]["containers"][0]["command"] == [
                "/usr/sbin/sshd",
                "-De",
                "-f",
                "/etc/ssh/mpi/sshd_config",
            ]
            assert worker["spec"]["subdomain"] == JOB
        launcher_container = launcher["spec"]["containers"][0]
        environment = {variable["name"]: variable.get("value") for variable in launcher_container["env"]}
        # wait-for-workers reads the same hostfile mpirun does
        assert environment["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
        assert launcher_container["command"][:2] == ["wait-for-workers", "mpirun"]
        hostfile = core.read_namespaced_config_map(f"{JOB}-config", NAMESPACE).data["hostfile"]
        assert hostfile.splitlines() == [f"{JOB}-worker-{index}.{JOB}.{NAMESPACE}.svc slots=1" for index in range(2)]
        group = client.CustomObjectsApi(control_plane.api).get_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", NAMESPACE, "podgroups", JOB
        )
        assert group["spec"]["minMember"] == 3
    finally:
        kubectl(control_plane, "delete", "--namespace", NAMESPACE, "mpijob", JOB, "--wait=false")
