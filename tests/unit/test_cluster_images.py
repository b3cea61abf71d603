"""The lab cluster's image names come from the versions file, the way kubeadm names what it pulls (the built
images themselves: tests/k8s/test_cluster_images.py)."""

import pytest

from railforge.testbed import images
from railforge.testbed.build import pinned_versions, previous_patch


def refs(monkeypatch, **pins) -> dict[str, str]:
    monkeypatch.setattr(images, "pinned_versions", lambda: {**pinned_versions(), **pins})
    return {image.archive: image.ref for image in images.cluster_image_specs()}


def test_a_mirror_registry_renames_every_kubeadm_image_and_flattens_coredns(monkeypatch):
    named = refs(monkeypatch, versions_kubernetes_registry="mirror.example:5000/k8s", versions_coredns="1.99.0")
    assert (
        named["kube-apiserver.tar"]
        == f"mirror.example:5000/k8s/kube-apiserver:v{pinned_versions()['versions_kubernetes']}"
    )
    assert named["etcd.tar"] == f"mirror.example:5000/k8s/etcd:{pinned_versions()['versions_etcd_image_tag']}"
    assert named["coredns.tar"] == "mirror.example:5000/k8s/coredns:v1.99.0"  # kubeadm's rule for a custom repository
    assert named["mpi-operator.tar"].startswith(pinned_versions()["versions_mpi_operator_registry"] + "/mpi-operator:")


def test_the_default_registry_keeps_coredns_under_its_sub_path(monkeypatch):
    assert refs(monkeypatch, versions_coredns="1.99.0")["coredns.tar"] == "registry.k8s.io/coredns/coredns:v1.99.0"


def test_an_etcd_image_tag_that_does_not_name_the_built_etcd_is_refused(monkeypatch):
    with pytest.raises(SystemExit, match=r"versions_etcd_image_tag '3\.5\.0-0' must name the built etcd"):
        refs(monkeypatch, versions_etcd_image_tag="3.5.0-0")


def test_the_cache_directory_follows_the_image_names(monkeypatch, tmp_path):
    monkeypatch.setenv("RAILFORGE_CACHE", str(tmp_path))
    before = images.cluster_images_dir()
    refs(monkeypatch, versions_mpi_operator="0.9.9")
    assert images.cluster_images_dir() != before
    assert images.cluster_images_dir().parent == tmp_path / "testbed"


def test_unbuilt_images_are_named_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("RAILFORGE_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="run `make setup`"):
        images.cluster_images()


def test_the_control_plane_images_come_also_as_the_stand_in_of_the_patch_release_before_the_pin(monkeypatch):
    named, pinned = refs(monkeypatch), pinned_versions()["versions_kubernetes"]
    previous = previous_patch(pinned)
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"):
        assert named[f"{name}.tar"] == f"registry.k8s.io/{name}:v{pinned}"
        assert named[f"{name}-{previous}.tar"] == f"registry.k8s.io/{name}:v{previous}"
    specs = {image.archive: image for image in images.cluster_image_specs()}
    assert specs[f"kube-apiserver-{previous}.tar"].binaries_of == "kubernetes-previous-patch"
    assert specs["kube-apiserver.tar"].binaries_of == "kubernetes"
