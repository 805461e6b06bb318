# shellcheck shell=bash
# hack/cluster.sh's networking: the nodes' interface NODE_IF with their
# addresses and the route to Services, kube-proxy (one, for every node: they
# share the machine's network namespace), and on down the removal of all of
# it: the bridges CNI made and their veths, the KUBE-*/CNI-* chains,
# nftables tables and conntrack entries. The bridges themselves are CNI's
# (hack/cluster/nodes.sh writes its configuration). Sourced by
# hack/cluster.sh.

# setup_network: NODE_IF with the nodes' addresses, after checking that no
# address of the cluster is routed on this machine already.
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

write_kube_proxy_config() {
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

start_kube_proxy() {
  log "starting kube-proxy (for every node: they share this machine's network namespace)"
  start kube-proxy "$(bin kube-proxy)" --config="$CONF/kube-proxy.yaml"
  wait_until "kube-proxy" kube-proxy healthy http://127.0.0.1:10256/healthz
}

# clean_netfilter COMMAND TABLE...: delete the KUBE-* and CNI-* chains and
# every rule that jumps to them.
clean_netfilter() {
  local ipt=$1 table rules rule chain chains
  shift
  command -v "$ipt" >/dev/null || return 0
  for table in "$@"; do
    rules=$("$ipt" -w 5 -t "$table" -S 2>/dev/null) || continue
    while read -r rule; do
      [ -n "$rule" ] || continue
      eval "set -- $rule"
      "$ipt" -w 5 -t "$table" -D "${@:2}" 2>/dev/null || true
    done < <(grep -E -- '-[jg] (KUBE-|CNI-)' <<<"$rules" | grep -Ev '^-A (KUBE-|CNI-)' || true)
    # Flushed first, all of them: a chain is deleted only once nothing jumps to it.
    chains=$(grep -oE '^-N (KUBE-|CNI-)[^ ]+' <<<"$rules" | cut -d' ' -f2 || true)
    for chain in $chains; do
      "$ipt" -w 5 -t "$table" -F "$chain" 2>/dev/null || true
    done
    for chain in $chains; do
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

# remove_network: the bridges with whatever is still attached, NODE_IF (and
# with it the Service route), the CNI networks' IP allocations.
remove_network() {
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
}
