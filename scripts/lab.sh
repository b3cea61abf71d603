#!/usr/bin/env bash
# `make lab`: start the nodes of inventories/lab as Podman containers and run playbooks/site.yml against them.
# `make lab-down`: remove them. The node names and addresses come from the inventory itself.
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="$PWD/molecule/containers.conf" ANSIBLE_CONFIG="$PWD/ansible.cfg"
inventory=inventories/lab/hosts.yml
network=railforge-lab
subnet=10.89.50.0/24
image="$(cat molecule/image/TAG)"

nodes() {  # name address, one per line
    ansible-inventory -i "$inventory" --list |
        python3 -c 'import json,sys; d=json.load(sys.stdin)["_meta"]["hostvars"]; [print(h, v["railforge_node_ip"]) for h, v in sorted(d.items())]'
}

case "${1:-}" in
up)
    molecule/image/build.sh
    podman network exists "$network" || podman network create --subnet "$subnet" "$network" >/dev/null
    while read -r name address; do
        if podman container exists "$name"; then
            podman start "$name" >/dev/null
        else
            podman run -d --name "$name" --hostname "$name" --network "$network" --ip "$address" \
                --systemd always "$image" /lib/systemd/systemd >/dev/null
        fi
        echo "lab: node $name at $address"
    done < <(nodes)
    ansible-playbook -i "$inventory" playbooks/site.yml
    ;;
down)
    while read -r name _; do
        podman rm -f "$name" >/dev/null 2>&1 && echo "lab: removed $name" || true
    done < <(nodes)
    podman network exists "$network" && podman network rm "$network" >/dev/null || true
    ;;
*)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
