# Sourced by the scripts that build images with ko (hack/cluster-images.sh,
# hack/ko-images.sh), from the repository root.
#
# ko_setup builds ko (hack/build-go-tool.sh) and hack/images/ocilayout,
# writes the base image into ko's cache and exports what .ko.yaml and ko
# read:
#   KOCACHE              bin/.ko-cache: ko's cache; its img/ layout holds the base
#   KO_DEFAULTBASEIMAGE  distcache.local/static@sha256:...: the base, by digest,
#                        which ko then finds in $KOCACHE/img without a registry
#   KO_CONFIG_PATH       .ko.yaml
#   DISTCACHE_LDFLAGS    the version stamp (hack/version-ldflags.sh, VERSION=...)
# There is no registry to pull gcr.io/distroless/static:nonroot from, so the
# base is its equivalent for static Go binaries, made here (see
# hack/images/ocilayout): user 65532, /etc/passwd and group, /tmp, and the CA
# certificates of this machine (Debian's ca-certificates) when it has them.
ko_setup() {
  hack/build-go-tool.sh ko
  CGO_ENABLED=0 go build -o bin/ocilayout ./hack/images/ocilayout
  export KOCACHE="$PWD/bin/.ko-cache"
  local ca=()
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    ca=(-ca-bundle /etc/ssl/certs/ca-certificates.crt)
  else
    echo "${0##*/}: no /etc/ssl/certs/ca-certificates.crt: the base image has no CA certificates (apt-get install ca-certificates)" >&2
  fi
  KO_DEFAULTBASEIMAGE=$(bin/ocilayout base -layout "$KOCACHE/img" "${ca[@]}")
  export KO_DEFAULTBASEIMAGE
  export KO_CONFIG_PATH="$PWD/.ko.yaml"
  DISTCACHE_LDFLAGS=$(VERSION="${VERSION:-}" hack/version-ldflags.sh)
  export DISTCACHE_LDFLAGS
}

# ko_wrapper_module NAME MODULE VERSION prints the directory of a module that
# requires MODULE@VERSION (bin/.build/ko-NAME-VERSION, made once), from which
# ko can build MODULE's main package (`ko build MODULE`) with the dependency
# versions of `go install MODULE@VERSION` (hack/build-minio.sh,
# hack/build-coredns.sh): `go get` keeps MODULE's own requirements, so Go's
# build cache has most of it. ko's builds: entries take local paths only, so
# the build flags of those scripts (static, -trimpath, -s, which implies -w)
# come from GOFLAGS: see ko_wrapper_env.
ko_wrapper_module() {
  local name=$1 module=$2 version=$3
  local dir="bin/.build/ko-${name}-${version}"
  if [ ! -f "$dir/go.sum" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    printf 'module distcache.local/ko-%s\n' "$name" >"$dir/go.mod"
    (cd "$dir" && GOFLAGS=-mod=mod go get -tool "${module}@${version}" >&2)
  fi
  echo "$dir"
}

# ko_version_of SCRIPT VAR prints the default of VAR="${VAR:-...}" in SCRIPT,
# the one place a pinned version is written.
ko_version_of() {
  local v
  v=$(sed -n "s/^$2=\"\${$2:-\(.*\)}\"\$/\1/p" "$1")
  [ -n "$v" ] || { echo "${0##*/}: no $2 default in $1" >&2; return 1; }
  echo "${!2:-$v}"
}
