#!/bin/sh
# The lab's whereabouts image runs this first (rail_networks' DaemonSet: `SLEEP=false /install-cni.sh &&
# /ip-control-loop`): the IPAM plugin's kubeconfig (this pod's service account) and configuration go to the host's
# CNI configuration directory, where the plugin looks for them, then the plugin to the host's CNI binary directory.
# SLEEP=true (the default) keeps the container running afterwards. The token is copied once: a lab-lived cluster
# does not outlive it.
set -eu
account=/var/run/secrets/kubernetes.io/serviceaccount
conf_dir=${CNI_CONF_DIR:-/host/etc/cni/net.d}/whereabouts.d
bin_dir=${CNI_BIN_DIR:-/host/opt/cni/bin}
: "${KUBERNETES_SERVICE_HOST:?is not set: run this in a pod}" "${KUBERNETES_SERVICE_PORT:?is not set: run this in a pod}"

install_file() {  # content on stdin -> $1, replaced whole
    cat >"$1.new"
    mv -f "$1.new" "$1"
}

mkdir -p "$conf_dir"
umask 077
install_file "$conf_dir/whereabouts.kubeconfig" <<EOF_KUBECONFIG
apiVersion: v1
kind: Config
clusters:
  - name: cluster
    cluster:
      server: https://${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}
      certificate-authority-data: $(base64 -w 0 <"$account/ca.crt")
users:
  - name: whereabouts
    user:
      token: $(cat "$account/token")
contexts:
  - name: whereabouts
    context: {cluster: cluster, user: whereabouts}
current-context: whereabouts
EOF_KUBECONFIG
# The kubeconfig's path as the plugin sees it (it runs on the host); when ip-control-loop reconciles leaked
# addresses (cron, UTC; upstream's default: daily at 04:30).
install_file "$conf_dir/whereabouts.conf" <<EOF_CONF
{"datastore": "kubernetes", "kubernetes": {"kubeconfig": "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"},
 "reconciler_cron_expression": "${WHEREABOUTS_RECONCILER_CRON:-30 4 * * *}"}
EOF_CONF
umask 022
cp /whereabouts "$bin_dir/whereabouts.new"
mv -f "$bin_dir/whereabouts.new" "$bin_dir/whereabouts"
echo "whereabouts: installed in $bin_dir, configured in $conf_dir"
if [ "${SLEEP:-true}" = true ]; then
    exec sleep 2147483647
fi
