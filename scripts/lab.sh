#!/usr/bin/env bash
# `make lab`: a real Kubernetes cluster in Podman node containers on this machine, made by playbooks/site.yml
# against the example inventory's cluster (inventories/lab: the example cut to the lab's hosts plus the overlay of
# what differs here, written by `railforge lab inventory`; a container per host, named as it): packages from a local
# signed apt repository of our own builds, every image preloaded from archives (no registry: the air-gapped path),
# then the add-ons, the scheduler and an MPIJob across two nodes.
# The workers are DGX H100-shaped: each presents a simulated sysfs tree (`railforge lab hardware`, mounted as
# /srv/fake-hw: 8 GPUs, 4 NVSwitches, 8 InfiniBand compute HCAs, 3 Ethernet ports) and a veth netdev for every
# netdev the tree names; the node stage's hardware roles install from a signed stand-in vendor repository
# (tests/standins, mounted as /srv/railforge-vendor), and the facts play reads the tree. The GPUs and RDMA devices the
# kubelets see are served by `railforge lab device-plugins` (FakeDevicePlugin), one host process per worker, sized
# from the facts the play kept, in place of NVIDIA's device plugin and the RDMA shared device plugin. Its sockets lie
# in a host directory bind-mounted as the node's /var/lib/kubelet/device-plugins, its device files (Allocate's
# mounts) in one mounted at the same path in the node. Multus (thin) and whereabouts, built from their pinned
# releases, give every pod that asks an address on each rail (macvlan over the rail's netdev).
# `make lab-down`: removes the nodes, their volumes and network, and puts back the host sysctls the kubelets set.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="$PWD/molecule/containers.conf" ANSIBLE_CONFIG="$PWD/ansible.cfg"
inventory=inventories/lab/hosts.yml
# Nodes that `up` leaves out: `add NAME` starts one, playbooks/scale.yml joins it (tests/lab).
extra_inventory=inventories/lab/scale.yml
control_plane=cp-01  # the first control plane: its host and container name
# The nodes' Podman network: railforge-lab-<time of its making>, found again by its label. A new name each time:
# Podman 4.3 keeps a removed network's address allocations, and nodes killed before their teardown leave theirs
# behind, which would refuse the next node its address. The label marks the node containers and their volumes too:
# `down` removes what carries it, and `up` refuses a container of a node's name that does not.
lab_label=io.railforge.lab
subnet=10.89.50.0/24
# The node image: the test image (molecule/image) with an SSH server (scripts/lab-node.Containerfile).
node_image=localhost/railforge-lab-node:latest
state=/run/railforge-lab
# Ansible reaches the nodes over SSH with the lab's key, checking each node's own host key against known_hosts
# (both paths are in inventories/lab/overlay.yml).
ssh_key=$state/ssh/id_ed25519
known_hosts=$state/ssh/known_hosts
job_images=/var/cache/railforge/lab-images
# Host-wide sysctls a kubelet in a privileged container rewrites (the test bed's node restores the same ones), and
# the inotify instances `up` raises; `down` puts them all back.
sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
    kernel.keys.root_maxbytes fs.inotify.max_user_instances)
# Every node container's kubelet, containerd, kube-proxy and flannel take inotify instances from one host-wide,
# per-user pool (128 by default): with five nodes kube-proxy fails "too many open files" on the last ones to join,
# and their pods' service traffic goes nowhere. Raised, never lowered.
inotify_instances=1024

write_inventory() {  # arguments: railforge lab inventory's (--machine-vars FILE)
    railforge lab inventory "$@" >/dev/null
}

nodes() {  # name address, one per line (its container is named as it); arguments: -i FILE (more) or --limit PATTERN
    [[ -f $inventory ]] || write_inventory
    ansible-inventory -i "$inventory" "$@" --list |
        python3 -c 'import json,sys; d=json.load(sys.stdin)["_meta"]["hostvars"]; [print(h, v["ansible_host"]) for h, v in sorted(d.items())]'
}

host_var() {  # name variable: the value the inventory (the lab's hosts and those `add` starts) gives a host
    [[ -f $inventory ]] || write_inventory
    ansible-inventory -i "$inventory" -i "$extra_inventory" --host "$1" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"
}

workers() {  # the name of each host of the kube_node group, one per line
    nodes --limit kube_node | cut -d ' ' -f 1
}

first_worker() {
    workers | head -n 1
}

hw_facts() {  # name key: a value of the node's railforge_hw that playbooks/facts.yml kept
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "inventories/lab/artifacts/hw/$1.json" "$2"
}

rail_options() {  # option [prefix]: "--OPTION [PREFIX]rail0 ..." for each rail of the first worker's facts
    local i
    for ((i = 0; i < $(hw_facts "$(first_worker)" rail_count); i++)); do
        printf -- '--%s %srail%d ' "$1" "${2:-}" "$i"
    done
}

start_device_plugins() {  # name: the GPUs and a device per rail its facts name, unless already served
    local name=$1 dir=$state/$1
    if [[ -f $dir/device-plugins.pid ]] && kill -0 "$(cat "$dir/device-plugins.pid")" 2>/dev/null; then
        return
    fi
    # shellcheck disable=SC2046 # one word per option and rail
    setsid railforge lab device-plugins --plugin-dir "$dir/device-plugins" --state-dir "$dir/devices" \
        --gpus "$(hw_facts "$name" gpu_count)" $(rail_options rail) </dev/null >"$dir/device-plugins.log" 2>&1 &
    echo $! >"$dir/device-plugins.pid"
    # registered once the node advertises them (the log tells why not)
    local waited=0
    until podman exec "$control_plane" kubectl --kubeconfig /etc/kubernetes/admin.conf get "node/$name" \
        -o jsonpath='{.status.allocatable}' | grep '"rdma/rail0":"4"' >/dev/null; do
        if ((waited++ == 90)); then
            echo "lab: $name does not advertise the fake devices after 90 s:" >&2
            cat "$dir/device-plugins.log" >&2
            exit 1
        fi
        sleep 1
    done
    echo "lab: $name advertises the stand-in's devices (log: $dir/device-plugins.log)"
}

stop_device_plugins() {  # name
    local pidfile=$state/$1/device-plugins.pid pid
    [[ -f $pidfile ]] || return 0
    pid=$(cat "$pidfile")
    if kill "$pid" 2>/dev/null; then
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    fi
    rm -f "$pidfile"
}

lab_container() {  # container: true when the lab made it (its label); refuses one of that name it did not make
    podman container exists "$1" || return 1
    [[ -n $(podman ps -a --filter "label=$lab_label" --filter "name=^$1\$" --format '{{.Names}}') ]] && return 0
    echo "lab: a container named $1 exists that the lab did not make (no label $lab_label): rename or remove it" >&2
    exit 2
}

build_node_image() {  # unless it carries the hash of its inputs: its Containerfile and the test image's ID
    local base inputs
    base=$(cat molecule/image/TAG)
    molecule/image/build.sh
    inputs=$( (cat scripts/lab-node.Containerfile && podman image inspect --format '{{.Id}}' "$base") | sha256sum)
    [[ $(podman image inspect --format '{{index .Labels "io.railforge.inputs"}}' "$node_image" 2>/dev/null) == "${inputs%% *}" ]] ||
        podman build --quiet --build-arg "BASE=$base" --label "io.railforge.inputs=${inputs%% *}" \
            --file scripts/lab-node.Containerfile --tag "$node_image" scripts >/dev/null
}

start_node() {  # name address: systemd as PID 1 in a privileged node with its own cgroup namespace
    local name=$1 address=$2
    podman volume exists "$name-containerd" ||
        podman volume create --label "$lab_label" "$name-containerd" >/dev/null
    local hardware=()  # a worker's simulated DGX H100
    [[ -d $state/$name/hw ]] && hardware=(-v "$state/$name/hw:/srv/fake-hw:ro")
    # --systemd=false with systemd's mounts spelled out: Podman's systemd mode together with a private cgroup
    # namespace puts the node's systemd at the host's cgroup root on cgroup v1 hosts (research/nested-containerd).
    podman run -d --name "$name" --label "$lab_label" --hostname "$name" --network "$network" --ip "$address" \
        --privileged --cgroupns=private --systemd=false --stop-signal SIGRTMIN+3 \
        --tmpfs /tmp --tmpfs /run --tmpfs /run/lock -e container=podman \
        -v "$name-containerd:/var/lib/containerd" \
        -v "$apt_repo:/srv/railforge-apt:ro" -v "$images:/srv/railforge-images:ro" \
        -v "$job_images:/srv/railforge-job-images:ro" -v "$state/vendor:/srv/railforge-vendor:ro" "${hardware[@]}" \
        -v "$state/$name/device-plugins:/var/lib/kubelet/device-plugins" -v "$state/$name/devices:$state/$name/devices" \
        "$node_image" /bin/sh -c 'rm -f /etc/machine-id /var/lib/dbus/machine-id && systemd-machine-id-setup >/dev/null &&
            mount --make-rshared / && exec /lib/systemd/systemd' >/dev/null
}

# A node's SSH server: its own host key (made once per lab, the private half never leaves the node and this
# machine's lab state), no password logins, no root logins; the lab's key authorised for the inventory's
# ansible_user (the example's `railforge`), who may sudo without a password as the example asks of its servers: the
# playbooks become root where they need it, as on an operator's. Its host key goes into known_hosts.
start_sshd() {  # name address
    local name=$1 address=$2 host_key=$state/$1/ssh_host_ed25519_key waited=0
    [[ -f $ssh_key ]] || { mkdir -p -m 700 "${ssh_key%/*}" && ssh-keygen -q -t ed25519 -N '' -C railforge-lab -f "$ssh_key"; }
    [[ -f $host_key ]] || ssh-keygen -q -t ed25519 -N '' -C "$name" -f "$host_key"
    podman exec -i "$name" sh -c 'set -e; umask 077
        id -u "$1" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$1"
        home=$(getent passwd "$1" | cut -d : -f 6)
        mkdir -p "$home/.ssh" && echo "$2" >"$home/.ssh/authorized_keys" && chown -R "$1:" "$home/.ssh"
        echo "$1 ALL=(ALL:ALL) NOPASSWD: ALL" >/etc/sudoers.d/railforge-lab && chmod 0440 /etc/sudoers.d/railforge-lab
        visudo -c -q -f /etc/sudoers.d/railforge-lab
        cat >/etc/ssh/ssh_host_ed25519_key
        printf "HostKey /etc/ssh/ssh_host_ed25519_key\nPasswordAuthentication no\nPermitRootLogin no\n" \
            >/etc/ssh/sshd_config.d/railforge-lab.conf' sh "$(host_var "$name" ansible_user)" "$(cat "$ssh_key.pub")" <"$host_key"
    until podman exec "$name" systemctl enable --now ssh.service >/dev/null 2>&1; do  # once its systemd is up
        ((waited++ < 60)) || { echo "lab: sshd on $name did not start in 60 s" >&2; exit 1; }
        sleep 1
    done
    { [[ ! -f $known_hosts ]] || awk -v address="$address" '$1 != address' "$known_hosts"
        echo "$address $(cut -d ' ' -f 1,2 "$host_key.pub")"; } >"$known_hosts.new"
    mv "$known_hosts.new" "$known_hosts"
}

# The control plane endpoint (kubernetes_control_plane_endpoint): a second address on the first control plane,
# a stand-in for the load balancer or kube-vip address in front of several control planes.
add_api_address() {
    local address
    address=$(host_var "$control_plane" kubernetes_control_plane_endpoint)
    address=${address%:*}
    podman exec "$control_plane" ip address replace "$address/32" dev eth0
    echo "lab: control plane endpoint $address on $control_plane"
}

lab_networks() {  # the names of the lab's networks (one, or none)
    podman network ls --filter "label=$lab_label" --format '{{.Name}}'
}

lab_network() {  # the lab's network: its name, or nothing when there is none
    lab_networks | head -n 1
}

remove_stale_bridge() {  # the bridge an earlier lab network left, holding the subnet (railforge.testbed.bridges)
    railforge testbed remove-stale-bridges "$subnet" | sed 's/^/lab: /'
}

node_mounts() {  # what start_node mounts: the local apt repository and the cluster's image archives
    apt_repo=$(railforge testbed apt-repo)
    images=$(python3 -c 'from railforge.testbed.images import cluster_images; print(cluster_images())')
}

# The stand-in vendor repository (tests/standins: CUDA's driver, fabric manager, toolkits and DCGM, the container
# toolkit, DOCA-OFED and GDRCopy), signed by a throw-away key of the lab's, laid out under the paths the roles' URL
# variables name in inventories/lab/hosts.yml: CUDA's <distribution>/<arch>/ with its key file name, DOCA's
# <release>/<distribution><point release>/<arch>/ (vendor_doca_layout, once a node tells its point release). Built
# once per lab (`down` removes it).
vendor_repo() {
    local vendor=$state/vendor
    [[ -f $vendor/repo/InRelease ]] && return
    mkdir -p "$vendor/cuda/debian12"
    python3 tests/standins/build_repo.py --sign-with "$state/vendor-gnupg" "$vendor/repo" tests/standins/cuda.yml \
        tests/standins/doca.yml
    ln -sfn ../../repo "$vendor/cuda/debian12/x86_64"
    ln -sfn key.asc "$vendor/repo/3bf863cc.pub"
    for path in libnvidia-container gdrcopy; do ln -sfn repo "$vendor/$path"; done
}

vendor_doca_layout() {  # the DOCA release the inventory pins, for the node image's Debian point release
    local release point
    release=$(ansible-inventory -i "$inventory" --host "$(first_worker)" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["doca_ofed_version"])')
    point=$(podman exec "$control_plane" cat /etc/debian_version)
    mkdir -p "$state/vendor/doca/$release/debian$point"
    ln -sfn ../../../repo "$state/vendor/doca/$release/debian$point/x86_64"
}

worker_hardware() {  # name: its simulated DGX H100 (kept while the lab lives: the node mounts it)
    [[ -d $state/$1/hw ]] || railforge lab hardware "$state/$1/hw" >"$state/$1/netdevs"
}

# `up` ends with the time of each step (site.yml's own stages are in its summary: "stage times").
step_times=()
step_started=$SECONDS
step_done() {  # name: the time since the last step ended
    step_times+=("$1 $((SECONDS - step_started)) s")
    step_started=$SECONDS
}

case "${1:-}" in
up)  # up [--previous-patch]: Kubernetes at the pin, or at the stand-in of the patch release before it
    started=$SECONDS site_vars=() kubectl_build=kubernetes
    if [[ ${2:-} == --previous-patch ]]; then  # what tests/lab upgrades from with playbooks/upgrade.yml
        previous=$(python3 -c 'from railforge.testbed.build import KUBERNETES as k, previous_patch as p; print(p(k.version) or "")')
        [[ -n $previous ]] || { echo "lab: versions_kubernetes is a .0 release: no patch release before it" >&2; exit 2; }
        site_vars=(-e "kubernetes_version=$previous") kubectl_build=kubernetes-previous-patch
    elif [[ -n ${2:-} ]]; then
        echo "usage: $0 up [--previous-patch]" >&2
        exit 2
    fi
    build_node_image
    railforge testbed build
    node_mounts
    mkdir -p "$state" "$job_images"
    vendor_repo
    # The images the cluster stages need besides kubeadm's: the scheduler and the MPIJob's OpenMPI image.
    RAILFORGE_SCHEDULER_ARCHIVE="$job_images/railforge-scheduler.tar" deploy/scheduler/build.sh >/dev/null
    RAILFORGE_IMAGE_ARCHIVE="$job_images/railforge-openmpi.tar" deploy/openmpi/build.sh >/dev/null
    step_done "builds (node image, packages, images)"
    if [[ ! -f $state/sysctls ]]; then
        for key in "${sysctls[@]}"; do echo "$key=$(sysctl -n "$key")"; done >"$state/sysctls"
    fi
    if (($(sysctl -n fs.inotify.max_user_instances) < inotify_instances)); then
        sysctl -q -w fs.inotify.max_user_instances=$inotify_instances
    fi
    python3 - "$apt_repo" "$images" "$job_images" "$state" >"$state/vars.yml" <<'PY'
import json, pathlib, sys, yaml
from railforge.testbed.build import component
repo, images, job_images, state = map(pathlib.Path, sys.argv[1:])
vendor = (state / "vendor-gnupg/fingerprint.txt").read_text().strip()
archives = [f"/srv/railforge-images/{name}" for name in sorted(json.loads((images / "manifest.json").read_text()).values())]
archives += [f"/srv/railforge-job-images/{path.name}" for path in sorted(job_images.glob("*.tar"))]
operator = component("mpi-operator").out_dir  # the CRDs of the pinned releases, from their Go modules
whereabouts = component("whereabouts").out_dir
multus = yaml.safe_load_all((component("multus").out_dir / "multus-daemonset.yml").read_text())
nad_crd = state / "nad-crd.yml"  # the first document of Multus's manifest
nad_crd.write_text(yaml.safe_dump(next(d for d in multus if d and d["kind"] == "CustomResourceDefinition")))
print(json.dumps({
    "kubernetes_apt_repo_key_fingerprint": (repo / "fingerprint.txt").read_text().strip(),
    **dict.fromkeys(("nvidia_driver_repo_key_fingerprint", "nvidia_container_toolkit_repo_key_fingerprint",
                     "doca_ofed_repo_key_fingerprint", "gpudirect_gdrcopy_repo_key_fingerprint"), vendor),
    "kubernetes_image_archives": archives,
    "mpi_operator_crd_url": f"file://{operator}/kubeflow.org_mpijobs.yaml",
    "railforge_scheduler_podgroup_crd_url": f"file://{operator}/scheduling.x-k8s.io_podgroups.yaml",
    "rail_networks_crd_files": [str(nad_crd), *map(str, sorted(whereabouts.glob("whereabouts.cni.cncf.io_*.yaml")))],
}))
PY
    write_inventory --machine-vars "$state/vars.yml"
    network=$(lab_network)
    if [[ -z $network ]]; then
        remove_stale_bridge
        network=railforge-lab-$(date +%s)
        podman network create --label "$lab_label" --subnet "$subnet" "$network" >/dev/null
    fi
    while read -r name _; do mkdir -p "$state/$name" && worker_hardware "$name"; done < <(workers)
    while read -r name address; do
        mkdir -p "$state/$name/device-plugins" "$state/$name/devices"  # its bind mounts (/run is a tmpfs)
        if lab_container "$name"; then
            podman start "$name" >/dev/null
        else
            start_node "$name" "$address"
        fi
        start_sshd "$name" "$address"
        echo "lab: node $name at $address"
    done < <(nodes)
    add_api_address
    vendor_doca_layout
    # A worker's netdevs, named as its tree names them: one end of a veth pair each (this kernel has no dummy
    # netdev), up, for macvlan to build a rail's pod interfaces on.
    while read -r name; do
        # shellcheck disable=SC2046 # one argument per netdev
        podman exec "$name" sh -c 'i=0; for netdev in "$@"; do i=$((i + 1))
            ip link show "$netdev" >/dev/null 2>&1 || ip link add "$netdev" type veth peer name "hwpeer$i"
            ip link set "hwpeer$i" up && ip link set "$netdev" up; done' sh $(cat "$state/$name/netdevs")
    done < <(workers)
    step_done "node containers"
    ansible-playbook -i "$inventory" "${site_vars[@]}" playbooks/site.yml
    step_done "site.yml"
    while read -r name _; do start_device_plugins "$name"; done < <(workers)
    step_done "device plugins"
    # The workers' node class (one: they are alike) and its NCCL settings, which rail_networks applied.
    nccl=$(podman exec "$control_plane" kubectl --kubeconfig /etc/kubernetes/admin.conf get configmap -n railforge-network \
        -l railforge.io/nccl-class -o jsonpath='{.items[*].metadata.name}')
    # shellcheck disable=SC2046 # one word per option and rail
    railforge lab job --kubeconfig inventories/lab/artifacts/admin.conf --gpus "$(hw_facts "$(first_worker)" gpu_count)" \
        $(rail_options rail) $(rail_options network railforge-network/) --nccl-config "railforge-network/$nccl"
    step_done "MPIJob"
    printf 'lab: %s\n' "${step_times[@]}"
    echo "lab: done in $((SECONDS - started)) s. The cluster, with a kubectl of its own version:"
    echo "  export KUBECONFIG=$PWD/inventories/lab/artifacts/admin.conf"
    echo "  $(python3 -c 'import sys; from railforge.testbed.build import binary; print(binary("kubectl", sys.argv[1]))' "$kubectl_build") get nodes"
    ;;
add)  # add NAME...: start nodes of the extra inventory for playbooks/scale.yml (after `up`)
    shift
    [[ $# -gt 0 ]] || { echo "usage: $0 add NAME..." >&2; exit 2; }
    network=$(lab_network)
    [[ -n $network ]] || { echo "lab: no lab network; run $0 up first" >&2; exit 2; }
    node_mounts
    for name in "$@"; do
        address=$(nodes -i "$extra_inventory" | awk -v name="$name" '$1 == name {print $2}')
        [[ -n $address ]] || { echo "lab: $name is not a host of $extra_inventory" >&2; exit 2; }
        mkdir -p "$state/$name/device-plugins" "$state/$name/devices"
        lab_container "$name" || start_node "$name" "$address"
        start_sshd "$name" "$address"
        echo "lab: node $name at $address"
    done
    ;;
down)
    while read -r name _; do stop_device_plugins "$name"; done < <(nodes -i "$extra_inventory")
    # what the lab made, by its label: the node containers, then their volumes
    while read -r container; do
        podman rm -f -t 10 "$container" >/dev/null && echo "lab: removed $container"
    done < <(podman ps -a --filter "label=$lab_label" --format '{{.Names}}')
    while read -r volume; do podman volume rm -f "$volume" >/dev/null; done < <(
        podman volume ls --filter "label=$lab_label" --format '{{.Name}}')
    while read -r network; do podman network rm "$network" >/dev/null; done < <(lab_networks)
    remove_stale_bridge
    if [[ -f $state/sysctls ]]; then
        while IFS== read -r key value; do sysctl -q -w "$key=$value"; done <"$state/sysctls"
        echo "lab: host sysctls restored (${sysctls[*]})"
    fi
    rm -rf "$state" inventories/lab/artifacts
    ;;
*)
    echo "usage: $0 up [--previous-patch]|add NAME...|down" >&2
    exit 2
    ;;
esac
