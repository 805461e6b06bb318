#!/usr/bin/env bash
# A real two-node Kubernetes cluster on this machine, for e2e tests and
# demos: etcd, the control plane, kube-proxy and CoreDNS, and two nodes in two
# zones, each its own kubelet and containerd (hack/lib/cluster-nodes.sh), all
# built from source (hack/build-*.sh) and run as plain processes, with the
# project's images imported from tarballs (hack/cluster-images.sh). No Docker,
# no registry, no internet.
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

# Host settings kubelet, kube-proxy and up change: recorded before up, restored by down.
SYSCTLS=(
  net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
  net.ipv4.conf.all.route_localnet kernel.panic kernel.panic_on_oops vm.overcommit_memory
  vm.panic_on_oom kernel.keys.root_maxkeys kernel.keys.root_maxbytes
  net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait
)
# Paths outside CLUSTER_DIR that containerd, CNI and kubelet use whatever they
# are told (hard-coded or defaults without a setting): those absent before up
# are removed by down.
HOST_PATHS=(
  /run/containerd /run/containerd/runc/k8s.io /run/netns /run/mount /var/lib/cni /var/lib/kubelet
  /var/lib/kubelet/device-plugins /var/log/pods /var/log/containers /etc/cni /opt/cni /opt/containerd
  /var/lib/containerd
)
# What up needs from Debian: a command or file, and its package.
DEBIAN_PACKAGES=(
  containerd:containerd ctr:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins
  /usr/lib/cni/host-local:containernetworking-plugins /usr/lib/cni/portmap:containernetworking-plugins
  /usr/lib/cni/loopback:containernetworking-plugins iptables:iptables nft:nftables conntrack:conntrack
  ip:iproute2 ss:iproute2 openssl:openssl curl:curl flock:util-linux setsid:util-linux pgrep:procps
)

# Progress on stderr, with the seconds since the command started.
log() { printf 'cluster: [%3ds] %s\n' "$SECONDS" "$*" >&2; }
die() {
  echo "cluster: error: $*" >&2
  exit 1
}

bin() { readlink -f "$ROOT/bin/$1"; }
kubectl() { "$ROOT/bin/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$D/kubectl-cache" "$@"; }

# shellcheck source=hack/lib/cluster-nodes.sh
. "$ROOT/hack/lib/cluster-nodes.sh"

# ---------------------------------------------------------------- processes

# start NAME COMMAND...: run COMMAND in its own session with its log in
# logs/NAME.log; pids/NAME.pid records the pid and the executable, so that a
# reused pid is never taken for ours.
start() {
  local name=$1
  shift
  local exe
  exe=$(readlink -f "$(command -v "$1")")
  # 9<&-: the daemons must not inherit the lock.
  setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null 9<&- &
  local pid=$!
  echo "$pid $exe" >"$PIDS/$name.pid"
  # Until the fork has exec'd, /proc/PID/exe is bash's.
  local deadline=$((SECONDS + 10))
  until alive "$name"; do
    if exited "$pid" || ((SECONDS >= deadline)); then
      tail -n 40 "$LOGS/$name.log" >&2
      die "$name did not start ($1)"
    fi
    sleep 0.05
  done
}

# exited PID: the process is gone, or a zombie (files and ports closed).
exited() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 0
  [ -z "$state" ] || [ "${state%% *}" = Z ]
}

alive() {
  local f="$PIDS/$1.pid" pid exe actual
  [ -f "$f" ] || return 1
  read -r pid exe <"$f"
  actual=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [ "${actual% (deleted)}" = "$exe" ]
}

stop() {
  local name=$1 pid exe
  [ -f "$PIDS/$name.pid" ] || return 0
  read -r pid exe <"$PIDS/$name.pid"
  if alive "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while alive "$name" && ((SECONDS < deadline)); do sleep 0.2; done
    if alive "$name"; then
      log "$name ($pid) ignored SIGTERM for 30s, killing it"
      kill -KILL "$pid" 2>/dev/null || true
      deadline=$((SECONDS + 10))
      while alive "$name" && ((SECONDS < deadline)); do sleep 0.1; done
      alive "$name" && log "$name ($pid) survived SIGKILL for 10s (stuck in the kernel?)"
    fi
    # /proc/PID/exe goes before the process has closed its files and ports.
    deadline=$((SECONDS + 10))
    until exited "$pid" || ((SECONDS >= deadline)); do sleep 0.05; done
    log "stopped $name ($pid)"
  fi
  rm -f "$PIDS/$name.pid"
}

# wait_until DESCRIPTION LOGNAME COMMAND...: poll COMMAND until it succeeds.
# Fails after TIMEOUT seconds, or at once when the component LOGNAME exited,
# showing the end of its log.
wait_until() {
  local desc=$1 logname=$2
  shift 2
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    local why=""
    if [ -f "$PIDS/$logname.pid" ] && ! alive "$logname"; then
      why="$logname exited"
    elif ((SECONDS >= deadline)); then
      why="timed out after ${TIMEOUT}s"
    fi
    if [ -n "$why" ]; then
      echo "cluster: error: $why waiting for $desc" >&2
      if [ -f "$LOGS/$logname.log" ]; then
        echo "---- last lines of $LOGS/$logname.log ----" >&2
        tail -n 40 "$LOGS/$logname.log" >&2
      fi
      if [[ $logname == kubelet* ]] && [ -f "$KUBECONFIG_FILE" ]; then
        echo "---- pods and recent events ----" >&2
        kubectl get pods -A -o wide >&2 || true
        kubectl get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -n 20 >&2 || true
      fi
      echo "cluster: logs are in $LOGS; hack/cluster.sh down cleans up" >&2
      return 1
    fi
    sleep 0.5
  done
}

apiserver_ready() {
  curl -fsS --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$APISERVER/readyz"
}

is_up() {
  [ -f "$UP_MARKER" ] || return 1
  local c
  for c in "${COMPONENTS[@]}"; do alive "$c" || return 1; done
  apiserver_ready >/dev/null 2>&1
}

port_free() { # ADDRESS:PORT
  ! ss -Hltn "sport = :${1##*:}" | awk '{print $4}' | grep -qxF -e "$1" -e "0.0.0.0:${1##*:}" -e "*:${1##*:}" -e "[::]:${1##*:}"
}

# ---------------------------------------------------------------- machine

# ensure_packages installs the Debian packages of DEBIAN_PACKAGES whose
# command or file is missing (only those: installed ones are not upgraded).
ensure_packages() {
  local entry what pkg missing=()
  for entry in "${DEBIAN_PACKAGES[@]}"; do
    what=${entry%%:*} pkg=${entry#*:}
    if [[ $what == /* ]]; then [ -e "$what" ] && continue; else command -v "$what" >/dev/null && continue; fi
    [[ " ${missing[*]} " == *" $pkg "* ]] || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update >&2 && apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
}

build_binaries() {
  log "building binaries (cached in bin/ after the first run)"
  hack/build-kube.sh >&2
  hack/build-etcd.sh >&2
}

# record_host_state: the sysctls, host paths and netfilter tables as found,
# for down to restore.
record_host_state() {
  local k v p
  {
    for k in "${SYSCTLS[@]}"; do
      v=$(sysctl -n "$k" 2>/dev/null) && echo "sysctl $k $v"
    done
    for p in "${HOST_PATHS[@]}"; do
      [ -e "$p" ] || echo "absent $p"
    done
    nft list tables 2>/dev/null | sed 's/^table /nft-table /'
  } >"$HOST_STATE"
}

setup_network() {
  local addr cidr addrs=("${NODE_IPS[@]}" "$KUBERNETES_SERVICE_IP")
  for cidr in "${NODE_POD_CIDRS[@]}"; do addrs+=("${cidr%.*/*}.1"); done # the bridges' addresses
  for addr in "${addrs[@]}"; do
    if ip -4 route show match "$addr" | grep -qv '^default'; then
      die "$addr is already routed on this machine ($(ip -4 route show match "$addr" | grep -v '^default' | head -n1)); the cluster's addresses would clash"
    fi
  done
  log "network: nodes ${NODE_IPS[*]} on $NODE_IF, services $SERVICE_CIDR, pods $CLUSTER_CIDR on ${BRIDGES[*]}"
  ip link add "$NODE_IF" type dummy 2>/dev/null || ip link add "$NODE_IF" type bridge
  sysctl -qw "net.ipv6.conf.$NODE_IF.disable_ipv6=1" 2>/dev/null || true
  for addr in "${NODE_IPS[@]}"; do
    ip addr add "$addr/32" dev "$NODE_IF"
  done
  ip link set "$NODE_IF" up
  # The machine's own traffic to Services leaves from the node address, not
  # along the default route.
  ip route add "$SERVICE_CIDR" dev "$NODE_IF" src "$NODE_IP"
  sysctl -qw net.ipv4.ip_forward=1
  sysctl -qw net.bridge.bridge-nf-call-iptables=1 ||
    die "net.bridge.bridge-nf-call-iptables is missing: load br_netfilter (modprobe br_netfilter)"
}

# ---------------------------------------------------------------- certificates

gen_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# gen_cert NAME SUBJECT EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]: a key and a
# certificate signed by the cluster CA.
gen_cert() {
  local name=$1 subject=$2 eku=$3 san=${4:-}
  gen_key "$PKI/$name.key"
  {
    echo "basicConstraints = critical, CA:FALSE"
    echo "keyUsage = critical, digitalSignature, keyEncipherment"
    echo "extendedKeyUsage = $eku"
    [ -z "$san" ] || echo "subjectAltName = $san"
  } >"$PKI/$name.ext"
  openssl req -new -config "$PKI/req.cnf" -key "$PKI/$name.key" -subj "$subject" -out "$PKI/$name.csr"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 365 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

gen_pki() {
  log "certificates and kubeconfigs in $PKI"
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  printf '[req]\ndistinguished_name = dn\n[dn]\n' >"$PKI/req.cnf"
  printf '%s\n' '[req]' 'distinguished_name = dn' 'prompt = no' '[dn]' 'CN = distcache-cluster-ca' \
    '[ca]' 'basicConstraints = critical, CA:TRUE' 'keyUsage = critical, keyCertSign, cRLSign, digitalSignature' \
    'subjectKeyIdentifier = hash' >"$PKI/ca.cnf"
  gen_key "$PKI/ca.key"
  openssl req -x509 -new -config "$PKI/ca.cnf" -extensions ca -key "$PKI/ca.key" -days 3650 -out "$PKI/ca.crt"

  local svc="kubernetes.default.svc"
  gen_cert apiserver "/CN=kube-apiserver" serverAuth \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:$svc,DNS:$svc.$CLUSTER_DOMAIN,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP,IP:$KUBERNETES_SERVICE_IP"
  gen_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  gen_cert admin "/O=system:masters/CN=kubernetes-admin" clientAuth
  gen_cert kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
  gen_cert kube-scheduler "/CN=system:kube-scheduler" clientAuth
  gen_cert kube-proxy "/CN=system:kube-proxy" clientAuth
  local i
  for i in "${!NODES[@]}"; do
    node "$i"
    gen_cert "$N_KUBELET" "/O=system:nodes/CN=system:node:$N_NAME" clientAuth
    gen_cert "$N_KUBELET-serving" "/CN=$N_NAME" serverAuth "DNS:$N_NAME,IP:$N_IP"
    write_kubeconfig "$CONF/$N_KUBELET.kubeconfig" "$N_KUBELET"
  done
  # The API server's identity towards aggregated API servers; with it, the
  # components' authentication delegation finds a request-header CA.
  gen_cert front-proxy-client "/CN=front-proxy-client" clientAuth
  gen_key "$PKI/sa.key"
  openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"

  write_kubeconfig "$KUBECONFIG_FILE" admin
  local c
  for c in kube-controller-manager kube-scheduler kube-proxy; do
    write_kubeconfig "$CONF/$c.kubeconfig" "$c"
  done
}

# write_kubeconfig FILE CERT: a kubeconfig for the API server, authenticating
# with pki/CERT.crt, everything embedded.
write_kubeconfig() {
  (
    umask 077
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: distcache
  cluster:
    server: $APISERVER
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$2.crt")
    client-key-data: $(base64 -w0 "$PKI/$2.key")
contexts:
- name: distcache
  context:
    cluster: distcache
    user: $2
current-context: distcache
EOF
  )
}

# ---------------------------------------------------------------- configuration

write_configs() {
  mkdir -p "$CONF" "$D/volumes"
  local i
  for i in "${!NODES[@]}"; do
    node "$i"
    write_node_configs
  done

  cat >"$CONF/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: $CONF/kube-proxy.kubeconfig
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: $CLUSTER_CIDR
nodePortAddresses: [$NODE_IP/32]
oomScoreAdj: 0
iptables:
  localhostNodePorts: false
# 0: leave the machine's conntrack settings alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
}

# ---------------------------------------------------------------- components

start_containerds() {
  local i
  for i in "${!NODES[@]}"; do
    node "$i"
    start_containerd
  done
}

# import_images TARBALL...: into every node's containerd.
import_images() {
  local i tar
  for i in "${!NODES[@]}"; do
    node "$i"
    for tar in "$@"; do
      command ctr -a "$N_SOCK" -n k8s.io images import "$tar" >/dev/null
    done
  done
}

start_control_plane() {
  local addr
  for addr in "$ETCD_CLIENT" "$ETCD_PEER" "$NODE_IP:6443" 127.0.0.1:10257 127.0.0.1:10259 \
    "${NODE_IPS[0]}:10250" "${NODE_IPS[1]}:10250" 127.0.0.1:10248 127.0.0.1:10258 127.0.0.1:10249 127.0.0.1:10256; do
    port_free "$addr" || die "$addr is in use by another program (ss -ltnp 'sport = :${addr##*:}')"
  done

  log "starting etcd"
  start etcd "$(bin etcd)" --name=distcache --data-dir="$D/etcd" \
    --listen-client-urls="http://$ETCD_CLIENT" --advertise-client-urls="http://$ETCD_CLIENT" \
    --listen-peer-urls="http://$ETCD_PEER" --initial-advertise-peer-urls="http://$ETCD_PEER" \
    --initial-cluster="distcache=http://$ETCD_PEER" --unsafe-no-fsync --log-level=warn
  wait_until "etcd" etcd curl -fsS --max-time 5 "http://$ETCD_CLIENT/health"

  log "starting kube-apiserver"
  start kube-apiserver "$(bin kube-apiserver)" \
    --advertise-address="$NODE_IP" --bind-address="$NODE_IP" --secure-port=6443 \
    --etcd-servers="http://$ETCD_CLIENT" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --client-ca-file="$PKI/ca.crt" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-account-issuer="https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --requestheader-client-ca-file="$PKI/ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --allow-privileged=true --profiling=false
  wait_until "kube-apiserver" kube-apiserver apiserver_ready

  log "starting kube-controller-manager and kube-scheduler"
  start kube-controller-manager "$(bin kube-controller-manager)" \
    --kubeconfig="$CONF/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$CONF/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$CONF/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --cert-dir="$D/kube-controller-manager" \
    --allocate-node-cidrs --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size=24 \
    --service-cluster-ip-range="$SERVICE_CIDR" --cluster-name=distcache \
    --use-service-account-credentials --root-ca-file="$PKI/ca.crt" \
    --service-account-private-key-file="$PKI/sa.key" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --leader-elect=false --profiling=false
  start kube-scheduler "$(bin kube-scheduler)" \
    --kubeconfig="$CONF/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$CONF/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$CONF/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false
  wait_until "kube-controller-manager" kube-controller-manager curl -fsSk --max-time 5 https://127.0.0.1:10257/healthz
  wait_until "kube-scheduler" kube-scheduler curl -fsSk --max-time 5 https://127.0.0.1:10259/healthz
}

start_nodes() {
  local i
  for i in "${!NODES[@]}"; do
    node "$i"
    start_node
    if [ "$i" = 0 ]; then
      log "starting kube-proxy (for every node: they share this machine's network namespace)"
      start kube-proxy "$(bin kube-proxy)" --config="$CONF/kube-proxy.yaml"
      wait_until "kube-proxy" kube-proxy curl -fsS --max-time 5 http://127.0.0.1:10256/healthz
    fi
  done
}

coredns_ready() {
  [ "$(kubectl -n kube-system get deployment coredns -o jsonpath='{.status.readyReplicas}')" = 1 ]
}

dns_check_done() {
  local phase
  phase=$(kubectl -n kube-system get pod dns-check -o jsonpath='{.status.phase}')
  [ "$phase" = Succeeded ] && return 0
  if [ "$phase" = Failed ]; then
    kubectl -n kube-system logs dns-check >&2 || true
    die "the DNS check pod failed"
  fi
  return 1
}

start_dns() {
  log "starting CoreDNS"
  cat >"$CONF/coredns.yaml" <<EOF
apiVersion: v1
kind: ServiceAccount
metadata:
  name: coredns
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
- kind: ServiceAccount
  name: coredns
  namespace: kube-system
---
# Cluster names only: no forward to resolvers outside. TTL and cache are 5 s
# so that a recreated pod's name does not resolve to its old address for long.
apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  Corefile: |
    .:53 {
        errors
        health {
            lameduck 5s
        }
        ready
        kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
            ttl 5
        }
        cache 5
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  replicas: 1
  selector:
    matchLabels:
      k8s-app: kube-dns
  template:
    metadata:
      labels:
        k8s-app: kube-dns
    spec:
      priorityClassName: system-cluster-critical
      serviceAccountName: coredns
      dnsPolicy: Default
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        # Port 53 as a non-root user, without file capabilities in the image.
        sysctls:
        - name: net.ipv4.ip_unprivileged_port_start
          value: "53"
      containers:
      - name: coredns
        image: distcache.local/coredns:dev
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        resources:
          requests: {cpu: 50m, memory: 70Mi}
          limits: {memory: 170Mi}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop: [ALL]
        livenessProbe:
          httpGet: {path: /health, port: 8080}
          periodSeconds: 10
          failureThreshold: 5
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        volumeMounts:
        - name: config
          mountPath: /etc/coredns
          readOnly: true
      volumes:
      - name: config
        configMap:
          name: coredns
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  clusterIP: $DNS_SERVICE_IP
  selector:
    k8s-app: kube-dns
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
EOF
  local ns
  for ns in kube-system default; do
    wait_until "the default service account in $ns" kube-controller-manager kubectl -n "$ns" get serviceaccount default
  done
  kubectl apply -f "$CONF/coredns.yaml" >/dev/null
  wait_until "CoreDNS to be Ready" kubelet coredns_ready

  log "checking DNS from a pod"
  kubectl -n kube-system run dns-check --image=distcache.local/probe:dev --image-pull-policy=Never \
    --restart=Never -- lookup -timeout "${TIMEOUT}s" "kubernetes.default.svc.$CLUSTER_DOMAIN" >/dev/null
  wait_until "a DNS lookup from a pod" kubelet dns_check_done
  log "DNS: $(kubectl -n kube-system logs dns-check)"
  kubectl -n kube-system delete pod dns-check --wait=true >/dev/null
}

# ---------------------------------------------------------------- up

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
  local out images
  out=$(hack/cluster-images.sh) # the tarballs' paths, one per line
  mapfile -t images <<<"$out"
  local t1=$SECONDS

  mkdir -p "$D" "$LOGS" "$PIDS"
  chmod 700 "$D"
  record_host_state
  setup_network
  write_configs
  gen_pki
  start_containerds
  # Images import while the control plane starts; kubelet needs them (pause).
  log "importing the images (in the background)"
  import_images "${images[@]}" 2>"$LOGS/image-import.log" &
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

# remove_containers: every node's, through its containerd.
remove_containers() {
  local i ns id sock
  for i in "${!NODES[@]}"; do
    node "$i"
    alive "$N_CONTAINERD" || continue
    sock=$N_SOCK
    for ns in $(command ctr -a "$sock" namespaces ls -q); do
      for id in $(command ctr -a "$sock" -n "$ns" tasks ls -q); do
        command ctr -a "$sock" -n "$ns" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
        command ctr -a "$sock" -n "$ns" tasks delete -f "$id" >/dev/null 2>&1 || true
      done
      for id in $(command ctr -a "$sock" -n "$ns" containers ls -q); do
        command ctr -a "$sock" -n "$ns" containers delete "$id" >/dev/null 2>&1 || true
      done
    done
  done
}

# kill_leftovers: shims of our containerds (found by their sockets) and any
# process still in a kubepods cgroup, by pid.
kill_leftovers() {
  local i pid
  for i in "${!NODES[@]}"; do
    node "$i"
    for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $N_SOCK( |$)" || true); do
      kill -KILL "$pid" 2>/dev/null || true
    done
  done
  local d
  for d in $(kubepods_cgroups); do
    [ -d "$d" ] || continue
    for pid in $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null); do
      kill -KILL "$pid" 2>/dev/null || true
    done
  done
}

# mounts_under PREFIX...: mount points at or below the prefixes, deepest first.
mounts_under() {
  local p
  awk '{print $5}' /proc/self/mountinfo | while read -r m; do
    m=$(printf '%b' "$m") # mountinfo escapes spaces as \040
    for p in "$@"; do
      case "$m" in "$p" | "$p"/*) echo "$m" ;; esac
    done
  done | awk '{print length, $0}' | sort -rn | cut -d' ' -f2- | uniq
}

unmount_all() {
  local m
  while read -r m; do
    [ -n "$m" ] || continue
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
  done < <(mounts_under "$@")
}

# clean_netfilter COMMAND TABLE...: delete the KUBE-* and CNI-* chains and
# every rule that jumps to them.
clean_netfilter() {
  local ipt=$1 table rules rule chain
  shift
  command -v "$ipt" >/dev/null || return 0
  for table in "$@"; do
    rules=$("$ipt" -w 5 -t "$table" -S 2>/dev/null) || continue
    while read -r rule; do
      [ -n "$rule" ] || continue
      eval "set -- $rule"
      "$ipt" -w 5 -t "$table" -D "${@:2}" 2>/dev/null || true
    done < <(grep -E -- '-[jg] (KUBE-|CNI-)' <<<"$rules" | grep -Ev '^-A (KUBE-|CNI-)' || true)
    for chain in $(grep -oE '^-N (KUBE-|CNI-)[^ ]+' <<<"$rules" | cut -d' ' -f2); do
      "$ipt" -w 5 -t "$table" -F "$chain" 2>/dev/null || true
    done
    for chain in $(grep -oE '^-N (KUBE-|CNI-)[^ ]+' <<<"$rules" | cut -d' ' -f2); do
      "$ipt" -w 5 -t "$table" -X "$chain" 2>/dev/null || true
    done
  done
}

clean_iptables() {
  if [ -x "$(bin kube-proxy)" ]; then
    "$(bin kube-proxy)" --cleanup >>"$LOGS/kube-proxy-cleanup.log" 2>&1 || true
  fi
  clean_netfilter iptables-nft filter nat mangle raw
  clean_netfilter ip6tables-nft filter nat mangle raw
  # Legacy tables only where they exist: listing one would create it.
  # shellcheck disable=SC2046
  clean_netfilter iptables-legacy $(cat /proc/net/ip_tables_names 2>/dev/null)
  # shellcheck disable=SC2046
  clean_netfilter ip6tables-legacy $(cat /proc/net/ip6_tables_names 2>/dev/null)
  # nftables tables iptables-nft created for kubelet and kube-proxy, now
  # without rules, that were not there before up.
  if command -v nft >/dev/null && [ -f "$HOST_STATE" ]; then
    local family name
    while read -r _ family name; do
      grep -qxF "nft-table $family $name" "$HOST_STATE" && continue
      # Empty: nothing but the table, its chains and their hooks.
      nft list table "$family" "$name" 2>/dev/null | grep -vqE '^\s*(table .*\{|chain .*\{|type .*;|\}|)$' && continue
      nft delete table "$family" "$name" 2>/dev/null || true
    done < <(nft list tables 2>/dev/null)
  fi
  conntrack -D -s "$CLUSTER_CIDR" >/dev/null 2>&1 || true
  conntrack -D -d "$CLUSTER_CIDR" >/dev/null 2>&1 || true
  conntrack -D -d "$SERVICE_CIDR" >/dev/null 2>&1 || true
}

remove_cgroups() {
  local d
  for d in $(kubepods_cgroups) $(node_cgroup_roots); do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ ! -d "$d" ] || log "could not remove cgroup $d"
  done
}

restore_host_state() {
  if [ ! -f "$HOST_STATE" ]; then
    log "no record of the machine's settings before up ($HOST_STATE): sysctls left as they are"
    return 0
  fi
  local kind key value
  while read -r kind key value; do
    case "$kind" in
      sysctl) sysctl -qw "$key=$value" 2>/dev/null || log "could not restore $key=$value" ;;
      absent)
        unmount_all "$key"
        rm -rf "$key"
        ;;
    esac
  done <"$HOST_STATE"
}

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
  local l b n
  for b in "${BRIDGES[@]}"; do
    for l in $(ip -o link show master "$b" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
      ip link del "$l" 2>/dev/null || true
    done
    ip link del "$b" 2>/dev/null || true
  done
  ip link del "$NODE_IF" 2>/dev/null || true
  for n in "${CNI_NETWORKS[@]}"; do
    rm -rf "/var/lib/cni/networks/$n" /var/lib/cni/results/"$n"-*
  done
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
  local out images
  out=$(hack/cluster-images.sh) # the tarballs' paths, one per line
  mapfile -t images <<<"$out"
  if is_up; then
    log "importing the images"
    import_images "${images[@]}"
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
    is_up || die "the cluster is not up (hack/cluster.sh up)"
    echo "$KUBECONFIG_FILE"
    ;;
  images) lock && images ;;
  import)
    shift
    [ $# -gt 0 ] || die "usage: $0 import TARBALL..."
    for f in "$@"; do [ -f "$f" ] || die "import: no file $f"; done
    lock
    is_up || die "the cluster is not up (hack/cluster.sh up)"
    import_images "$@"
    log "imported $# image tarball(s) into ${#NODES[@]} nodes"
    ;;
  build)
    ensure_packages
    build_binaries
    hack/cluster-images.sh >/dev/null
    ;;
  *)
    echo "usage: $0 up|down|status|kubeconfig|images|import TAR...|build" >&2
    exit 2
    ;;
esac
