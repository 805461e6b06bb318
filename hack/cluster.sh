#!/usr/bin/env bash
# A real two-node Kubernetes cluster on this machine, for e2e tests and
# demos: etcd, the control plane, kube-proxy and CoreDNS, and two nodes in two
# zones, each its own kubelet and containerd, all built from source
# (hack/build-*.sh) and run as plain processes, with the project's images
# imported from tarballs (hack/cluster-images.sh). No Docker, no registry, no
# internet.
#
#   hack/cluster.sh up          bring it up (idempotent); prints the kubeconfig path on stdout
#   hack/cluster.sh down        tear it down and leave the machine as found (no-op when down)
#   hack/cluster.sh status      whether it is up, the kubeconfig, nodes and pods (exit 1 when down)
#   hack/cluster.sh kubeconfig  the kubeconfig path (exit 1 when down)
#   hack/cluster.sh images      rebuild the project's images and import them into the running cluster
#   hack/cluster.sh import TAR...  import image tarballs (docker-archive or OCI, e.g. a release's
#                               dist/images/*.oci.tar) into every node's containerd, under the
#                               names they carry
#   hack/cluster.sh build       only install and build what up needs (packages, binaries, image tarballs)
#
# This file holds the settings and the commands, each a list of steps; the
# steps live in hack/cluster/, one file per job:
#
#   lib.sh            log and die, the components as processes (start, stop, alive, wait_until)
#   build.sh          Debian packages, Kubernetes and etcd binaries, image tarballs
#   host.sh           the machine's settings and paths recorded before up and restored by down; unmounting
#   network.sh        the nodes' interface and addresses, kube-proxy, and removing bridges, chains, conntrack
#   certs.sh          the cluster CA, every certificate, the kubeconfigs
#   control-plane.sh  etcd, kube-apiserver, kube-controller-manager, kube-scheduler
#   nodes.sh          each node's containerd, CNI network and kubelet; images into them; their containers and cgroups on down
#   dns.sh            CoreDNS and a lookup from a pod
#
# Needs root (it runs kubelet and changes iptables, interfaces and cgroups).
# Everything it creates lives in CLUSTER_DIR (default /var/lib/distcache-cluster,
# one cluster per machine): configuration, certificates, kubeconfigs,
# logs/NAME.log of each component, pids/NAME.pid, containerd's and kubelet's
# state, and volumes/ for hostPath or local PersistentVolumes of tests.
#
# Networking stays off the machine's own addresses: the nodes' addresses are
# NODE_IPS on the interface NODE_IF, which up creates (a dummy interface, or a
# bridge without ports where the kernel has no dummy driver) and down deletes;
# the API server (on the first node's), the kubelets and NodePorts listen
# there, etcd and the other components on loopback. Each node's pods get
# addresses on its own bridge (BRIDGES), routed to each other by the machine;
# the CNI configs have ipMasq off, so pod traffic never leaves the machine.
# Both nodes share the machine's network namespace, so one kube-proxy (the
# first node's) programs Services for both.
#
# Facts this relies on (VM without CAP_SYS_RESOURCE, cgroup v1, Debian's
# containerd 1.6) are written up in docs/development.md, "Local cluster".
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

CLUSTER_DIR="${CLUSTER_DIR:-/var/lib/distcache-cluster}"
# Seconds any one wait may take before up fails with the relevant log.
TIMEOUT="${CLUSTER_TIMEOUT:-180}"

# The nodes, one per zone, both labelled like NVMe instances. Index i of
# each array is node i; node 0 also runs the control plane and kube-proxy.
# Pod CIDRs are the /24s kube-controller-manager hands out in the order the
# nodes register (node 0 first).
NODES=(distcache-node distcache-node-b)
NODE_IPS=(10.254.254.1 10.254.254.2)
NODE_ZONES=(zone-a zone-b)
NODE_INSTANCE_TYPES=(i4i.2xlarge i3en.2xlarge)
BRIDGES=(distcache-br0 distcache-br1)
CNI_NETWORKS=(distcache distcache-b)
NODE_POD_CIDRS=(10.244.0.0/24 10.244.1.0/24)
NODE_IF=distcache0
CLUSTER_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SERVICE_IP=10.96.0.1
DNS_SERVICE_IP=10.96.0.10
CLUSTER_DOMAIN=cluster.local
NODE_NAME=${NODES[0]} # the control plane's node
NODE_IP=${NODE_IPS[0]}
APISERVER="https://${NODE_IP}:6443"
ETCD_CLIENT=127.0.0.1:12379
ETCD_PEER=127.0.0.1:12380

D=$CLUSTER_DIR
PKI=$D/pki
CONF=$D/config
LOGS=$D/logs
PIDS=$D/pids
KUBECONFIG_FILE=$D/kubeconfig
HOST_STATE=$D/host-state
UP_MARKER=$D/up # written when up has finished

# In start order.
COMPONENTS=(containerd containerd-b etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubelet-b)

# shellcheck source=hack/cluster/lib.sh
. "$ROOT/hack/cluster/lib.sh"
# shellcheck source=hack/cluster/build.sh
. "$ROOT/hack/cluster/build.sh"
# shellcheck source=hack/cluster/host.sh
. "$ROOT/hack/cluster/host.sh"
# shellcheck source=hack/cluster/network.sh
. "$ROOT/hack/cluster/network.sh"
# shellcheck source=hack/cluster/certs.sh
. "$ROOT/hack/cluster/certs.sh"
# shellcheck source=hack/cluster/control-plane.sh
. "$ROOT/hack/cluster/control-plane.sh"
# shellcheck source=hack/cluster/nodes.sh
. "$ROOT/hack/cluster/nodes.sh"
# shellcheck source=hack/cluster/dns.sh
. "$ROOT/hack/cluster/dns.sh"

# ---------------------------------------------------------------- up

is_up() {
  [ -f "$UP_MARKER" ] || return 1
  local c
  for c in "${COMPONENTS[@]}"; do alive "$c" || return 1; done
  apiserver_ready >/dev/null 2>&1
}

require_up() { is_up || die "the cluster is not up (hack/cluster.sh up)"; }

up() {
  if is_up; then
    log "already up"
    print_usage
    echo "$KUBECONFIG_FILE"
    return 0
  fi
  if leftovers; then
    log "found a cluster that is not (fully) up (or its remains): tearing it down first"
    down
  fi

  local t0=$SECONDS
  ensure_packages
  build_binaries
  build_images
  local t1=$SECONDS

  mkdir -p "$D" "$LOGS" "$PIDS"
  chmod 700 "$D"
  record_host_state
  setup_network
  mkdir -p "$CONF" "$D/volumes"
  each_node write_node_configs
  write_kube_proxy_config
  gen_pki
  each_node start_containerd
  # Images import while the control plane starts; kubelet needs them (pause).
  log "importing the images (in the background)"
  import_images "${IMAGES[@]}" 2>"$LOGS/image-import.log" &
  local import_pid=$!
  start_control_plane
  if ! wait "$import_pid"; then
    tail -n 20 "$LOGS/image-import.log" >&2
    die "importing the images failed"
  fi
  start_nodes
  start_dns
  date -u +%FT%TZ >"$UP_MARKER"
  log "up in $((SECONDS - t1))s (builds and checks before that: $((t1 - t0))s)"
  print_usage
  echo "$KUBECONFIG_FILE"
}

print_usage() {
  log "use it with:"
  log "  export KUBECONFIG=$KUBECONFIG_FILE"
  log "  $ROOT/bin/kubectl get nodes"
  log "images: distcache.local/{operator,cachenode,minio,probe,coredns,pause}:dev (imagePullPolicy: Never)"
}

# ---------------------------------------------------------------- down

# leftovers: is anything of a cluster here (a running one, a half-started
# one, the remains of a crash or a reboot)?
leftovers() {
  local b
  for b in "${BRIDGES[@]}"; do
    ip link show "$b" >/dev/null 2>&1 && return 0
  done
  [ -d "$D" ] || ip link show "$NODE_IF" >/dev/null 2>&1 || [ -n "$(kubepods_cgroups)" ] ||
    compgen -G "/run/netns/cni-*" >/dev/null
}

no_pods_left() { [ -z "$(kubectl get pods -A -o name)" ]; }

delete_workloads() {
  log "deleting workloads and pods (so that kubelet tears their networks down)"
  kubectl delete --all-namespaces --all --wait=false \
    deployments,statefulsets,daemonsets,replicasets,replicationcontrollers,jobs,cronjobs >/dev/null 2>&1 || true
  # Everything goes: no need for the pods' full grace periods.
  kubectl delete pods --all-namespaces --all --wait=false --grace-period=2 >/dev/null 2>&1 || true
  if ! TIMEOUT=120 wait_until "pods to terminate" kubelet no_pods_left; then
    log "removing the remaining pods forcibly"
    kubectl delete pods --all-namespaces --all --force --grace-period=0 >/dev/null 2>&1 || true
  fi
}

down() {
  if ! leftovers; then
    log "nothing to tear down"
    return 0
  fi
  log "tearing down"
  mkdir -p "$LOGS" "$PIDS"
  if alive kube-apiserver && alive kubelet && apiserver_ready >/dev/null 2>&1; then
    delete_workloads
  fi
  stop kube-proxy
  stop kubelet-b
  stop kubelet
  # Containers kubelet did not stop (it was down, or pods did not go) would
  # keep their watches on the API server open and delay its exit.
  remove_containers
  stop kube-scheduler
  stop kube-controller-manager
  stop kube-apiserver
  stop etcd
  stop containerd-b
  stop containerd
  kill_leftovers

  unmount_all "$D" /run/netns/cni-*
  rm -f /run/netns/cni-*
  clean_iptables
  remove_network
  remove_cgroups
  restore_host_state
  rm -rf "$D"
  log "down"
}

# ---------------------------------------------------------------- status, images

status() {
  if ! is_up; then
    if [ -d "$D" ]; then
      local c states=()
      for c in "${COMPONENTS[@]}"; do
        if alive "$c"; then states+=("$c:running"); else states+=("$c:STOPPED"); fi
      done
      echo "cluster: NOT healthy (${states[*]}); logs in $LOGS; hack/cluster.sh down cleans up"
    else
      echo "cluster: down"
    fi
    return 1
  fi
  echo "cluster: up"
  echo "kubeconfig: $KUBECONFIG_FILE   (export KUBECONFIG=$KUBECONFIG_FILE)"
  echo "logs: $LOGS"
  echo
  kubectl get nodes -o wide -L topology.kubernetes.io/zone,node.kubernetes.io/instance-type
  echo
  kubectl get pods -A -o wide
}

images() {
  build_images
  if is_up; then
    log "importing the images"
    import_images "${IMAGES[@]}"
    log "imported; pods started from now on use them (restart running ones: kubectl rollout restart ...)"
  else
    log "cluster is not up: built the image tarballs only (bin/images/)"
  fi
}

lock() {
  mkdir -p "$(dirname "$D")"
  exec 9<"$(dirname "$D")"
  flock -w 900 9 || die "another hack/cluster.sh has held the lock on $(dirname "$D") for 15 minutes"
}

[ "$(id -u)" = 0 ] || die "needs root: the cluster runs kubelet and changes iptables, interfaces and cgroups"
case "${1:-}" in
  up) lock && up ;;
  down) lock && down ;;
  status) status ;;
  kubeconfig)
    require_up
    echo "$KUBECONFIG_FILE"
    ;;
  images) lock && images ;;
  import)
    shift
    [ $# -gt 0 ] || die "usage: $0 import TARBALL..."
    for f in "$@"; do [ -f "$f" ] || die "import: no file $f"; done
    lock
    require_up
    import_images "$@"
    log "imported $# image tarball(s) into ${#NODES[@]} nodes"
    ;;
  build)
    ensure_packages
    build_binaries
    build_images
    ;;
  *)
    echo "usage: $0 up|down|status|kubeconfig|images|import TAR...|build" >&2
    exit 2
    ;;
esac
