"""What `railforge lab job` reads back from the job's pods: the rail address Multus recorded and the table per node
(the lab itself: tests/lab)."""

import json

from railforge.lab import JobPod, Rank, node_table, rail_address, render_job


def test_the_rail_address_is_the_first_address_of_net1():
    status = [
        {"name": "cbr0", "interface": "eth0", "ips": ["10.244.1.7"], "default": True},
        {"name": "railforge-network/rail0", "interface": "net1", "ips": ["10.89.51.3", "fd00::3"]},
    ]
    assert rail_address({"k8s.v1.cni.cncf.io/network-status": json.dumps(status)}) == "10.89.51.3"
    assert rail_address({"k8s.v1.cni.cncf.io/network-status": json.dumps(status[:1])}) == ""
    assert rail_address(None) == ""


def test_the_table_shows_each_nodes_pods_ranks_devices_and_rail_address():
    pods = [
        JobPod("job-launcher", "launcher", "node-a", "railforge"),
        JobPod("job-worker-0", "worker", "node-a", "railforge", "NVIDIA_VISIBLE_DEVICES=gpu-1", "10.89.51.2"),
        JobPod("job-worker-1", "worker", "node-b", "railforge", "NVIDIA_VISIBLE_DEVICES=gpu-0", "10.89.51.3"),
    ]
    ranks = [Rank(0, "job-worker-0", 1024, True, 0.1), Rank(1, "job-worker-1", 1024, False, 0.1)]
    assert node_table(pods, ranks) == [
        (
            "node-a",
            "job-launcher (launcher), job-worker-0 (worker)",
            "0",
            "NVIDIA_VISIBLE_DEVICES=gpu-1",
            "10.89.51.2",
            "ok",
        ),
        ("node-b", "job-worker-1 (worker)", "1", "NVIDIA_VISIBLE_DEVICES=gpu-0", "10.89.51.3", "FAIL"),
    ]


def test_the_lab_job_asks_for_a_gpu_and_the_rail_it_names():
    worker = render_job("j", "ns", 2, "1", rail="rail0", network="railforge-network/rail0")["spec"]["mpiReplicaSpecs"][
        "Worker"
    ]["template"]
    assert worker["spec"]["containers"][0]["resources"]["limits"]["rdma/rail0"] == 1
    assert worker["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/networks": "railforge-network/rail0"}
    bare = render_job("j", "ns", 2, "1")["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    assert bare["spec"]["containers"][0]["resources"]["limits"] == {"memory": "256Mi", "nvidia.com/gpu": 1}
