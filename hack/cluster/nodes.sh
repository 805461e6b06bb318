# shellcheck shell=bash
# The nodes of hack/cluster.sh: each its own containerd and kubelet, with
# their own directories, sockets, CNI network and bridge, pod CIDR and
# cgroup root, so that two kubelets on one machine never see (or clean up)
# each other's pods. Sourced by hack/cluster.sh, which defines the arrays
# NODES, NODE_IPS, NODE_ZONES, NODE_INSTANCE_TYPES, BRIDGES, CNI_NETWORKS and
# NODE_POD_CIDRS (the helpers start, wait_until, healthy, kubectl, bin, log
# and die are hack/cluster/lib.sh's, start_kube_proxy network.sh's). Here
# too: importing images into the nodes, and on down removing their
# containers, leftover processes and cgroups.
#
# Node 0 keeps the layout of the single-node cluster this grew from (its
# state directly in CLUSTER_DIR, components "containerd" and "kubelet", the
# root cgroup); node i > 0 lives in CLUSTER_DIR/node-<letter>, its
# components are "containerd-<letter>" and "kubelet-<letter>", its pods in
# the cgroup /<node name>.
#
# What the two kubelets still share: the machine's network namespace (one
# kube-proxy serves both), its CPUs and memory (each node reports all of
# them: the scheduler overcommits), and kubelet's hard-coded
# /var/lib/kubelet/device-plugins (no device plugin runs here).

LETTERS=abcdefghij

# node I: sets the N_* variables of node I.
node() {
  local i=$1 letter
  N_NAME=${NODES[$i]}
  N_IP=${NODE_IPS[$i]}
  N_ZONE=${NODE_ZONES[$i]}
  N_BRIDGE=${BRIDGES[$i]}
  N_CNI=${CNI_NETWORKS[$i]}
  N_POD_CIDR=${NODE_POD_CIDRS[$i]}
  N_LABELS="topology.kubernetes.io/zone=$N_ZONE,node.kubernetes.io/instance-type=${NODE_INSTANCE_TYPES[$i]}"
  N_HEALTHZ_PORT=$((10248 + 10 * i))
  if [ "$i" = 0 ]; then
    N_SUFFIX="" N_DIR=$D N_CGROUP_ROOT=""
  else
    letter=${LETTERS:i:1}
    N_SUFFIX="-$letter" N_DIR="$D/node-$letter" N_CGROUP_ROOT="/$N_NAME"
  fi
  N_CONTAINERD="containerd$N_SUFFIX"
  N_KUBELET="kubelet$N_SUFFIX"
  N_SOCK="$N_DIR/containerd/containerd.sock"
}

# each_node COMMAND...: COMMAND once per node, node 0 first, with that
# node's N_* variables set.
each_node() {
  local i
  for i in "${!NODES[@]}"; do
    node "$i"
    "$@"
  done
}

# write_node_configs: containerd's configuration, the CNI network and the
# KubeletConfiguration of the current node.
write_node_configs() {
  mkdir -p "$N_DIR/cni/net.d" "$N_DIR/containerd"

  cat >"$CONF/$N_CONTAINERD.toml" <<EOF
version = 2
root = "$N_DIR/containerd/root"
state = "$N_DIR/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "$N_SOCK"

[ttrpc]
  address = "$N_SOCK.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$N_DIR/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "distcache.local/pause:dev"
  # The VM lacks CAP_SYS_RESOURCE: without this every sandbox fails with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "$N_DIR/containerd/runc"

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "$N_DIR/cni/net.d"
EOF

  cat >"$N_DIR/cni/net.d/10-$N_CNI.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$N_CNI",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$N_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$N_DIR/cni/ipam",
        "ranges": [[{"subnet": "$N_POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF

  cat >"$CONF/$N_KUBELET.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $N_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $N_HEALTHZ_PORT
containerRuntimeEndpoint: unix://$N_SOCK
cgroupDriver: cgroupfs
${N_CGROUP_ROOT:+cgroupRoot: $N_CGROUP_ROOT}
# Pods' mounted Secrets and ConfigMaps are refreshed at each pod sync: every
# 10s rather than every minute, so CA rotations (e2e/cluster) can use a short
# grace. Costs a little kubelet CPU on a cluster of a dozen pods.
syncFrequency: 10s
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
clusterDomain: $CLUSTER_DOMAIN
clusterDNS: [$DNS_SERVICE_IP]
# Pods see the cluster's DNS only, never the machine's resolvers.
resolvConf: ""
podLogsDir: $N_DIR/pod-logs
tlsCertFile: $PKI/$N_KUBELET-serving.crt
tlsPrivateKeyFile: $PKI/$N_KUBELET-serving.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
# Imported images cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
}

start_containerd() {
  log "starting $N_CONTAINERD (node $N_NAME)"
  start "$N_CONTAINERD" containerd --config "$CONF/$N_CONTAINERD.toml"
  wait_until "$N_CONTAINERD" "$N_CONTAINERD" command ctr -a "$N_SOCK" version
}

node_pod_cidr() {
  local cidr
  cidr=$(kubectl get node "$N_NAME" -o jsonpath='{.spec.podCIDR}')
  [ -n "$cidr" ] && echo "$cidr"
}

node_ready() {
  [ "$(kubectl get node "$N_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# start_node: the current node's kubelet, until the node is Ready with the
# pod CIDR its CNI network was written for. Nodes start one after the
# other, so kube-controller-manager hands out the CIDRs in NODE_POD_CIDRS'
# order.
start_node() {
  [ -z "$N_CGROUP_ROOT" ] || ensure_cgroup_root "$N_CGROUP_ROOT"
  log "starting $N_KUBELET (node $N_NAME, $N_LABELS)"
  start "$N_KUBELET" "$(bin kubelet)" --config="$CONF/$N_KUBELET.yaml" \
    --kubeconfig="$CONF/$N_KUBELET.kubeconfig" --root-dir="$N_DIR/kubelet" \
    --hostname-override="$N_NAME" --node-ip="$N_IP" --node-labels="$N_LABELS"
  wait_until "$N_KUBELET" "$N_KUBELET" healthy "http://127.0.0.1:$N_HEALTHZ_PORT/healthz"
  wait_until "node $N_NAME to be Ready" "$N_KUBELET" node_ready
  wait_until "a pod CIDR for node $N_NAME" kube-controller-manager node_pod_cidr
  local cidr
  cidr=$(node_pod_cidr)
  [ "$cidr" = "$N_POD_CIDR" ] || die "node $N_NAME got pod CIDR $cidr, its CNI config has $N_POD_CIDR"
}

# ensure_cgroup_root PATH: kubelet wants its cgroupRoot to exist in every
# hierarchy; a new cgroup v1 cpuset starts without CPUs or memory nodes.
ensure_cgroup_root() {
  local d
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    mkdir -p "/sys/fs/cgroup$1"
    return 0
  fi
  for d in /sys/fs/cgroup/*/; do
    if [ ! -d "$d" ] || [ -L "${d%/}" ]; then continue; fi
    mkdir -p "$d${1#/}" 2>/dev/null || continue
    if [ -f "$d/cpuset.cpus" ]; then
      cat "$d/cpuset.cpus" >"$d${1#/}/cpuset.cpus"
      cat "$d/cpuset.mems" >"$d${1#/}/cpuset.mems"
    fi
  done
}

# kubepods_cgroups: the kubepods cgroups of every node that exist.
kubepods_cgroups() { each_node node_kubepods_cgroups; }
node_kubepods_cgroups() { cgroup_dirs "$N_CGROUP_ROOT/kubepods"; }

# node_cgroup_roots: the cgroup roots up made for nodes i > 0, that exist.
node_cgroup_roots() { each_node node_cgroup_root; }
node_cgroup_root() { [ -z "$N_CGROUP_ROOT" ] || cgroup_dirs "$N_CGROUP_ROOT"; }

# cgroup_dirs PATH: the cgroup PATH (/a/b) that exists, in every cgroup v1
# hierarchy and in the v2 one.
cgroup_dirs() {
  compgen -G "/sys/fs/cgroup/*$1" || true
  [ ! -d "/sys/fs/cgroup$1" ] || echo "/sys/fs/cgroup$1"
}

# start_nodes: the kubelets one after the other, so that
# kube-controller-manager hands out the pod CIDRs in NODE_POD_CIDRS' order;
# kube-proxy right after node 0.
start_nodes() {
  local i
  for i in "${!NODES[@]}"; do
    node "$i"
    start_node
    [ "$i" != 0 ] || start_kube_proxy
  done
}

# import_images TARBALL...: into every node's containerd.
import_images() { each_node import_node_images "$@"; }
import_node_images() {
  local tar
  for tar in "$@"; do
    command ctr -a "$N_SOCK" -n k8s.io images import "$tar" >/dev/null
  done
}

# remove_containers: every node's, through its containerd.
remove_containers() { each_node remove_node_containers; }
remove_node_containers() {
  alive "$N_CONTAINERD" || return 0
  local ns id sock=$N_SOCK
  for ns in $(command ctr -a "$sock" namespaces ls -q); do
    for id in $(command ctr -a "$sock" -n "$ns" tasks ls -q); do
      command ctr -a "$sock" -n "$ns" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
      command ctr -a "$sock" -n "$ns" tasks delete -f "$id" >/dev/null 2>&1 || true
    done
    for id in $(command ctr -a "$sock" -n "$ns" containers ls -q); do
      command ctr -a "$sock" -n "$ns" containers delete "$id" >/dev/null 2>&1 || true
    done
  done
}

# kill_leftovers: shims of our containerds (found by their sockets) and any
# process still in a kubepods cgroup, by pid.
kill_leftovers() {
  each_node kill_node_shims
  local d pid
  for d in $(kubepods_cgroups); do
    [ -d "$d" ] || continue
    # shellcheck disable=SC2044 # cgroup.procs holds pids, one per line
    for pid in $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null); do
      kill -KILL "$pid" 2>/dev/null || true
    done
  done
}
kill_node_shims() {
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $N_SOCK( |$)" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
}

# remove_cgroups: the nodes' kubepods cgroups and the roots up made, once
# empty (kill_leftovers first).
remove_cgroups() {
  local d
  for d in $(kubepods_cgroups) $(node_cgroup_roots); do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ ! -d "$d" ] || log "could not remove cgroup $d"
  done
}
