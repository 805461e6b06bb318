#!/usr/bin/env bash
# Prints the operator's manifests on stdout: config/default (CRDs, RBAC, the
# Deployment in distcache-system) with the operator image set to $IMG and the
# cachenode image (--cachenode-image) to $CACHENODE_IMG, rendered by kubectl's
# built-in kustomize. `make deploy`, `make undeploy` and `make deploy-manifests`
# use it, and e2e/deploy tests exactly this output.
#
#   IMG=registry.example.com/distcache/operator:v0.1.0 \
#   CACHENODE_IMG=registry.example.com/distcache/cachenode:v0.1.0 \
#     hack/deploy-manifests.sh | bin/kubectl apply --server-side -f -
#
# The images are set by a kustomize overlay generated in a temporary
# directory (images: entries on top of config/default), so the tree is left
# alone, unlike `kustomize edit set image`. config/manager makes the manager's
# CACHENODE_IMAGE an image field (kustomizeconfig.yaml), so one images: entry
# per image does it. An image reference may carry a registry port, a tag and
# a digest (host:5000/team/operator:v1@sha256:...); without tag or digest it
# means :latest, as docker pull does.
set -euo pipefail
cd "$(dirname "$0")/.."

KUBECTL="${KUBECTL:-bin/kubectl}"
IMG="${IMG:-ghcr.io/distcache/operator:latest}"
CACHENODE_IMG="${CACHENODE_IMG:-ghcr.io/distcache/cachenode:latest}"
# The kustomization to render; config/default unless told otherwise.
CONFIG_DIR="${CONFIG_DIR:-config/default}"

# The names the images have in config/ (config/manager/kustomization.yaml sets
# the first, config/manager/manager.yaml the second).
OPERATOR_IMAGE_NAME=ghcr.io/distcache/operator
CACHENODE_IMAGE_NAME=ghcr.io/distcache/cachenode

[ -x "$KUBECTL" ] || { echo "deploy-manifests: $KUBECTL not found; run hack/build-kube.sh (or make envtest-assets)" >&2; exit 1; }
[ -d "$CONFIG_DIR" ] || { echo "deploy-manifests: no directory $CONFIG_DIR" >&2; exit 1; }

# images_entry NAME REF prints an images: entry that replaces image NAME by REF.
images_entry() {
  local name=$1 ref=$2 tag="" digest=""
  # A reference is [host[:port]/]path[:tag][@algorithm:hex]; refuse anything
  # else rather than write it into YAML.
  if ! [[ $ref =~ ^[a-z0-9]([a-zA-Z0-9._/:-]*[a-zA-Z0-9_])?(@[a-z0-9]+:[a-f0-9]{32,})?$ ]]; then
    echo "deploy-manifests: '$ref' is not an image reference (name[:tag][@digest])" >&2
    return 1
  fi
  if [[ $ref == *@* ]]; then
    digest=${ref#*@}
    ref=${ref%%@*}
  fi
  # A colon after the last slash starts the tag; one before it is a port.
  if [[ ${ref##*/} == *:* ]]; then
    tag=${ref##*:}
    ref=${ref%:*}
  fi
  if [ -z "$tag" ] && [ -z "$digest" ]; then
    tag=latest
  fi
  echo "- name: $name"
  echo "  newName: $ref"
  if [ -n "$tag" ]; then echo "  newTag: \"$tag\""; fi
  if [ -n "$digest" ]; then echo "  digest: $digest"; fi
}

overlay=$(cd "$(mktemp -d)" && pwd -P)
trap 'rm -rf "$overlay"' EXIT
# kustomize wants a resource path relative to the overlay: up to / and down.
up=$(echo "${overlay#/}" | sed 's#[^/][^/]*#..#g')
{
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources:"
  echo "- ${up}$(cd "$CONFIG_DIR" && pwd -P)"
  echo "images:"
  images_entry "$OPERATOR_IMAGE_NAME" "$IMG"
  images_entry "$CACHENODE_IMAGE_NAME" "$CACHENODE_IMG"
} >"$overlay/kustomization.yaml"

"$KUBECTL" kustomize "$overlay"
