"""railforge.bench.jobs: the benchmark's MPIJob and perftest pairs rendered from the fixtures' machine shapes (their
railforge_hw facts read from a fake sysfs), and every refusal naming its variable."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from benchdata import read_body

from railforge.bench.collect import launcher_log_name
from railforge.bench.floors import load_floors
from railforge.bench.jobs import (
    RESNET_ARGS,
    RUN_LABEL,
    PlanError,
    images_on_nodes,
    mpijob_variables,
    perftest_pairs,
    plan_from_mapping,
    render_all,
    render_mpijob,
)
from railforge.bench.judge import judge
from railforge.bench.results import load_results

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("networks_example", ROOT / "scripts/networks_example.py")
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


@pytest.fixture(scope="module")
def shapes():
    return {shape: example.shape_facts(shape) for shape in ("dgx_h100", "roce_node", "pcie_2gpu")}


def gpu_plan(facts: dict, **changes) -> dict:
    return {
        "cluster": "forge-a",
        "mode": "gpu",
        "namespace": "bench",
        "job_name": "nccl",
        "hardware_class": "h100-sxm-cx7-ndr",
        "image": "registry.example/nccl-tests:2.13",
        "perftest_image": "registry.example/perftest:25.01",
        "queue": "acceptance",
        "nodes": sorted(facts),
        "facts": facts,
        **changes,
    }


def exported(command: list[str]) -> dict[str, str]:
    """mpirun's -x NAME=value pairs."""
    return dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "-x")


def containers(job: dict) -> dict:
    return {role: spec["template"]["spec"] for role, spec in job["spec"]["mpiReplicaSpecs"].items()}


def test_a_gpu_mpijob_attaches_every_rail_with_its_rdma_device_and_ncclss_settings(shapes):
    dgx = shapes["dgx_h100"]
    job = render_mpijob(mpijob_variables(plan_from_mapping(gpu_plan({"dgx-01": dgx, "dgx-02": dgx}))))
    pods = containers(job)
    worker, launcher = pods["Worker"], pods["Launcher"]
    hcas = [rail["hca"] for rail in dgx["rails"]]
    assert len(hcas) == 8
    rails = [f"rail{i}" for i in range(8)]
    annotations = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"]
    assert annotations["k8s.v1.cni.cncf.io/networks"] == ",".join(f"railforge-network/{rail}" for rail in rails)
    requests = worker["containers"][0]["resources"]["requests"]
    assert requests == {"cpu": "500m", "memory": "256Mi", "nvidia.com/gpu": 8, **{f"rdma/{r}": 1 for r in rails}}
    assert worker["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
    assert job["spec"]["slotsPerWorker"] == 8 and job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    command = launcher["containers"][0]["command"]
    assert command[:4] == ["wait-for-workers", "mpirun", "-np", "16"]
    env = exported(command)
    # the NCCL settings railforge_nccl_env gives the node class, in GPU order, plus the transport in the log
    assert env["NCCL_IB_HCA"] == "=" + ",".join(f"{hca}:1" for hca in dict.fromkeys(hcas))
    assert env["NCCL_DEBUG"] == "INFO"
    assert "NCCL_IB_DISABLE" not in env
    assert command[command.index("all_reduce_perf") :][-10:] == ["-b", "8", "-e", "8G", "-f", "2", "-g", "1", "-c", "1"]
    # gang-scheduled by railforge: a queue label on every pod, and the gang's node constraint on the launcher too
    for spec in pods.values():
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["dgx-01", "dgx-02"]}]}
        ]
    labels = {role: s["template"]["metadata"]["labels"] for role, s in job["spec"]["mpiReplicaSpecs"].items()}
    assert labels == {"Launcher": {"railforge.io/queue": "acceptance"}, "Worker": {"railforge.io/queue": "acceptance"}}


def test_the_gpu_launchers_log_is_named_so_its_all_reduce_is_judged_against_the_floor(shapes, tmp_path):
    # nccl-tests' output does not name its program; the log's file name does, from the launcher's command,
    # so the all_reduce bus-bandwidth floor applies to the collected log (a 'launcher' log has no collective).
    dgx = shapes["dgx_h100"]
    job = render_mpijob(mpijob_variables(plan_from_mapping(gpu_plan({"dgx-01": dgx, "dgx-02": dgx}))))
    name = launcher_log_name("nccl", containers(job)["Launcher"]["containers"][0]["command"])
    assert name == "nccl-all_reduce_perf.log"
    (tmp_path / name).write_text(
        read_body("nccl-tests/all_reduce_perf-2node-16xh100-ndr-cx7-slurm-srun-label-prefix-validation-off.txt")
    )
    results, skipped = load_results(tmp_path)
    verdicts = judge(results, load_floors("h100-sxm-cx7-ndr"))
    (floor,) = [v for v in verdicts if v.check == "nccl_all_reduce_multinode"]
    assert not skipped and (floor.status, floor.measured) == ("pass", 155.57)
    cpu = render_mpijob(mpijob_variables(plan_from_mapping(cpu_plan())))
    assert launcher_log_name("bench", containers(cpu)["Launcher"]["containers"][0]["command"]) == "bench-launcher.log"


def test_roce_rails_hand_nccl_their_gid_index_and_perftest_its_x(shapes):
    roce = shapes["roce_node"]
    settings = {"rail_networks_nccl_gid_index": 5, "rail_networks_namespace": "rails"}
    nodes = {"r1": roce, "r2": roce}
    plan = plan_from_mapping(gpu_plan(nodes, hardware_class="l40s-roce-200g", rail_networks=settings))
    command = containers(render_mpijob(mpijob_variables(plan)))["Launcher"]["containers"][0]["command"]
    assert "NCCL_IB_GID_INDEX=5" in command
    server = next(o for o in render_all(plan) if o["kind"] == "Pod" and o["metadata"]["name"].endswith("-server"))
    args = server["spec"]["containers"][0]["command"]
    assert args[args.index("-x") + 1] == "5"
    assert server["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "rails/rail0"
    # the L40S classes' floors are runs in host memory: no GPU, no --use_cuda
    assert "--use_cuda=0" not in args and "nvidia.com/gpu" not in server["spec"]["containers"][0]["resources"]["limits"]


def test_perftest_pairs_measure_every_node_as_a_client_on_every_rail(shapes):
    dgx = shapes["dgx_h100"]
    plan = plan_from_mapping(gpu_plan({n: dgx for n in ("dgx-01", "dgx-02", "dgx-03")}))
    pairs = perftest_pairs(plan)
    assert len(pairs) == 3 * 8
    assert {(p.server, p.client) for p in pairs} == {("dgx-01", "dgx-02"), ("dgx-02", "dgx-03"), ("dgx-03", "dgx-01")}
    for rail in range(8):
        assert sorted(p.client for p in pairs if p.rail == rail) == ["dgx-01", "dgx-02", "dgx-03"]
    objects = render_all(plan)
    assert [o["kind"] for o in objects].count("Pod") == 2 * len(pairs)
    first = next(p for p in pairs if p.rail == 3 and p.client == "dgx-03")
    group, service, server, client = (o for o in objects if o["metadata"]["name"].startswith(first.name))
    assert service["kind"] == "Service" and service["spec"]["clusterIP"] == "None"
    # one gang of two pods for railforge, each pinned to its node: started whole or not at all
    assert (group["kind"], group["metadata"]["name"], group["spec"]) == ("PodGroup", first.name, {"minMember": 2})
    assert "nodeName" not in server["spec"] and "nodeName" not in client["spec"]
    pins = [pod["spec"]["nodeSelector"] for pod in (server, client)]
    assert pins == [{"kubernetes.io/hostname": "dgx-02"}, {"kubernetes.io/hostname": "dgx-03"}]
    for pod in (server, client):
        assert pod["spec"]["schedulerName"] == "railforge"
        assert pod["metadata"]["labels"]["railforge.io/queue"] == "acceptance"
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == first.name
        assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "railforge-network/rail3"
        # the H100 class's ib_write_bw floor is a GPUDirect RDMA figure: both ends take a GPU and use it
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {"rdma/rail3": 1, "nvidia.com/gpu": 1}
        assert "--use_cuda=0" in pod["spec"]["containers"][0]["command"][-1]
        assert pod["metadata"]["labels"]["railforge.io/benchmark-job"] == "nccl"
    hca = dgx["rails"][3]["hca"]
    args = server["spec"]["containers"][0]["command"]
    assert args[:5] == ["ib_write_bw", "-d", hca, "-i", "1"] and "--report_gbits" in args
    assert args[args.index("-s") + 1] == "8388608"
    assert (server["spec"]["hostname"], server["spec"]["subdomain"]) == (f"{first.name}-server", first.name)
    script = client["spec"]["containers"][0]["command"][2]
    assert f"{first.name}-server.{first.name}.bench.svc" in script and f"-d {hca}" in script


def cpu_plan(**changes) -> dict:
    """The test bed's plan: two workers on its one node."""
    return {
        "cluster": "bed",
        "mode": "cpu",
        "namespace": "bench",
        "hardware_class": "cpu-fallback",
        "image": "localhost/railforge-openmpi:0.1.0",
        "nodes": ["rf-node-0"],
        "workers": 2,
        **changes,
    }


def test_the_cpu_fallback_runs_allreduce_from_the_same_template_without_devices():
    plan = plan_from_mapping(cpu_plan(allreduce_elements=4096))
    objects = render_all(plan)
    assert [o["kind"] for o in objects] == ["MPIJob"]  # no rails: no perftest
    pods = containers(objects[0])
    command = pods["Launcher"]["containers"][0]["command"]
    assert command == ["wait-for-workers", "mpirun", "-np", "2", "--bind-to", "none", "allreduce", "--elements", "4096"]
    worker = pods["Worker"]["containers"][0]
    assert worker["resources"]["requests"] == {"cpu": "500m", "memory": "256Mi"}
    assert "add" not in worker["securityContext"]["capabilities"]
    assert objects[0]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"] == {}
    # two workers on the one node share it; one per node where there are enough
    assert "podAntiAffinity" not in pods["Worker"]["affinity"]
    spread = containers(render_all(plan_from_mapping(cpu_plan(nodes=["rf-node-0", "rf-node-1"])))[0])
    assert "podAntiAffinity" in spread["Worker"]["affinity"]


def test_every_object_of_a_run_carries_the_label_benchmark_yml_removes_earlier_runs_by(shapes):
    dgx = shapes["dgx_h100"]
    gpu = gpu_plan({n: dgx for n in ("dgx-01", "dgx-02")}, resnet_image="registry.example/resnet:1")
    objects = render_all(plan_from_mapping({**gpu, "resnet_scaling": [1]}))
    assert {o["kind"] for o in objects} == {"MPIJob", "PodGroup", "Service", "Pod"}
    assert {o["metadata"]["labels"][RUN_LABEL] for o in objects} == {"nccl"}
    playbook = yaml.safe_load((ROOT / "playbooks/benchmark.yml").read_text())
    tasks = next(play for play in playbook if play.get("tasks"))["tasks"]
    (removal,) = [task for task in tasks if task["name"] == "Remove the earlier runs' jobs"]
    assert removal["kubernetes.core.k8s"]["label_selectors"] == [RUN_LABEL]
    assert {item["kind"] for item in removal["loop"]} == {o["kind"] for o in objects}


def test_the_resnet50_job_shares_the_first_jobs_shape_and_runs_our_benchmark(shapes):
    dgx = shapes["dgx_h100"]
    plan = plan_from_mapping(gpu_plan({"dgx-01": dgx, "dgx-02": dgx}, resnet_image="registry.example/rn50:1"))
    nccl, resnet, one_node = (o for o in render_all(plan) if o["kind"] == "MPIJob")
    assert resnet["metadata"]["name"] == "nccl-resnet50"
    nccl_pods, resnet_pods = containers(nccl), containers(resnet)
    assert resnet_pods["Worker"]["affinity"]["nodeAffinity"] == nccl_pods["Worker"]["affinity"]["nodeAffinity"]
    worker = resnet_pods["Worker"]["containers"][0]
    assert worker["image"] == "registry.example/rn50:1" and worker["resources"]["requests"]["memory"] == "32Gi"
    devices = {k: v for k, v in nccl_pods["Worker"]["containers"][0]["resources"]["requests"].items() if "/" in k}
    assert {k: v for k, v in worker["resources"]["requests"].items() if "/" in k} == devices
    command = resnet_pods["Launcher"]["containers"][0]["command"]
    assert command[command.index("railforge-resnet50") :] == ["railforge-resnet50", *RESNET_ARGS["gpu"]]
    nccl_command = nccl_pods["Launcher"]["containers"][0]["command"]
    assert exported(command) == exported(nccl_command) and "NCCL_IB_HCA" in exported(command)
    # the scaling series' base by default: the same job on one node's GPUs
    assert one_node["metadata"]["name"] == "nccl-resnet50-w1"
    assert one_node["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 1
    one_command = containers(one_node)["Launcher"]["containers"][0]["command"]
    assert one_command[:4] == ["wait-for-workers", "mpirun", "-np", "8"] and command[3] == "16"
    assert one_command[4:] == command[4:]
    # no image named in GPU mode: no ResNet-50 job
    assert [o["kind"] for o in render_all(plan_from_mapping(gpu_plan({"dgx-01": dgx})))].count("MPIJob") == 1


def test_the_cpu_resnet50_job_trains_a_few_small_steps_over_gloo():
    image = "localhost/railforge-resnet50:0.1.0"
    plan = plan_from_mapping(cpu_plan(resnet_image=image, resnet_args=["--device", "cpu", "--steps", 2]))
    _, resnet = render_all(plan)
    command = containers(resnet)["Launcher"]["containers"][0]["command"]
    assert command == [
        "wait-for-workers", "mpirun", "-np", "2", "--bind-to", "none", "-x", "GLOO_SOCKET_IFNAME=eth0",
        "-x", "OMP_NUM_THREADS=1", "railforge-resnet50", "--device", "cpu", "--steps", "2",
    ]  # fmt: skip
    assert containers(resnet)["Worker"]["containers"][0]["resources"]["limits"] == {"memory": "2Gi"}


def test_the_scaling_series_runs_the_resnet50_job_with_fewer_workers_when_asked():
    image = "localhost/railforge-resnet50:0.1.0"
    assert len(render_all(plan_from_mapping(cpu_plan(resnet_image=image)))) == 2  # CPU mode: none by default
    plan = plan_from_mapping(cpu_plan(resnet_image=image, workers=4, resnet_scaling=[2, 1, 2]))
    assert plan.resnet_scaling == (1, 2)
    jobs = {o["metadata"]["name"]: o["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] for o in render_all(plan)}
    assert jobs == {"railforge-bench": 4, "railforge-bench-resnet50": 4, "railforge-bench-resnet50-w1": 1,
                    "railforge-bench-resnet50-w2": 2}  # fmt: skip


def test_a_local_image_a_node_lacks_stops_the_run_or_leaves_the_resnet50_job_out(shapes):
    """localhost/ images (local builds, no registry serves them) must be on every node of the plan; registry images
    are pulled, and a node the cluster did not list is not judged."""
    mpi, resnet = "localhost/railforge-openmpi:0.1.0", "localhost/railforge-resnet50:0.1.0"
    plan = plan_from_mapping(cpu_plan(nodes=["rf-node-0", "rf-node-1"], resnet_image=resnet, resnet_scaling=[1]))
    both = {"rf-node-0": [mpi, resnet, "docker.io/library/busybox:1"], "rf-node-1": [mpi, resnet]}
    assert images_on_nodes(plan, both) == (plan, [])
    kept, notes = images_on_nodes(plan, {**both, "rf-node-1": [mpi]})
    assert (kept.resnet_image, kept.resnet_scaling) == ("", ())
    assert [o["metadata"]["name"] for o in render_all(kept)] == ["railforge-bench"]
    assert notes == [
        f"railforge_benchmark_resnet_image: {resnet} is not on node rf-node-1: the ResNet-50 job is left out "
        "(deploy/openmpi/build.sh resnet50 writes its archive to load on the nodes; railforge_benchmark_resnet_image:"
        " '' leaves it out without this line)"
    ]
    with pytest.raises(PlanError, match=f"^railforge_benchmark_image: {mpi} is not on node rf-node-0, rf-node-1, "):
        images_on_nodes(plan, {"rf-node-0": [], "rf-node-1": [resnet]})
    assert images_on_nodes(plan, {"rf-node-0": both["rf-node-0"]}) == (plan, [])  # rf-node-1 not listed
    pulled = plan_from_mapping(cpu_plan(image="registry.example/openmpi:1", resnet_image="registry.example/rn50:1"))
    assert images_on_nodes(pulled, {"rf-node-0": []}) == (pulled, [])
    dgx = shapes["dgx_h100"]
    gpu = plan_from_mapping(gpu_plan({"dgx-01": dgx, "dgx-02": dgx}, perftest_image="localhost/perftest:1"))
    with pytest.raises(
        PlanError, match=r"^railforge_benchmark_perftest_image: localhost/perftest:1 is not on node dgx-02"
    ):
        images_on_nodes(gpu, {"dgx-01": ["localhost/perftest:1"], "dgx-02": []})
    one_node = plan_from_mapping(gpu_plan({"dgx-01": dgx}, perftest_image="localhost/perftest:1"))
    assert images_on_nodes(one_node, {"dgx-01": []}) == (one_node, [])  # one node: no perftest pair to run


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"resnet_image": "rn50:1", "job_name": "n" * 50}, "railforge_benchmark_job_name: 'nnnn"),
        ({"resnet_args": "--steps 5"}, "railforge_benchmark_resnet_args: expected a list of arguments"),
        ({"resnet_scaling": [2]}, "railforge_benchmark_resnet_scaling: expected worker counts from 1 to 1 (fewer"),
        ({"resnet_scaling": [0, True]}, "railforge_benchmark_resnet_scaling: expected worker counts from 1 to 1"),
        (
            {"resnet_image": "rn50:1", "resnet_scaling": [1], "job_name": "n" * 43},
            "railforge_benchmark_job_name: 'nnnn",
        ),
        ({"mode": "tpu"}, "railforge_benchmark_mode: expected one of gpu, cpu, got 'tpu'"),
        ({"cluster": "Forge A"}, "railforge_cluster_name: expected a DNS label"),
        ({"nodes": []}, "railforge_benchmark_nodes: expected a list of at least one node name"),
        ({"namespace": "Bench"}, "railforge_benchmark_namespace: 'Bench' is not a DNS label"),
        ({"image": ""}, "railforge_benchmark_image: expected a non-empty string"),
        ({"perftest_tools": ["ib_send_bw"]}, "railforge_benchmark_perftest_tools: 'ib_send_bw'"),
        ({"hardware_class": "b200"}, "railforge_benchmark_hardware_class: hardware class 'b200' is not known"),
        (
            {"floors": {"h100-sxm-cx7-ndr": {"floors": {"ib_write_bw": {"bw_avg_gbps": "fast"}}}}},
            "railforge_benchmark_floors.h100-sxm-cx7-ndr.floors.ib_write_bw.bw_avg_gbps: expected a positive number",
        ),
        ({"workers": 3}, "railforge_benchmark_workers: mode gpu runs one worker per node (2), got 3"),
        ({"rail_networks": {"rail_networks_namespace": "Rails"}}, "rail_networks_namespace: 'Rails' is not a DNS"),
        ({"rail_networks": {"rail_networks_cidrs": []}}, "rail_networks: expected some of rail_networks_namespace"),
        ({"scheduler_name": "Rail Forge"}, "railforge_benchmark_scheduler_name: 'Rail Forge' is not"),
    ],
)
def test_bad_settings_are_refused_naming_the_variable(shapes, change, message):
    dgx = shapes["dgx_h100"]
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_from_mapping(gpu_plan({"dgx-01": dgx, "dgx-02": dgx}, **change))


def test_nodes_of_different_classes_or_without_gpus_are_refused(shapes):
    dgx, pcie = shapes["dgx_h100"], shapes["pcie_2gpu"]
    with pytest.raises(PlanError, match="railforge_benchmark_nodes: node pcie-01 has gpus 2 but dgx-01 has 8"):
        plan_from_mapping(gpu_plan({"dgx-01": dgx, "pcie-01": pcie}))
    other = copy.deepcopy(dgx)
    other["default_interface"] = "eno9"  # with each node's own bootstrap interface: another NCCL class
    own_interface = {"rail_networks_nccl_socket_ifname": ""}
    with pytest.raises(PlanError, match="node dgx-02 has nccl_env"):
        plan_from_mapping(gpu_plan({"dgx-01": dgx, "dgx-02": other}, rail_networks=own_interface))
    plan = plan_from_mapping(gpu_plan({"dgx-01": dgx, "dgx-02": other}))  # both bootstrap over the pods' eth0
    assert {node.nccl_env["NCCL_SOCKET_IFNAME"] for node in plan.nodes} == {"=eth0"}
    with pytest.raises(PlanError, match="node dgx-03: railforge_hw shows 0 GPUs; mode gpu needs GPU nodes"):
        plan_from_mapping(gpu_plan({"dgx-01": dgx}, nodes=["dgx-01", "dgx-03"]))


def run_benchmark_playbook(tmp_path: Path, variables: dict, inventory: str = "localhost,") -> str:
    """playbooks/benchmark.yml with no cluster to reach: its output, flattened, once it failed."""
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    env["ANSIBLE_SSH_ARGS"] = "-o ProxyCommand=false"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", inventory, "playbooks/benchmark.yml",
         f"--extra-vars=@{tmp_path / 'vars.json'}"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2, output
    assert "changed=0" in output and "failed=1" in output
    return output.replace("'", "")


def test_the_playbook_refuses_bad_settings_before_any_change_naming_the_variable(tmp_path):
    """playbooks/benchmark.yml's first steps check the settings: bad ones stop it with nothing applied (no cluster is
    needed to see that; the API server is never reached)."""
    variables = {
        "railforge_cluster_name": "forge-a",
        "railforge_benchmark_mode": "cpu",
        "railforge_benchmark_nodes": ["n1"],
        "railforge_benchmark_floors": {
            "cpu-fallback": {"floors": {"mpi_allreduce": {"busbw_gbps": -1, "message_bytes": 8, "source": "ours"}}}
        },
    }
    output = run_benchmark_playbook(tmp_path, variables)
    assert "railforge_benchmark_floors.cpu-fallback.floors.mpi_allreduce.busbw_gbps: expected a positive number" in (
        output
    )
    # an inventory that passes the pre-flight, without GPU nodes to read: the check comes before any cluster call
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        json.dumps({
            "all": {
                # the scheduler's image from a registry the nodes reach (the pre-flight refuses a local one)
                "vars": {"railforge_cluster_name": "forge-a", "versions_railforge_scheduler_registry": "registry.test"},
                "children": {
                    "kube_control_plane": {"hosts": {"cp-01": {"ansible_host": "127.0.0.1"}}},
                    "kube_node": {"hosts": {"node-01": {"ansible_host": "127.0.0.2"}}},
                    "k8s_cluster": {"children": {"kube_control_plane": {}, "kube_node": {}}},
                },
            }
        })
    )  # fmt: skip
    (tmp_path / "earlier/outputs").mkdir(parents=True)
    variables = {"railforge_benchmark_results": str(tmp_path / "earlier"), "kubernetes_kubeconfig": "/nonexistent"}
    output = run_benchmark_playbook(tmp_path, variables, str(inventory))
    assert f"railforge_benchmark_results: {tmp_path / 'earlier'} holds the logs of an earlier run" in output
