"""Every built binary reports the version the versions file pins (unstamped builds say v0.0.0 or 'unknown')."""

import subprocess

import pytest

from railforge.testbed.build import binary, pinned_versions

VERSION_COMMANDS = {
    "kube-apiserver": (["--version"], "versions_kubernetes", "Kubernetes v{}"),
    "kubelet": (["--version"], "versions_kubernetes", "Kubernetes v{}"),
    "kubeadm": (["version", "-o", "short"], "versions_kubernetes", "v{}"),
    "kubectl": (["version", "--client"], "versions_kubernetes", "Client Version: v{}"),
    "etcd": (["--version"], "versions_etcd", "etcd Version: {}"),
    "containerd": (["--version"], "versions_containerd", " v{} "),
    "runc": (["--version"], "versions_runc", "runc version {}"),
    "crictl": (["--version"], "versions_crictl", "crictl version v{}"),
    "mpi-operator": (["--version"], "versions_mpi_operator", "v{}"),
    "coredns": (["-version"], "versions_coredns", "CoreDNS-{}"),
    "registry": (["--version"], "versions_distribution", "github.com/distribution/distribution/v3 v{}"),
}


@pytest.mark.parametrize("name", sorted(VERSION_COMMANDS))
def test_binary_reports_its_pinned_version(name):
    args, key, expected = VERSION_COMMANDS[name]
    result = subprocess.run([binary(name), *args], capture_output=True, text=True, timeout=30)
    output = result.stdout + result.stderr
    assert expected.format(pinned_versions()[key]) in output, output
