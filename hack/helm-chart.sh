#!/usr/bin/env bash
# Writes the Helm chart's templates and values.yaml (charts/distcache) from
# what config/default renders, so that the chart and the install manifest
# come from one source and cannot drift:
#
#   hack/helm-chart.sh [CHART_DIR]      (default charts/distcache)
#
# kubebuilder's helm/v2-alpha plugin does the writing (`kubebuilder edit
# --plugins=helm/v2-alpha`, hack/build-go-tool.sh kubebuilder), from
# hack/deploy-manifests.sh's output, in a scratch project of its own (a
# PROJECT file and an empty Makefile: the plugin adds Makefile targets, which
# we leave there). It parameterises what it knows: the operator's image,
# replicas, resources, nodeSelector, tolerations, affinity, security
# contexts, env, the metrics endpoint (HTTPS with authentication, or off),
# RBAC, CRDs (installed and kept on uninstall), leader election, and
# adds a ServiceMonitor and a NetworkPolicy that are off unless asked for.
#
# Then, small edits that each must apply exactly once (a plugin upgrade that
# changes their context fails here rather than silently):
#   - the cachenode image (CACHENODE_IMAGE, the operator's --cachenode-image)
#     becomes values cachenode.image.{repository,tag}, the tag defaulting to
#     the chart's appVersion like the operator's (the env values go through
#     tpl);
#   - the user-facing roles (rbac.helpers) are installed by default, as
#     config/default does;
#   - no imagePullPolicy unless asked for, as config/default.
# Chart.yaml, values.schema.json and README.md are ours and left alone.
# `make helm-chart` runs this; `make test` checks that it changes nothing
# (make verify-helm-chart), and e2e/release compares what the chart and the
# manifest render.
set -euo pipefail
cd "$(dirname "$0")/.."

chart=${1:-charts/distcache}
KUBECTL=${KUBECTL:-bin/kubectl}
# The names the images have in config/ (as in hack/deploy-manifests.sh).
OPERATOR_IMAGE_NAME=ghcr.io/distcache/operator
CACHENODE_IMAGE_NAME=ghcr.io/distcache/cachenode

die() { echo "helm-chart: $*" >&2; exit 1; }

hack/build-go-tool.sh kubebuilder
[ -x "$KUBECTL" ] || KUBE_BINARIES=kubectl hack/build-kube.sh >&2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/PROJECT" <<'EOF'
domain: distcache.io
layout:
- go.kubebuilder.io/v4
projectName: distcache
repo: github.com/distcache/distcache
version: "3"
EOF
: >"$tmp/Makefile"
IMG="$OPERATOR_IMAGE_NAME:latest" CACHENODE_IMG="$CACHENODE_IMAGE_NAME:latest" KUBECTL="$KUBECTL" \
  hack/deploy-manifests.sh >"$tmp/install.yaml"
# --manifests must not read dist/install.yaml, or the plugin runs
# `make build-installer` first.
if ! (cd "$tmp" && "$OLDPWD/bin/kubebuilder" edit --plugins=helm/v2-alpha --force \
  --manifests=install.yaml --output-dir=out) >"$tmp/kubebuilder.log" 2>&1; then
  cat "$tmp/kubebuilder.log" >&2
  die "kubebuilder edit --plugins=helm/v2-alpha failed"
fi
out="$tmp/out/chart"

# edit FILE OLD NEW replaces the one occurrence of OLD in FILE by NEW.
edit() {
  local n
  n=$(OLD="$2" perl -0ne '$n = () = /\Q$ENV{OLD}\E/g; print $n' "$1")
  [ "$n" = 1 ] || die "${1#"$tmp"/}: expected one occurrence of:
$2
found $n (did the kubebuilder plugin change its output?)"
  OLD="$2" NEW="$3" perl -0pi -e 's/\Q$ENV{OLD}\E/$ENV{NEW}/' "$1"
}

edit "$out/values.yaml" "    - name: CACHENODE_IMAGE
      value: $CACHENODE_IMAGE_NAME:latest" \
  "    - name: CACHENODE_IMAGE
      value: '{{ .Values.cachenode.image.repository }}:{{ .Values.cachenode.image.tag | default .Chart.AppVersion }}'"
edit "$out/templates/manager/manager.yaml" \
  '{{- toYaml .Values.manager.env | nindent 10 }}' \
  '{{- tpl (toYaml .Values.manager.env) $ | nindent 10 }}'
edit "$out/values.yaml" "    # tag: \"\"
    pullPolicy: IfNotPresent" \
  "    # tag: \"\"
    ## Pull policy (the Kubernetes default if not set: IfNotPresent for a
    ## versioned tag)
    ##
    # pullPolicy: IfNotPresent"
edit "$out/values.yaml" "    ## Install convenience admin/editor/viewer roles for CRDs
    ##
    enabled: false" \
  "    ## Install the editor and viewer roles of DistributedCache and
    ## CacheTenant (aggregated into the built-in admin, edit and view roles
    ## as their labels say), as the install manifest does
    ##
    enabled: true"
cat >>"$out/values.yaml" <<EOF
## The cache node image: what caches without spec.image run (the operator's
## --cachenode-image, passed through manager.env's CACHENODE_IMAGE).
##
cachenode:
  image:
    repository: $CACHENODE_IMAGE_NAME
    ## Image tag (defaults to Chart.appVersion if not set)
    ##
    # tag: ""
EOF

mkdir -p "$chart"
rm -rf "$chart/templates"
cp -R "$out/templates" "$chart/templates"
cp "$out/values.yaml" "$out/.helmignore" "$chart/"
