"""``railforge testbed``: build the pinned Kubernetes components, or run a test-bed cluster by hand for debugging."""

from __future__ import annotations

import argparse
import ipaddress
import signal
import threading

from railforge.cliargs import non_negative_int


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("testbed", help="the real-Kubernetes test bed (build, or a cluster for debugging)")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = actions.add_parser("build", help="build the pinned components into the cache (make setup runs this)")
    build.set_defaults(func=_build)
    apt_repo = actions.add_parser(
        "apt-repo", help="build (or find in the cache) the lab's signed apt repository and print its directory"
    )
    apt_repo.set_defaults(func=_apt_repo)
    bridges = actions.add_parser(
        "remove-stale-bridges",
        help="delete the bridges an earlier Podman network of SUBNET left (railforge.testbed.bridges)",
    )
    bridges.add_argument("subnet", type=_ipv4_network, help="the network's subnet, e.g. 10.89.50.0/24")
    bridges.set_defaults(func=_remove_stale_bridges)
    up = actions.add_parser(
        "up", help="start a control plane and a real node with fake GPUs/RDMA devices; Ctrl-C stops and cleans up"
    )
    up.add_argument(
        "--gpus", type=non_negative_int, default=4, help="fake nvidia.com/gpu devices on the node (default 4)"
    )
    up.add_argument("--rails", type=non_negative_int, default=2, help="rdma/railN resources, 1 device each (default 2)")
    up.add_argument("--scheduler", action="store_true", help="also run the default kube-scheduler")
    up.set_defaults(func=_up)


def _build(args: argparse.Namespace) -> int:
    from railforge.testbed.aptrepo import build_repo
    from railforge.testbed.build import main

    status = main()
    if status == 0:
        build_repo()  # the lab's package source, from the binaries just built
    return status


def _apt_repo(args: argparse.Namespace) -> int:
    from railforge.testbed.aptrepo import build_repo

    print(build_repo())
    return 0


def _ipv4_network(text: str) -> str:
    try:
        return str(ipaddress.IPv4Network(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an IPv4 subnet such as 10.89.50.0/24, got {text!r}") from None


def _remove_stale_bridges(args: argparse.Namespace) -> int:
    from railforge.testbed.bridges import gateway, remove_stale_bridges

    for name in remove_stale_bridges(args.subnet):
        print(f"removed {name}, a bridge an earlier Podman network left with {gateway(args.subnet)}")
    return 0


def _up(args: argparse.Namespace) -> int:
    from railforge.lab import rdma_env
    from railforge.testbed.controlplane import ControlPlane
    from railforge.testbed.deviceplugin import FakeDevicePlugin
    from railforge.testbed.node import KubeletNode

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    plane = ControlPlane.start(scheduler=args.scheduler)
    node, plugins = None, []
    try:
        print(f"control plane ready in {plane.ready_seconds:.1f} s: {plane.server}", flush=True)
        node = KubeletNode.start(plane)
        resources = [("nvidia.com/gpu", args.gpus, "NVIDIA_VISIBLE_DEVICES")]
        resources += [(f"rdma/rail{rail}", 1, rdma_env(f"rail{rail}")) for rail in range(args.rails)]
        for resource, count, env in resources:  # one at a time: a failed start stops the ones already started
            plugins.append(FakeDevicePlugin(resource, count, env, node.directory).start())
        print(f"node {node.name} ready in {node.ready_seconds:.1f} s (logs: {node.directory}/*.log)")
        print(f"export KUBECONFIG={plane.admin_kubeconfig}   # cluster admin; kubectl: {_kubectl()}")
        print("Ctrl-C stops everything and removes what was created.", flush=True)
        stop.wait()
    finally:
        for plugin in plugins:
            plugin.stop()
        if node is not None:
            node.stop()
        plane.stop()
    return 0


def _kubectl() -> str:
    from railforge.testbed.build import binary

    return binary("kubectl")
