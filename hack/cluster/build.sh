# shellcheck shell=bash
# What hack/cluster.sh up needs before it starts anything: Debian's
# packages, the Kubernetes and etcd binaries (hack/build-*.sh, cached in
# bin/) and the project's image tarballs (hack/cluster-images.sh, in
# bin/images/). Sourced by hack/cluster.sh.

# What up needs from Debian: a command or file, and its package.
DEBIAN_PACKAGES=(
  containerd:containerd ctr:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins
  /usr/lib/cni/host-local:containernetworking-plugins /usr/lib/cni/portmap:containernetworking-plugins
  /usr/lib/cni/loopback:containernetworking-plugins iptables:iptables nft:nftables conntrack:conntrack
  ip:iproute2 ss:iproute2 openssl:openssl curl:curl flock:util-linux setsid:util-linux pgrep:procps
)

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

# build_images: the image tarballs, their paths in IMAGES.
build_images() {
  local out
  out=$(hack/cluster-images.sh) # the tarballs' paths, one per line
  # shellcheck disable=SC2034 # IMAGES is read by hack/cluster.sh
  mapfile -t IMAGES <<<"$out"
}
