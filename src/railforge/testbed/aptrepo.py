"""The lab's air-gapped package source: a signed, flat apt repository of our own Kubernetes packages.

The packages carry the names, versions, installed paths and dependencies of those the kubernetes role installs from
pkgs.k8s.io (kubelet, kubeadm, kubectl, cri-tools, kubernetes-cni) and from Docker's repository
(containerd.io), but hold the binaries the test bed built from the pinned Go modules (build.py); kubelet, kubeadm and
kubectl also as the stand-in of the patch release before the pin, which the lab upgrades from. Beside them lie the
Debian packages a node of the test image lacks for them, so a node with no network installs everything from this one
directory.

The repository lands in ``<cache>/testbed/aptrepo-<version>-<key>/repo/``, the key hashing the built components,
the pins, the node image's tag, the unit files under debian/ and this recipe: a second build returns at once. It is
signed by a key made for that directory alone, in a throw-away GNUPGHOME; only its public half (key.asc) is kept.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from string import Template

from railforge.testbed.build import (
    CNI_PLUGINS,
    ROOT,
    Component,
    binary,
    cache_root,
    component,
    kubernetes_builds,
    pinned_versions,
)

TEMPLATES = Path(__file__).with_name("debian")
NODE_IMAGE_TAG_FILE = ROOT / "molecule/image/TAG"
CONTAINERS_CONF = ROOT / "molecule/containers.conf"  # runc and ulimits this host allows (see that file)
MAINTAINER = "Railforge <railforge@railforge.invalid>"
# The pins the package versions are made of (the binaries' own versions are in the components' cache keys).
VERSION_PINS = (
    "versions_kubernetes",
    "versions_kubernetes_package_revision",
    "versions_crictl",
    "versions_containerd",
    "versions_containerd_package_revision",
    "versions_cni_plugins",
    "versions_cni_plugins_package_revision",
)
# Installed beside the packages' own dependencies, as upstream's install guides ask for them or the kubernetes role
# needs them: the tools kube-proxy and kubeadm's preflight look for, gpg for the role's signed-repository task.
NODE_EXTRAS = ("conntrack", "socat", "ebtables", "ethtool", "iptables", "gnupg")


@dataclass(frozen=True)
class Package:
    """One .deb: where each file goes (installed path -> source file) and its control fields."""

    name: str
    version: str
    section: str
    description: str
    files: dict[str, Path]
    directories: tuple[str, ...] = ()
    depends: tuple[str, ...] = ()
    recommends: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    homepage: str = "https://kubernetes.io"
    unit: str | None = None  # the systemd unit its maintainer scripts enable, start and stop

    @property
    def filename(self) -> str:
        return f"{self.name}_{self.version}_amd64.deb"

    @property
    def conffiles(self) -> list[str]:
        return sorted(path for path in self.files if path.startswith("/etc/"))


def _pin(name: str) -> str:
    """A pin that becomes part of a package version: refused, by name, unless Debian accepts it there."""
    value = str(pinned_versions().get(name, ""))
    if not re.fullmatch(r"[0-9][A-Za-z0-9.+~]*", value):
        raise SystemExit(
            f"apt-repo: {name} in roles/versions/defaults/main.yml is {value!r}; expected a version part of a "
            "Debian package version: a digit, then digits, letters, '.', '+' or '~' (e.g. 1.36.5 or 1.1)"
        )
    return value


def kubernetes_packages(comp: Component) -> tuple[Package, ...]:
    """kubelet, kubeadm and kubectl of a build of Kubernetes, at the version its binaries report. Dependencies follow
    pkgs.k8s.io's 1.36 packages: kubeadm has none (kubelet and kubectl went at 1.30), kubelet needs kubernetes-cni,
    mount and util-linux and recommends iptables."""
    version = f"{comp.stamped_version}-{_pin('versions_kubernetes_package_revision')}"
    unit_dir = "/usr/lib/systemd/system"
    return (
        Package(
            "kubelet",
            version,
            "net",
            "Kubernetes node agent\n Runs the pods the API server assigns to this node (Railforge test-bed build).",
            {
                "/usr/bin/kubelet": Path(binary("kubelet", comp.name)),
                f"{unit_dir}/kubelet.service": TEMPLATES / "kubelet.service",
                "/etc/default/kubelet": TEMPLATES / "kubelet.default",
            },
            directories=("/var/lib/kubelet", "/etc/kubernetes/manifests"),
            depends=(f"kubernetes-cni (>= {_pin('versions_cni_plugins')})", "mount", "util-linux"),
            recommends=("iptables (>= 1.8.4)",),
            unit="kubelet.service",
        ),
        Package(
            "kubeadm",
            version,
            "admin",
            "Kubernetes cluster bootstrap tool\n Creates and joins cluster nodes (Railforge test-bed build).",
            {
                "/usr/bin/kubeadm": Path(binary("kubeadm", comp.name)),
                f"{unit_dir}/kubelet.service.d/10-kubeadm.conf": TEMPLATES / "10-kubeadm.conf",
            },
        ),
        Package(
            "kubectl",
            version,
            "admin",
            "Kubernetes command-line client\n Talks to a cluster's API server (Railforge test-bed build).",
            {"/usr/bin/kubectl": Path(binary("kubectl", comp.name))},
        ),
    )


def packages() -> tuple[Package, ...]:
    """Our packages at the pinned versions, and kubelet, kubeadm and kubectl of the patch release before them (the
    stand-in the lab upgrades from), where there is one. cri-tools has no dependencies since 1.32."""
    _pin("versions_kubernetes")
    cni_plugins = _pin("versions_cni_plugins")
    unit_dir = "/usr/lib/systemd/system"
    return (
        *(package for build in kubernetes_builds() for package in kubernetes_packages(build)),
        Package(
            "cri-tools",
            f"{_pin('versions_crictl')}-{_pin('versions_kubernetes_package_revision')}",
            "admin",
            "Container Runtime Interface client\n crictl inspects and debugs a node's CRI runtime (Railforge "
            "test-bed build).",
            {"/usr/bin/crictl": Path(binary("crictl"))},
        ),
        Package(
            "kubernetes-cni",
            f"{cni_plugins}-{_pin('versions_cni_plugins_package_revision')}",
            "net",
            "Container Network Interface plugins\n The CNI reference plugins in /opt/cni/bin, where the container "
            "runtime looks for them (Railforge test-bed build).",
            {f"/opt/cni/bin/{name}": Path(binary(name)) for _, name in CNI_PLUGINS},
            homepage="https://www.cni.dev",
        ),
        Package(
            "containerd.io",
            f"{_pin('versions_containerd')}-{_pin('versions_containerd_package_revision')}",
            "devel",
            "Container runtime with runc\n containerd, its runc shim, ctr and runc in one package, as Docker's "
            "repository bundles them (Railforge test-bed build).",
            {
                **{
                    f"/usr/bin/{name}": Path(binary(name))
                    for name in ("containerd", "containerd-shim-runc-v2", "ctr", "runc")
                },
                f"{unit_dir}/containerd.service": TEMPLATES / "containerd.service",
                "/etc/containerd/config.toml": TEMPLATES / "containerd.toml",
            },
            provides=("containerd", "runc"),
            homepage="https://containerd.io",
            unit="containerd.service",
        ),
    )


def control_text(package: Package, shlib_depends: str = "") -> str:
    """DEBIAN/control. shlib_depends: what dpkg-shlibdeps found the package's dynamic binaries need."""
    depends = ", ".join(filter(None, [shlib_depends, *package.depends]))
    fields = {
        "Package": package.name,
        "Version": package.version,
        "Architecture": "amd64",
        "Maintainer": MAINTAINER,
        "Section": package.section,
        "Priority": "optional",
        "Depends": depends,
        "Recommends": ", ".join(package.recommends),
        "Provides": ", ".join(package.provides),
        # Docker's containerd.io replaces Debian's containerd and runc; so does ours.
        "Conflicts": ", ".join(package.provides),
        "Replaces": ", ".join(package.provides),
        "Homepage": package.homepage,
        "Description": package.description,
    }
    return "".join(f"{field}: {value}\n" for field, value in fields.items() if value)


def _is_program(path: str) -> bool:
    return path.startswith(("/usr/bin/", "/opt/cni/bin/"))


def _shlib_depends(tree: Path, package: Package) -> str:
    """dpkg-shlibdeps over the package's binaries (only runc is dynamic: libc6, libseccomp2)."""
    binaries = [tree / path.lstrip("/") for path in package.files if _is_program(path)]
    source_control = tree.parent / "control"  # dpkg-shlibdeps reads the package's entry from a source tree
    source_control.write_text(f"Source: railforge-lab\n\nPackage: {package.name}\nArchitecture: amd64\n")
    result = subprocess.run(
        ["dpkg-shlibdeps", "-O", "--ignore-missing-info", *map(str, binaries)],
        cwd=tree.parents[1],
        capture_output=True,
        text=True,
        check=True,
    )
    match = re.search(r"^shlibs:Depends=(.*)$", result.stdout, re.MULTILINE)
    return match.group(1) if match else ""


def build_package(package: Package, work: Path, out: Path) -> str:
    """Stage the package's tree under work/<version>/debian/<name> (where dpkg-shlibdeps looks), build it into out
    and return its control text."""
    tree = work / package.version / "debian" / package.name
    for path, source in package.files.items():
        target = tree / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        target.chmod(0o755 if _is_program(path) else 0o644)
    for directory in package.directories:
        (tree / directory.lstrip("/")).mkdir(parents=True, exist_ok=True)
    meta = tree / "DEBIAN"
    meta.mkdir()
    control = control_text(package, _shlib_depends(tree, package))
    (meta / "control").write_text(control)
    if package.conffiles:
        (meta / "conffiles").write_text("".join(f"{path}\n" for path in package.conffiles))
    if package.unit:
        for script in ("postinst", "prerm", "postrm"):
            text = Template((TEMPLATES / script).read_text()).substitute(unit=package.unit)
            (meta / script).write_text(text)
            (meta / script).chmod(0o755)
    # zstd: a tenth of xz's time for these ~350 MB of static binaries; dpkg reads it since Debian 12.
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zzstd", "-z3", "--build", str(tree), str(out / package.filename)],
        check=True,
        capture_output=True,
    )
    return control


def debian_requirements(controls: list[str]) -> list[str]:
    """Names apt must resolve from Debian: what our packages' control texts depend on or recommend that we do not
    build ourselves, then the extras."""
    own = {name for control in controls for name in re.findall(r"^Package: (\S+)$", control, re.MULTILINE)}
    wanted = []
    for control in controls:
        for relations in re.findall(r"^(?:Depends|Recommends): (.*)$", control, re.MULTILINE):
            for relation in relations.split(","):
                name = relation.split()[0]
                if name not in own and name not in wanted:
                    wanted.append(name)
    return wanted + [name for name in NODE_EXTRAS if name not in wanted]


def parse_simulation(output: str) -> dict[str, str]:
    """`apt-get install -s` output -> {package: version} of every package it would install or upgrade."""
    found = {}
    for line in output.splitlines():
        match = re.match(r"Inst (\S+) (?:\[\S+\] )?\((\S+) ", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def node_image() -> str:
    return NODE_IMAGE_TAG_FILE.read_text().strip()


def node_closure(names: list[str]) -> dict[str, str]:
    """What the node image lacks to install `names`, with the versions the host's apt lists offer: apt simulates the
    install against the image's dpkg status, read from a throw-away container with no network."""
    status = subprocess.run(
        ["podman", "run", "--rm", "--network=none", node_image(), "cat", "/var/lib/dpkg/status"],
        capture_output=True,
        text=True,
        env={"CONTAINERS_CONF": str(CONTAINERS_CONF), **os.environ},
    )
    if status.returncode:
        raise SystemExit(
            f"apt-repo: cannot read the node image's package list ({node_image()}; build it with "
            f"molecule/image/build.sh):\n{status.stderr.strip()}"
        )
    with tempfile.NamedTemporaryFile("w", prefix="railforge-node-status-") as status_file:
        status_file.write(status.stdout)
        status_file.flush()
        result = subprocess.run(
            [
                "apt-get",
                "install",
                "--simulate",
                "--no-install-recommends",
                "-o",
                f"Dir::State::status={status_file.name}",
                *names,
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "LC_ALL": "C"},
        )
    if result.returncode:
        raise SystemExit(f"apt-repo: apt cannot resolve {' '.join(names)} (run apt-get update?):\n{result.stderr}")
    return parse_simulation(result.stdout)


def download(closure: dict[str, str], into: Path) -> None:
    pinned = [f"{name}={version}" for name, version in sorted(closure.items())]
    result = subprocess.run(["apt-get", "download", "-q", *pinned], cwd=into, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"apt-repo: apt-get download failed (run apt-get update?):\n{result.stderr.strip()}")


def release_text(repo: Path, origin: str, date: str) -> str:
    """Release of a flat repository: whose it is, when it was made and the SHA256 of its indexes."""
    lines = [f"Origin: {origin}", f"Label: {origin}", "Architectures: amd64 all", f"Date: {date}", "SHA256:"]
    for name in ("Packages", "Packages.gz"):
        data = (repo / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data):>9} {name}")
    return "\n".join(lines) + "\n"


def write_index(repo: Path, origin: str) -> None:
    """Packages, Packages.gz and Release of a flat repository: every .deb under repo, each version listed."""
    packages_index = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", ".", "/dev/null"], cwd=repo, check=True, capture_output=True
    ).stdout
    (repo / "Packages").write_bytes(packages_index)
    (repo / "Packages.gz").write_bytes(gzip.compress(packages_index, mtime=0))
    (repo / "Release").write_text(release_text(repo, origin, formatdate(usegmt=True)))


def sign(repo: Path) -> str:
    """Sign Release (InRelease, Release.gpg) with a new key that lives only in a temporary GNUPGHOME; export its
    public half to key.asc and its fingerprint to fingerprint.txt. Returns the fingerprint."""
    with tempfile.TemporaryDirectory(prefix="railforge-gnupg-") as home:
        gpg = ["gpg", "--batch", "--quiet", "--homedir", home]
        subprocess.run(
            [*gpg, "--passphrase", "", "--quick-generate-key", "Railforge lab repository", "ed25519", "sign", "never"],
            check=True,
            capture_output=True,
        )
        listing = subprocess.run(
            [*gpg, "--with-colons", "--list-secret-keys"], check=True, capture_output=True, text=True
        ).stdout
        fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
        release = str(repo / "Release")
        subprocess.run([*gpg, "--clearsign", "--output", str(repo / "InRelease"), release], check=True)
        subprocess.run([*gpg, "--armor", "--detach-sign", "--output", str(repo / "Release.gpg"), release], check=True)
        subprocess.run([*gpg, "--armor", "--output", str(repo / "key.asc"), "--export", fingerprint], check=True)
        # gpg-agent was started for this home: stop it before the directory goes.
        subprocess.run(["gpgconf", "--homedir", home, "--kill", "gpg-agent"], check=False, capture_output=True)
    (repo / "fingerprint.txt").write_text(fingerprint + "\n")
    return fingerprint


def repo_dir() -> Path:
    """Where the repository is: keyed by the built components, the pins, the node image and this recipe."""
    digest = hashlib.sha256()
    for comp in (*kubernetes_builds(), *map(component, ("containerd", "runc", "crictl", "cni-plugins"))):
        digest.update(comp.out_dir.name.encode())
    digest.update(json.dumps([_pin(name) for name in VERSION_PINS]).encode())
    digest.update(node_image().encode())
    digest.update(Path(__file__).read_bytes())
    for template in sorted(TEMPLATES.iterdir()):
        digest.update(template.name.encode() + template.read_bytes())
    version = _pin("versions_kubernetes")
    return cache_root() / "testbed" / f"aptrepo-{version}-{digest.hexdigest()[:12]}"


def build_repo() -> Path:
    """Build the repository if it is not in the cache; returns its directory (the one a node mounts: repo/)."""
    out = repo_dir()
    if (out / "manifest.json").exists():
        return out / "repo"
    started = time.monotonic()
    print(f"testbed: building the lab's apt repository (cold: about a minute; cached in {out})", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        repo, work = staging / "repo", staging / "work"
        (repo / "debian").mkdir(parents=True)
        own = packages()
        controls = [build_package(package, work, repo) for package in own]
        closure = node_closure(debian_requirements(controls))
        download(closure, repo / "debian")
        write_index(repo, "Railforge lab")
        fingerprint = sign(repo)
        shutil.rmtree(work)
        manifest = {
            "packages": sorted(package.filename for package in own),
            "debian": closure,
            "fingerprint": fingerprint,
            "node_image": node_image(),
            "seconds": round(time.monotonic() - started, 1),
        }
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    staging.chmod(0o755)
    staging.rename(out)
    print(f"testbed: apt repository built in {manifest['seconds']} s: {out / 'repo'}", file=sys.stderr)
    return out / "repo"
