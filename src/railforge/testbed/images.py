"""The lab cluster's container images, made from the test bed's own binaries: no registry is involved.

kubeadm pulls nothing when every image it names is already in containerd. This module builds those images
(kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, also as the stand-in of the patch release before
the pin that the lab upgrades from; CoreDNS, etcd, pause), the primary CNI's
(flannel), the MPI operator's and the rail networks' (Multus thin, whereabouts) as docker archives, under the names
the versions file gives them, into ``<cache>/testbed/cluster-images-<key>/`` with a ``manifest.json`` {image ref:
archive file}. The key hashes the binaries' own cache keys, the image names, the Debian packages, our files and the
recipe below, so a warm `railforge testbed build` finds everything in place.

Each image holds a static binary where upstream's image has it, the /etc/passwd, /etc/group and /tmp a distroless
base has, and upstream's entry point, user, working directory and PATH. kube-proxy's also holds the iptables (nft
backend), nft and conntrack userland, unpacked from the Debian packages of the build host, and flannel's the iptables
userland its masquerading and forwarding rules go through (and the C library its cgo build links); whereabouts' also
Debian's
busybox-static (its entry point is a shell script: whereabouts-install-cni.sh, ours).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from railforge.testbed.build import (
    NotBuilt,
    _import_image,
    binary,
    build_component,
    build_images,
    cache_root,
    component,
    images_dir,
    kubernetes_builds,
    link_busybox_applets,
    pinned_versions,
)

# distroless's PATH: kubeadm's static pods run `etcd`, `kube-apiserver`, ... by name.
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NONROOT = 65532  # distroless's `nonroot` user, CoreDNS's upstream default
USERS = {"root": (0, "/root"), "nobody": (65534, "/nonexistent"), "nonroot": (NONROOT, "/home/nonroot")}
PASSWD = "".join(f"{name}:x:{uid}:{uid}:{name}:{home}:/sbin/nologin\n" for name, (uid, home) in USERS.items())
GROUP = "".join(f"{name}:x:{uid}:\n" for name, (uid, _) in USERS.items())
# kube-proxy's userland; their dependencies are resolved by apt. Debian's iptables postinst points the plain names
# at the nft variants through alternatives: here the links go straight to the multi-call binary.
KUBE_PROXY_PACKAGES = ("iptables", "conntrack", "nftables")
IPTABLES_NFT_NAMES = tuple(
    f"{family}{suffix}" for family in ("iptables", "ip6tables") for suffix in ("", "-save", "-restore")
)


@dataclass(frozen=True)
class ClusterImage:
    ref: str
    archive: str
    binaries: dict[str, str]  # path in the image -> test-bed binary
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...] = ()
    user: int = 0
    workdir: str = "/"
    packages: tuple[str, ...] = ()  # Debian packages unpacked into the image, with their dependencies
    files: tuple[tuple[str, str], ...] = ()  # (path in the image, file next to this module), executable
    binaries_of: str | None = None  # the component its binaries come from, where it builds them: the first that does


def kubeadm_coredns_repository(registry: str) -> str:
    """kubeadm keeps CoreDNS under a coredns/ sub-path of its default registry only, not of another repository."""
    return f"{registry}/coredns" if registry == "registry.k8s.io" else registry


def cluster_image_specs() -> tuple[ClusterImage, ...]:
    pins = pinned_versions()
    registry = pins["versions_kubernetes_registry"]
    etcd_tag = pins["versions_etcd_image_tag"]
    if not etcd_tag.startswith(pins["versions_etcd"] + "-"):
        raise SystemExit(
            f"versions_etcd_image_tag {etcd_tag!r} must name the built etcd: '{pins['versions_etcd']}-<n>' "
            "(roles/versions/defaults/main.yml)"
        )
    # The pinned release's, and the stand-in of the patch release before it the lab upgrades from (where there is one).
    control_plane = tuple(
        ClusterImage(
            f"{registry}/{name}:v{build.stamped_version}",
            f"{name}-{build.stamped_version}.tar" if build.stamp_previous_patch else f"{name}.tar",
            {f"/usr/local/bin/{name}": name, "/go-runner": "kube-log-runner"},
            ("/go-runner",),
            packages=KUBE_PROXY_PACKAGES if name == "kube-proxy" else (),
            binaries_of=build.name,
        )
        for build in kubernetes_builds()
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")
    )
    return (
        *control_plane,
        ClusterImage(
            f"{registry}/etcd:{etcd_tag}",
            "etcd.tar",
            {"/usr/local/bin/etcd": "etcd", "/usr/local/bin/etcdctl": "etcdctl"},
            (),
            cmd=("/usr/local/bin/etcd",),
            workdir="/var/lib/etcd",
        ),
        ClusterImage(
            f"{kubeadm_coredns_repository(registry)}/coredns:v{pins['versions_coredns']}",
            "coredns.tar",
            {"/coredns": "coredns"},
            ("/coredns",),
            user=NONROOT,
        ),
        ClusterImage(
            f"{pins['versions_flannel_registry']}/flannel:v{pins['versions_flannel']}",
            "flannel.tar",
            {"/opt/bin/flanneld": "flanneld"},
            ("/opt/bin/flanneld",),
            packages=("iptables",),
        ),
        ClusterImage(
            f"{pins['versions_mpi_operator_registry']}/mpi-operator:{pins['versions_mpi_operator']}",
            "mpi-operator.tar",
            {"/opt/mpi-operator": "mpi-operator"},
            ("/opt/mpi-operator",),
            cmd=("--help",),
        ),
        # What rail_networks' DaemonSets run: upstream's paths.
        ClusterImage(
            f"{pins['versions_multus_registry']}/multus-cni:v{pins['versions_multus']}",
            "multus-cni.tar",
            {
                "/install_multus": "install_multus",
                "/thin_entrypoint": "thin_entrypoint",
                "/usr/src/multus-cni/bin/multus": "multus",
                "/usr/src/multus-cni/bin/passthru": "passthru",
            },
            ("/thin_entrypoint",),
        ),
        ClusterImage(
            f"{pins['versions_whereabouts_registry']}/whereabouts:v{pins['versions_whereabouts']}",
            "whereabouts.tar",
            {"/whereabouts": "whereabouts", "/ip-control-loop": "ip-control-loop"},
            ("/install-cni.sh",),
            packages=("busybox-static",),
            files=(("/install-cni.sh", "whereabouts-install-cni.sh"),),
        ),
    )


IMAGE_COMPONENTS = (
    "kubernetes",
    "kube-log-runner",
    "etcd",
    "coredns",
    "flannel",
    "mpi-operator",
    "multus",
    "whereabouts",
    *(build.name for build in kubernetes_builds()[1:]),
)


def cluster_images_dir() -> Path:
    """Keyed by the binaries' cache keys, the images (names, contents, configuration) and this module's recipe."""
    recipe = "".join(inspect.getsource(function) for function in (build_cluster_images, _rootfs, _unpack_packages))
    parts = [component(name).key() for name in IMAGE_COMPONENTS]
    files = [Path(__file__).with_name(name).read_text() for image in cluster_image_specs() for _, name in image.files]
    key = "|".join([*parts, images_dir().name, repr(cluster_image_specs()), PASSWD, GROUP, recipe, *files])
    return cache_root() / "testbed" / f"cluster-images-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def cluster_images() -> Path:
    """The directory of the cluster's image archives and their manifest.json; a clear error when not built."""
    directory = cluster_images_dir()
    if not (directory / "manifest.json").exists():
        raise NotBuilt(f"{directory} is missing: run `make setup` (it builds the test bed into a cache)")
    return directory


def _unpack_packages(packages: tuple[str, ...], root: Path, work: Path) -> list[str]:
    """Download the packages and everything they depend on (apt's resolution), unpack them into root; the .deb
    file names, which carry the versions."""
    depends = subprocess.run(
        ["apt-cache", "depends", "--recurse", "--important", *packages], capture_output=True, text=True, check=True
    ).stdout
    closure = sorted({line for line in depends.splitlines() if line and not line.startswith((" ", "<"))})
    debs = work / "debs"
    debs.mkdir(exist_ok=True)
    subprocess.run(["apt-get", "download", "-q", *closure], cwd=debs, check=True, capture_output=True)
    files = sorted(debs.glob("*.deb"))
    for deb in files:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return [deb.name for deb in files]


def _rootfs(image: ClusterImage, root: Path, work: Path) -> list[str]:
    """An image's file tree under root; the Debian packages it holds."""
    debs = _unpack_packages(image.packages, root, work) if image.packages else []
    if "iptables" in image.packages:
        for name in IPTABLES_NFT_NAMES:
            (root / "usr/sbin" / name).symlink_to("xtables-nft-multi")
    if "busybox-static" in image.packages:
        link_busybox_applets(root)
    for path, name in image.files:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(__file__).with_name(name), target)
        target.chmod(0o755)
    for path, name in image.binaries.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        builder = image.binaries_of if image.binaries_of and name in component(image.binaries_of).binaries else None
        shutil.copy(binary(name, builder), target)
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc/passwd").write_text(PASSWD)
    (root / "etc/group").write_text(GROUP)
    (root / "tmp").mkdir(exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / image.workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)
    return debs


def build_cluster_images(env: dict[str, str]) -> Path:
    """Every image of cluster_image_specs() plus the sandbox image, as docker archives (kept when already built)."""
    out = cluster_images_dir()
    if (out / "manifest.json").exists():
        return out
    for name in IMAGE_COMPONENTS:
        build_component(component(name), env)
    pause = build_images(env) / "pause.tar"
    started = time.monotonic()
    print(f"testbed: building the cluster's images (cold: about 20 s; cached afterwards in {out})", flush=True)
    pause_ref = pinned_versions()["versions_pause_image"]
    out.parent.mkdir(parents=True, exist_ok=True)
    # Podman refuses a runroot path of 50 characters or more: its store goes to a short temporary directory.
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp, tempfile.TemporaryDirectory(prefix="rf-podman-") as store:
        staging = Path(tmp) / "out"
        staging.mkdir()
        shutil.copy(pause, staging / "pause.tar")
        manifest, debian = {pause_ref: "pause.tar"}, {}
        for image in cluster_image_specs():
            root, work = Path(tmp) / f"{image.archive}-root", Path(tmp) / f"{image.archive}-work"
            root.mkdir()
            work.mkdir()
            debs = _rootfs(image, root, work)
            changes = [f"ENV PATH={PATH}", f"USER {image.user}:{image.user}", f"WORKDIR {image.workdir}"]
            changes += [f"CMD {json.dumps(list(image.cmd))}"] if image.cmd else []
            _import_image(root, image.ref, list(image.entrypoint), staging / image.archive, Path(store), changes)
            manifest[image.ref] = image.archive
            if debs:
                debian[image.ref] = debs
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        (staging / "debian-packages.json").write_text(json.dumps(debian, indent=2) + "\n")
        staging.rename(out)
    print(f"testbed: the cluster's images built in {time.monotonic() - started:.1f} s", flush=True)
    return out
