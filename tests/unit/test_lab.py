"""What `railforge lab job` reads back from the job's pods: the rail address Multus recorded and the table per node
(the lab itself: tests/lab)."""

import json
from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client

from railforge.cli import main
from railforge.lab import JobPod, Rank, diagnosis, node_table, rail_addresses, render_job


def test_the_rail_addresses_are_the_first_address_of_each_interface_multus_added():
    status = [
        {"name": "cbr0", "interface": "eth0", "ips": ["10.244.1.7"], "default": True},
        {"name": "railforge-network/rail0", "interface": "net1", "ips": ["10.200.0.3", "fd00::3"]},
        {"name": "railforge-network/rail1", "interface": "net2", "ips": ["10.201.0.3"]},
    ]
    annotations = {"k8s.v1.cni.cncf.io/network-status": json.dumps(status)}
    assert rail_addresses(annotations) == ("10.200.0.3", "10.201.0.3")
    assert rail_addresses({"k8s.v1.cni.cncf.io/network-status": json.dumps(status[:1])}) == ()
    assert rail_addresses(None) == ()


def test_the_table_shows_each_nodes_pods_ranks_devices_and_rail_addresses():
    pods = [
        JobPod("job-launcher", "launcher", "node-a", "railforge"),
        JobPod("job-worker-0", "worker", "node-a", "railforge", "NVIDIA_VISIBLE_DEVICES=gpu-1", ("10.200.0.2",)),
        JobPod(
            "job-worker-1",
            "worker",
            "node-b",
            "railforge",
            "NVIDIA_VISIBLE_DEVICES=gpu-0",
            ("10.200.0.3", "10.201.0.3"),
        ),
    ]
    ranks = [Rank(0, "job-worker-0", 1024, True, 0.1), Rank(1, "job-worker-1", 1024, False, 0.1)]
    assert node_table(pods, ranks) == [
        (
            "node-a",
            "job-launcher (launcher), job-worker-0 (worker)",
            "0",
            "NVIDIA_VISIBLE_DEVICES=gpu-1",
            "10.200.0.2",
            "ok",
        ),
        ("node-b", "job-worker-1 (worker)", "1", "NVIDIA_VISIBLE_DEVICES=gpu-0", "10.200.0.3,10.201.0.3", "FAIL"),
    ]


def test_the_lab_job_asks_for_its_gpus_every_rail_and_its_network_with_the_nccl_settings():
    rails = ["rail0", "rail1"]
    networks = ["railforge-network/rail0", "railforge-network/rail1"]
    nccl = {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1", "NCCL_SOCKET_IFNAME": "eth0"}
    worker = render_job("j", "ns", 2, "1", 8, rails, networks, nccl)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    container = worker["spec"]["containers"][0]
    assert container["resources"]["limits"] == {
        "memory": "256Mi",
        "nvidia.com/gpu": 8,
        "rdma/rail0": 1,
        "rdma/rail1": 1,
    }
    assert worker["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/networks": ",".join(networks)}
    assert container["env"] == [{"name": name, "value": value} for name, value in sorted(nccl.items())]
    # the first line a worker prints: what Allocate set for each device and the NCCL settings
    assert container["command"][2].startswith(
        "echo devices NVIDIA_VISIBLE_DEVICES=${NVIDIA_VISIBLE_DEVICES} RAILFORGE_RDMA_RAIL0=${RAILFORGE_RDMA_RAIL0} "
        "RAILFORGE_RDMA_RAIL1=${RAILFORGE_RDMA_RAIL1} NCCL_IB_HCA=${NCCL_IB_HCA} "
        "NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME};"
    )
    bare = render_job("j", "ns", 2, "1")["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    assert bare["spec"]["containers"][0]["resources"]["limits"] == {"memory": "256Mi", "nvidia.com/gpu": 1}
    assert "env" not in bare["spec"]["containers"][0] and "k8s.v1.cni.cncf.io/networks" not in bare["metadata"].get(
        "annotations", {}
    )


def test_the_diagnosis_names_pressured_nodes_waiting_pods_and_the_newest_events():
    def node(name, pressure):
        conditions = [client.V1NodeCondition(type="Ready", status="True")]
        conditions.append(client.V1NodeCondition(type="DiskPressure", status="True" if pressure else "False"))
        taints = [client.V1Taint(key="node.kubernetes.io/disk-pressure", effect="NoSchedule")] if pressure else None
        return client.V1Node(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1NodeSpec(taints=taints),
            status=client.V1NodeStatus(conditions=conditions),
        )

    def pod(name, phase, node_name=None, conditions=None, waiting=None):
        statuses = (
            [
                client.V1ContainerStatus(
                    name="worker",
                    image="i",
                    image_id="",
                    ready=False,
                    restart_count=0,
                    state=client.V1ContainerState(waiting=client.V1ContainerStateWaiting(reason=waiting, message="m")),
                )
            ]
            if waiting
            else None
        )
        return client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, namespace="lab"),
            spec=client.V1PodSpec(containers=[], node_name=node_name),
            status=client.V1PodStatus(phase=phase, conditions=conditions, container_statuses=statuses),
        )

    unschedulable = client.V1PodCondition(
        type="PodScheduled", status="False", reason="Unschedulable", message="0/2 nodes are available"
    )
    events = [
        client.CoreV1Event(
            metadata=client.V1ObjectMeta(creation_timestamp=datetime(2026, 1, 1, 0, minute, tzinfo=UTC)),
            involved_object=client.V1ObjectReference(kind="Pod", name="job-worker-0"),
            reason=reason,
            message=message,
        )
        for minute, reason, message in [(2, "Scheduled", "bound"), (1, "Pulled", "image present")]
    ]
    lines = diagnosis(
        [node("node-a", pressure=True), node("node-b", pressure=False)],
        [
            pod("job-worker-0", "Pending", conditions=[unschedulable]),
            pod("job-worker-1", "Pending", "node-b", waiting="ErrImageNeverPull"),
            pod("job-launcher", "Running", "node-b"),
        ],
        events,
    )
    assert lines == [
        "node node-a: not ok ['DiskPressure'], taints ['node.kubernetes.io/disk-pressure:NoSchedule']",
        "node node-b: not ok -, taints -",
        "pod lab/job-worker-0 Pending (unbound): ['PodScheduled Unschedulable: 0/2 nodes are available']",
        "pod lab/job-worker-1 Pending (node-b): ['worker ErrImageNeverPull: m']",
        "event Pod/job-worker-0 Pulled: image present",
        "event Pod/job-worker-0 Scheduled: bound",
    ]


def test_a_lab_workers_hardware_is_a_dgx_h100_that_the_facts_module_reads(tmp_path, capsys):
    """`railforge lab hardware` builds the simulated DGX H100 (over a tree it built earlier, never over one it did
    not) and names its netdevs; the facts module reads 8 GPUs, 4 NVSwitches and 8 InfiniBand rails in GPU order
    from it, each on a printed netdev."""
    import ansible.module_utils

    ansible.module_utils.__path__.append(str(Path(__file__).resolve().parents[2] / "plugins/module_utils"))
    from ansible.module_utils.railforge_hwfacts import gather_hw_facts

    root = tmp_path / "hw"
    (root / "sys/mine").mkdir(parents=True)
    assert main(["lab", "hardware", str(root)]) == 2  # not a tree it built: refused, kept
    assert "did not build" in capsys.readouterr().err and (root / "sys/mine").is_dir()
    (root / "sys/mine").rmdir()
    (root / "sys").rmdir()  # an empty directory is built into
    assert main(["lab", "hardware", str(root)]) == 0
    (root / "sys/stale").mkdir()
    capsys.readouterr()
    assert main(["lab", "hardware", str(root)]) == 0  # its own tree: built afresh
    netdevs = capsys.readouterr().out.split()
    assert not (root / "sys/stale").exists()
    facts = gather_hw_facts(str(root))
    assert (facts["gpu_count"], facts["nvlink"]["nvswitch_count"], facts["rail_count"]) == (8, 4, 8)
    assert [rail["gpu"] for rail in facts["rails"]] == list(range(8))
    assert {rail["link_layer"] for rail in facts["rails"]} == {"InfiniBand"}
    assert {rail["netdev"] for rail in facts["rails"]} < set(netdevs)
    assert facts["rails"][0] == {**facts["rails"][0], "hca": "mlx5_0", "netdev": "ibp24s0"}
