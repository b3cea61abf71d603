"""Fixtures of the real-Kubernetes test bed: one control plane on loopback for the session, a real node on this
host per module that asks for it (one node at a time: the device-plugin path and the kubelet's sysctls are the
host's).

Each is stopped (its own processes, files, mounts, bridge, cgroups and sysctls) when its scope ends, also after a
failure or an interrupt; if pytest is killed, the control plane, containerd and the kubelet die with it
(containerd's shims and pods do not: docs/testing.md).
"""

import os

import pytest

from railforge.testbed.controlplane import ControlPlane
from railforge.testbed.node import Node


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="the test bed needs root (kubelet, containerd, cgroups)")
        for item in items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def control_plane():
    plane = ControlPlane.start()
    yield plane
    plane.stop()


@pytest.fixture(scope="module")
def node(control_plane):
    real_node = Node.start(control_plane)
    yield real_node
    real_node.stop()
