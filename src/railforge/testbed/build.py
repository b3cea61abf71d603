"""Build the test bed's upstream components from their pinned Go modules, into a cache keyed by what they are.

The versions come from roles/versions/defaults/main.yml (the file the Kubernetes roles read); the wrapper modules
under tools/ (go.mod + go.sum, committed) must require exactly those versions. Each component lands in
``<cache>/testbed/<name>-<version>-<key>/`` where the key hashes the version, the wrapper's go.mod and go.sum and
the build recipe, so a second build finds everything in place and returns in well under a second.

Only the test bed needs Go; the operator's path (ansible-playbook against real hosts) never builds anything.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from railforge.cliargs import UsageError

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / "tools"
VERSIONS_FILE = ROOT / "roles/versions/defaults/main.yml"
TEST_IMAGE = "localhost/railforge-testpod:1"


def cache_root() -> Path:
    return Path(os.environ.get("RAILFORGE_CACHE", "/var/cache/railforge"))


def pinned_versions() -> dict[str, str]:
    return yaml.safe_load(VERSIONS_FILE.read_text())


@dataclass(frozen=True)
class Component:
    """One wrapper module under tools/ and the binaries built from it."""

    name: str
    tool_dir: str
    version_key: str | None
    module: str  # the upstream module the wrapper requires at the pinned version
    binaries: dict[str, str]  # output name -> main package
    cgo: bool = False
    tags: str = ""
    version_vars: tuple[str, ...] = ()  # package.Variable names the linker sets to the version (vX.Y.Z)
    extra: dict[str, str] = field(default_factory=dict)  # file in the output -> "module:path" to copy from
    # A stand-in for the patch release before the pinned one: the pinned source, its binaries stamped as that release.
    stamp_previous_patch: bool = False

    @property
    def version(self) -> str:
        return pinned_versions()[self.version_key] if self.version_key else "local"

    @property
    def stamped_version(self) -> str:
        """The version its binaries report."""
        if not self.stamp_previous_patch:
            return self.version
        previous = previous_patch(self.version)
        if previous is None:
            raise UsageError(f"{self.name}: {self.version_key} {self.version} is a .0 release: no patch release before")
        return previous

    def key(self) -> str:
        wrapper = TOOLS / self.tool_dir
        digest = hashlib.sha256()
        for part in (self.version, pinned_versions()["versions_go_toolchain"], repr(self), build_recipe()):
            digest.update(part.encode())
        for path in sorted(path for path in wrapper.rglob("*") if path.is_file()):
            digest.update(path.read_bytes())
        return digest.hexdigest()[:12]

    @property
    def out_dir(self) -> Path:
        return cache_root() / "testbed" / f"{self.name}-{self.stamped_version}-{self.key()}"


@functools.cache
def build_recipe() -> str:
    """The source of the functions that build a component, read once per process: an edit of this file while a
    build runs changes no key of that run."""
    return "".join(inspect.getsource(function) for function in (go_env, _ldflags, build_component))


def previous_patch(version: str) -> str | None:
    """The patch release before a release (1.36.5 -> 1.36.4); none before a .0."""
    major, minor, patch = version.split(".")
    return f"{major}.{minor}.{int(patch) - 1}" if int(patch) > 0 else None


# Where Kubernetes binaries read their version from; kubeadm derives the control-plane versions it supports from
# its own, so unstamped binaries (v0.0.0-master) break it.
KUBERNETES_VERSION_PACKAGES = ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version")


# The CNI reference plugins, every Linux one as pkgs.k8s.io's kubernetes-cni holds them (kind: the directory under
# plugins/ upstream keeps them in): the node's conflist chains bridge, host-local and portmap, containerd runs
# loopback, and the rail networks' NetworkAttachmentDefinitions name macvlan or host-device.
CNI_PLUGINS = tuple(
    (kind, name)
    for kind, names in (
        ("main", "bridge dummy host-device ipvlan loopback macvlan ptp tap vlan"),
        ("ipam", "dhcp host-local static"),
        ("meta", "bandwidth firewall portmap sbr tuning vrf"),
    )
    for name in names.split()
)

# Every CRD of the Kueue release (its config/components/crd/bases): the controller manager watches them all.
KUEUE_CRDS = tuple(
    f"kueue.x-k8s.io_{name}"
    for name in (
        "admissionchecks",
        "clusterqueues",
        "cohorts",
        "localqueues",
        "multikueueclusters",
        "multikueueconfigs",
        "provisioningrequestconfigs",
        "resourceflavors",
        "topologies",
        "workloadpriorityclasses",
        "workloads",
    )
)

KUBERNETES = Component(
    "kubernetes",
    "k8s",
    "versions_kubernetes",
    "k8s.io/kubernetes",
    {
        name: f"k8s.io/kubernetes/cmd/{name}"
        for name in (
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kube-proxy",
            "kubelet",
            "kubeadm",
            "kubectl",
        )
    },
    tags="selinux,notest",
    version_vars=tuple(f"{package}.gitVersion" for package in KUBERNETES_VERSION_PACKAGES),
)
# What the lab upgrades from (playbooks/upgrade.yml): Kubernetes as the patch release before the pinned one, a
# stand-in built from the pinned source (only the versions it reports differ), so that an upgrade costs links, not a
# second build of Kubernetes. Built after the others: it reuses their compiled packages.
KUBERNETES_PREVIOUS_PATCH = dataclasses.replace(KUBERNETES, name="kubernetes-previous-patch", stamp_previous_patch=True)


def kubernetes_builds() -> tuple[Component, ...]:
    """The pinned Kubernetes, and the stand-in of the patch release before it where there is one (not before a .0)."""
    return (KUBERNETES, *([KUBERNETES_PREVIOUS_PATCH] if previous_patch(KUBERNETES.version) else []))


COMPONENTS = (
    KUBERNETES,
    Component(
        "etcd",
        "etcd",
        "versions_etcd",
        "go.etcd.io/etcd/server/v3",
        {"etcd": "go.etcd.io/etcd/server/v3", "etcdctl": "go.etcd.io/etcd/etcdctl/v3"},
    ),
    Component(
        "containerd",
        "containerd",
        "versions_containerd",
        "github.com/containerd/containerd/v2",
        {
            name: f"github.com/containerd/containerd/v2/cmd/{name}"
            for name in ("containerd", "containerd-shim-runc-v2", "ctr")
        },
        version_vars=("github.com/containerd/containerd/v2/version.Version",),
    ),
    # cgo + libseccomp: pods run with seccompProfile RuntimeDefault. runc embeds its VERSION file itself.
    Component(
        "runc",
        "runc",
        "versions_runc",
        "github.com/opencontainers/runc",
        {"runc": "github.com/opencontainers/runc"},
        cgo=True,
        tags="seccomp urfave_cli_no_docs",
    ),
    Component(
        "crictl",
        "crictl",
        "versions_crictl",
        "sigs.k8s.io/cri-tools",
        {"crictl": "sigs.k8s.io/cri-tools/cmd/crictl"},
        version_vars=("sigs.k8s.io/cri-tools/pkg/version.Version",),
    ),
    Component(
        "mpi-operator",
        "mpi-operator",
        "versions_mpi_operator",
        "github.com/kubeflow/mpi-operator",
        {"mpi-operator": "github.com/kubeflow/mpi-operator/cmd/mpi-operator"},
        version_vars=("github.com/kubeflow/mpi-operator/pkg/version.Version",),
        # The CRDs and RBAC the tests install, taken from the downloaded release modules (never copied into the
        # repository).
        extra={
            "kubeflow.org_mpijobs.yaml": "github.com/kubeflow/mpi-operator:manifests/base/kubeflow.org_mpijobs.yaml",
            "cluster-role.yaml": "github.com/kubeflow/mpi-operator:manifests/base/cluster-role.yaml",
            "scheduling.x-k8s.io_podgroups.yaml": (
                "sigs.k8s.io/scheduler-plugins:config/crd/bases/scheduling.x-k8s.io_podgroups.yaml"
            ),
        },
    ),
    # The cluster images' entry point (upstream's /go-runner): runs a component, optionally logging to a file.
    Component(
        "kube-log-runner",
        "k8s",
        "versions_kubernetes",
        "k8s.io/kubernetes",
        {"kube-log-runner": "k8s.io/component-base/logs/kube-log-runner"},
    ),
    # CoreDNS keeps its version in a constant (coremain.CoreVersion): nothing to stamp.
    Component(
        "coredns",
        "coredns",
        "versions_coredns",
        "github.com/coredns/coredns",
        {"coredns": "github.com/coredns/coredns"},
    ),
    # The thin plugin, its installer and entry point (the lab's Multus image), and the release's thin-plugin
    # manifest, whose first document is the NetworkAttachmentDefinition CRD (tests/k8s/test_rail_networks.py and
    # the lab install it).
    Component(
        "multus",
        "multus",
        "versions_multus",
        "gopkg.in/k8snetworkplumbingwg/multus-cni.v4",
        {
            name: f"gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/{package}"
            for name, package in (
                ("install_multus", "install_multus"),
                ("thin_entrypoint", "thin_entrypoint"),
                ("multus", "multus"),
                ("passthru", "passthru-cni"),
            )
        },
        version_vars=("gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/multus.version",),
        extra={"multus-daemonset.yml": "gopkg.in/k8snetworkplumbingwg/multus-cni.v4:deployments/multus-daemonset.yml"},
    ),
    # The IPAM plugin and its reconciler (the lab's whereabouts image), and the CRDs of its kubernetes datastore.
    Component(
        "whereabouts",
        "whereabouts",
        "versions_whereabouts",
        "github.com/k8snetworkplumbingwg/whereabouts",
        {
            "whereabouts": "github.com/k8snetworkplumbingwg/whereabouts/cmd",
            "ip-control-loop": "github.com/k8snetworkplumbingwg/whereabouts/cmd/controlloop",
        },
        extra={
            name: f"github.com/k8snetworkplumbingwg/whereabouts:doc/crds/{name}"
            for name in (
                "whereabouts.cni.cncf.io_ippools.yaml",
                "whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml",
            )
        },
    ),
    # Test tooling only: the registry the mirror test serves images from (tests/k8s/test_registry_mirror.py).
    Component(
        "distribution",
        "distribution",
        "versions_distribution",
        "github.com/distribution/distribution/v3",
        {"registry": "github.com/distribution/distribution/v3/cmd/registry"},
        version_vars=("github.com/distribution/distribution/v3/version.version",),
    ),
    # Benchmark and test tooling only: KWOK keeps fake nodes and their pods' lifecycles on the real API server (the
    # arena, tests/k8s/test_arena.py); with it, the stages of the release this project uses (fake nodes made Ready and
    # kept so by their Leases, pods made Running, deleted pods removed).
    Component(
        "kwok",
        "kwok",
        "versions_kwok",
        "sigs.k8s.io/kwok",
        {"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
        extra={
            f"stage-{name}.yaml": f"sigs.k8s.io/kwok:kustomize/stage/{path}/{name}.yaml"
            for path, name in (
                ("node/fast", "node-initialize"),
                ("node/heartbeat-with-lease", "node-heartbeat-with-lease"),
                ("pod/fast", "pod-ready"),
                ("pod/fast", "pod-delete"),
            )
        },
    ),
    # The primary CNI's daemon (the lab's flannel image). Its main package links every backend: cgo for the udp
    # backend's C proxy, and the module proxy lacks the Tencent Cloud SDK of another, which tools/flannel replaces with
    # names only (see its go.mod).
    Component(
        "flannel",
        "flannel",
        "versions_flannel",
        "github.com/flannel-io/flannel",
        {"flanneld": "github.com/flannel-io/flannel"},
        cgo=True,
        version_vars=("github.com/flannel-io/flannel/pkg/version.Version",),
    ),
    # The CNI reference plugins the nodes' kubernetes-cni package installs in /opt/cni/bin.
    Component(
        "cni-plugins",
        "cni-plugins",
        "versions_cni_plugins",
        "github.com/containernetworking/plugins",
        {name: f"github.com/containernetworking/plugins/plugins/{kind}/{name}" for kind, name in CNI_PLUGINS},
        version_vars=("github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion",),
    ),
)

# The arena's peers, built by the arena on its first run (benchmarks/bench_arena.py), not by `make setup`:
# scheduler-plugins' kube-scheduler, with the coscheduling plugin compiled in, and Kueue's controller manager with the
# CRDs of its release.
ARENA_PEERS = (
    Component(
        "scheduler-plugins",
        "scheduler-plugins",
        "versions_scheduler_plugins",
        "sigs.k8s.io/scheduler-plugins",
        # unstamped: a Kubernetes component checks its version as Kubernetes' own (v0.34.7 fails that check), and
        # an unstamped one takes the Kubernetes minor it was built with
        {"kube-scheduler-plugins": "sigs.k8s.io/scheduler-plugins/cmd/scheduler"},
    ),
    Component(
        "kueue",
        "kueue",
        "versions_kueue",
        "sigs.k8s.io/kueue",
        {"kueue": "sigs.k8s.io/kueue/cmd/kueue"},
        version_vars=("sigs.k8s.io/kueue/pkg/version.GitVersion",),
        extra={f"{name}.yaml": f"sigs.k8s.io/kueue:config/components/crd/bases/{name}.yaml" for name in KUEUE_CRDS},
    ),
)
ALL_COMPONENTS = (*COMPONENTS, *ARENA_PEERS, KUBERNETES_PREVIOUS_PATCH)


def component(name: str) -> Component:
    return next(c for c in ALL_COMPONENTS if c.name == name)


class NotBuilt(UsageError, FileNotFoundError):
    """A test-bed binary `make setup` has not built."""


def binary(name: str, component_name: str | None = None) -> str:
    """Path of a built test-bed binary (of the named component, or the first that builds it); a clear error when
    `make setup` has not built it."""
    comp = next((c for c in ALL_COMPONENTS if name in c.binaries and component_name in (None, c.name)), None)
    if comp is None:
        raise KeyError(f"no test-bed component builds {name!r}")
    path = comp.out_dir / "bin" / name
    if not path.exists():
        builder = "python benchmarks/bench_arena.py" if comp in ARENA_PEERS else "make setup"
        raise NotBuilt(f"{path} is missing: run `{builder}` (it builds it into the test bed's cache)")
    return str(path)


def required_version(go_mod: str, module: str) -> str | None:
    """The version a go.mod requires of a module (`require X vN` or a line of a require block)."""
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod, re.MULTILINE)
    return match.group(1) if match else None


def check_wrappers() -> list[str]:
    """Every wrapper under tools/ requires exactly the version pinned in the versions file; problems, listed."""
    problems = []
    for comp in ALL_COMPONENTS:
        go_mod = (TOOLS / comp.tool_dir / "go.mod").read_text()
        found, wanted = required_version(go_mod, comp.module), "v" + comp.version
        if found != wanted:
            problems.append(
                f"tools/{comp.tool_dir}/go.mod requires {comp.module} {found}, but {comp.version_key} in "
                f"{VERSIONS_FILE.relative_to(ROOT)} pins {wanted}: run `go get {comp.module}@{wanted} && go mod tidy` "
                f"in tools/{comp.tool_dir} (Kubernetes, scheduler-plugins: update the staging replace lines too)"
            )
    return problems


def go_env() -> dict[str, str]:
    cache = cache_root()
    return {
        **os.environ,
        "GOTOOLCHAIN": pinned_versions()["versions_go_toolchain"],
        "GOFLAGS": "-trimpath -mod=readonly -gcflags=all=-dwarf=false",
        "GOCACHE": str(cache / "go-build"),
        "GOMODCACHE": str(cache / "gomod"),
    }


def _go(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(["go", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"go {' '.join(args)} (in {cwd.relative_to(ROOT)}) failed:\n{result.stderr.strip()}")
    return result.stdout


def _module_dir(comp: Component, module: str, env: dict[str, str]) -> Path:
    info = json.loads(_go(["mod", "download", "-json", module], TOOLS / comp.tool_dir, env))
    return Path(info["Dir"])


def _ldflags(comp: Component, env: dict[str, str]) -> str:
    version = "v" + comp.stamped_version
    flags = ["-s", "-w", *(f"-X {variable}={version}" for variable in comp.version_vars)]
    if comp.module == KUBERNETES.module and comp.version_vars:
        major, minor, _ = comp.stamped_version.split(".")
        module = f"{comp.module}@v{comp.version}"
        info = json.loads(_go(["mod", "download", "-json", module], TOOLS / comp.tool_dir, env))
        built = json.loads(Path(info["Info"]).read_text())["Time"]  # the release's time: a reproducible buildDate
        for package in KUBERNETES_VERSION_PACKAGES:
            flags += [
                f"-X {package}.{name}" for name in (f"gitMajor={major}", f"gitMinor={minor}", "gitTreeState=clean")
            ]
            flags.append(f"-X {package}.buildDate={built}")
    return " ".join(flags)


def build_component(comp: Component, env: dict[str, str]) -> Path:
    out = comp.out_dir
    if (out / "manifest.json").exists():
        return out
    started = time.monotonic()
    print(f"testbed: building {comp.name} {comp.stamped_version} (cold: minutes; cached in {out})", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    (staging / "bin").mkdir()
    build_env = {**env, "CGO_ENABLED": "1" if comp.cgo else "0"}
    try:
        for binary, package in comp.binaries.items():
            args = ["build", "-ldflags", _ldflags(comp, env), "-o", str(staging / "bin" / binary)]
            _go([*args, *(["-tags", comp.tags] if comp.tags else []), package], TOOLS / comp.tool_dir, build_env)
        for name, source in comp.extra.items():
            module, path = source.split(":", 1)
            shutil.copy(_module_dir(comp, module, env) / path, staging / name)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    seconds = round(time.monotonic() - started, 1)
    manifest = {"component": comp.name, "version": comp.stamped_version, "seconds": seconds}
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    staging.rename(out)
    print(f"testbed: {comp.name} built in {manifest['seconds']} s", flush=True)
    return out


# Our own pause program (tools/pause), static: the sandbox image's only file.
PAUSE = Component("pause", "pause", None, "railforge.invalid/tools/pause", {"pause": "."})


def _import_image(
    rootfs: Path, ref: str, entrypoint: list[str], archive: Path, storage: Path, changes: list[str] | None = None
) -> None:
    """rootfs -> a Podman image -> a docker-archive (keeps the full name) that `ctr images import` loads. The image
    lives in a throw-away Podman store, never the host's (which may hold a real image of the same name). changes:
    further Dockerfile instructions for the image's configuration (ENV, USER, WORKDIR, CMD)."""
    podman = ["podman", f"--root={storage}/root", f"--runroot={storage}/run", "--storage-driver=vfs"]
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    options = [f"--change={change}" for change in [f"ENTRYPOINT {json.dumps(entrypoint)}", *(changes or [])]]
    subprocess.run([*podman, "import", *options, "-", ref], stdin=tar.stdout, check=True, capture_output=True)
    if tar.wait():
        raise SystemExit(f"tar of {rootfs} failed")
    subprocess.run([*podman, "save", "--quiet", "--format", "docker-archive", "-o", str(archive), ref], check=True)


def _busybox_deb(work: Path) -> Path:
    subprocess.run(["apt-get", "download", "-q", "busybox-static"], cwd=work, check=True, capture_output=True)
    return next(work.glob("busybox-static_*.deb"))


def link_busybox_applets(root: Path) -> None:
    """A link in root's /bin for every applet of root's /bin/busybox that has no file of its own."""
    busybox = root / "bin/busybox"
    applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout
    for applet in applets.split():
        link = root / "bin" / applet
        if not link.exists():
            link.symlink_to("busybox")  # relative: valid inside the image


def images_dir() -> Path:
    """Where the image archives are: keyed by the pause program, the image names and the recipe below."""
    recipe = inspect.getsource(build_images) + inspect.getsource(_import_image)
    key = f"{PAUSE.key()}|{pinned_versions()['versions_pause_image']}|{TEST_IMAGE}|{recipe}"
    return cache_root() / "testbed" / f"images-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def build_images(env: dict[str, str]) -> Path:
    """The sandbox image (our pause program, under the name kubelet expects) and a small Debian-based test image
    (Debian's busybox-static), as docker archives. No registry is involved."""
    out = images_dir()
    if (out / "manifest.json").exists():
        return out
    pause = build_component(PAUSE, env)
    pause_ref = pinned_versions()["versions_pause_image"]
    out.parent.mkdir(parents=True, exist_ok=True)
    # Podman refuses a runroot path of 50 characters or more: its store goes to a short temporary directory.
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp, tempfile.TemporaryDirectory(prefix="rf-podman-") as store:
        work, staging = Path(tmp), Path(tmp) / "out"
        staging.mkdir()
        pause_root = work / "pause-root"
        pause_root.mkdir()
        shutil.copy(pause / "bin/pause", pause_root / "pause")
        _import_image(pause_root, pause_ref, ["/pause"], staging / "pause.tar", Path(store))
        deb = _busybox_deb(work)
        test_root = work / "test-root"
        subprocess.run(["dpkg-deb", "-x", str(deb), str(test_root)], check=True)
        link_busybox_applets(test_root)
        for directory in ("tmp", "etc", "proc", "sys", "dev"):
            (test_root / directory).mkdir(exist_ok=True)
        (test_root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n")
        _import_image(test_root, TEST_IMAGE, ["/bin/sh"], staging / "testpod.tar", Path(store))
        images = {pause_ref: "pause.tar", TEST_IMAGE: "testpod.tar", "busybox-static": deb.name}
        (staging / "manifest.json").write_text(json.dumps(images, indent=2) + "\n")
        staging.rename(out)
    return out


def main(argv: list[str] | None = None) -> int:
    from railforge.testbed.images import build_cluster_images  # it builds on this module

    problems = check_wrappers()
    if problems:
        print("testbed: the wrapper modules disagree with the versions file:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    if shutil.which("go") is None:
        print(
            "testbed: no `go` command; install Go >= 1.21 (the pinned toolchain "
            f"{pinned_versions()['versions_go_toolchain']} is then fetched through the module proxy by GOTOOLCHAIN)",
            file=sys.stderr,
        )
        return 1
    started = time.monotonic()
    env = go_env()
    (cache_root() / "testbed").mkdir(parents=True, exist_ok=True)
    # Two builds at a time: a single `go build` leaves a core idle while it downloads modules or links.
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda comp: build_component(comp, env), COMPONENTS))
    if KUBERNETES_PREVIOUS_PATCH in kubernetes_builds():
        build_component(KUBERNETES_PREVIOUS_PATCH, env)
    else:
        print(f"testbed: versions_kubernetes {KUBERNETES.version} is a .0 release: no earlier patch to upgrade from")
    build_images(env)
    build_cluster_images(env)
    print(f"testbed: components ready in {time.monotonic() - started:.1f} s ({cache_root() / 'testbed'})")
    return 0
