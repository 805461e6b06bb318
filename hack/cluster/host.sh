# shellcheck shell=bash
# The machine as hack/cluster.sh up found it: the host settings and paths
# that up, containerd, CNI and kubelet change, recorded in HOST_STATE before
# up and restored by down; and unmounting what the cluster mounted. Sourced
# by hack/cluster.sh.

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

# restore_host_state: the sysctls back to their values before up, the host
# paths that were absent removed. (The nftables tables: clean_iptables.)
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

# unmount_all PREFIX...: every mount at or below the prefixes, lazily if busy.
unmount_all() {
  local m
  while read -r m; do
    [ -n "$m" ] || continue
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
  done < <(mounts_under "$@")
}
