#!/usr/bin/env bash
# make demo: the whole product on a real local Kubernetes cluster, then
# ClickHouse on this machine using it by changing nothing but its S3 endpoint.
#
#   1. hack/cluster.sh up: a single-node cluster (builds Kubernetes, MinIO and
#      the project's images on the first run), or the one already up;
#   2. the operator (hack/deploy-manifests.sh with the distcache.local/*:dev
#      images), then config/local: MinIO, the DistributedCache demo (3 nodes),
#      the CacheTenant clickhouse, whose S3 gateway the operator runs
#      (spec.gateway); waits until they are Ready and prints the endpoint;
#   3. the bucket analytics-data in MinIO;
#   4. hack/demo/clickhouse.py with chdb (ClickHouse's engine, hack/chdb-venv.sh):
#      loads a reviews table through the gateway and runs one query against S3
#      directly, through distcache for the first time and hot, in fresh
#      ClickHouse processes; then the cache nodes' metrics.
#
# The cluster stays up; `hack/demo.sh down` (make demo-down) removes it. Running
# make demo again reuses it and loads the table afresh. Needs root, like
# hack/cluster.sh.
# Logs of the steps that print a lot are in .demo/.
#
#   DEMO_TIMEOUT  seconds each wait may take (default 300)
#   DEMO_ROWS     rows of the reviews table (default 600000, ~54 MiB)
#   DEMO_S3_LATENCY_MS  also query S3 directly through a proxy on this machine
#                 that adds this latency to each request (default 0: no such run)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LOGS="$ROOT/.demo"
TIMEOUT="${DEMO_TIMEOUT:-300}"
export DEMO_START=$(($(date +%s) - SECONDS))
IMG=distcache.local/operator:dev
CACHENODE_IMG=distcache.local/cachenode:dev

bold=$'\033[1m' off=$'\033[0m'
[ -t 1 ] || bold="" off=""
step() { printf '\n%s== %s%s  [%ds]\n' "$bold" "$*" "$off" "$SECONDS"; }
say() { printf '   %s\n' "$*"; }
die() {
  echo "demo: error: $*" >&2
  exit 1
}

# make demo-down: the operator first, so that it does not recreate the caches'
# StatefulSets while hack/cluster.sh down deletes every workload; then the cluster.
if [ "${1:-}" = down ]; then
  if kubeconfig=$(hack/cluster.sh kubeconfig 2>/dev/null); then
    "$ROOT/bin/kubectl" --kubeconfig "$kubeconfig" -n distcache-system delete deployment distcache-controller-manager \
      --ignore-not-found --timeout=60s || true
  fi
  exec hack/cluster.sh down
fi

[ "$(id -u)" = 0 ] || die "make demo runs a local Kubernetes cluster (kubelet, iptables, interfaces): run it as root"
for c in go python3 curl; do command -v "$c" >/dev/null || die "$c is required"; done
mkdir -p "$LOGS"

k() { "$ROOT/bin/kubectl" "$@"; }

# diagnose: what a user needs to see when a wait times out.
diagnose() {
  echo "---- pods ----" >&2
  k get pods -A -o wide >&2 || true
  echo "---- DistributedCache, CacheTenant ----" >&2
  k get distributedcache,cachetenant -A -o wide >&2 || true
  k get distributedcache,cachetenant -A -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}:{range .status.conditions[*]} {.type}={.status} ({.reason}: {.message}){end}{"\n"}{end}' >&2 || true
  echo "---- recent events ----" >&2
  k get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -n 20 >&2 || true
  echo "---- operator log (last lines) ----" >&2
  k -n distcache-system logs deploy/distcache-controller-manager --tail=20 >&2 || true
}

# wait_for DESCRIPTION COMMAND...: poll COMMAND every 2s for up to TIMEOUT seconds.
wait_for() {
  local desc=$1 start=$SECONDS
  shift
  until "$@" >/dev/null 2>&1; do
    # hack/cluster.sh down (from another terminal, a test) removes it.
    [ -f "$KUBECONFIG" ] || die "the cluster went away while waiting for $desc ($KUBECONFIG is gone)"
    if ((SECONDS - start >= TIMEOUT)); then
      echo "demo: error: timed out after ${TIMEOUT}s waiting for $desc" >&2
      diagnose
      exit 1
    fi
    sleep 2
  done
  say "$desc ($((SECONDS - start))s)"
}

ready_condition() { # KIND NAMESPACE NAME [TYPE]: condition TYPE (Ready) True for the object's current generation
  local s type=${4:-Ready}
  s=$(k -n "$2" get "$1" "$3" -o jsonpath="{.metadata.generation} {.status.conditions[?(@.type==\"$type\")].observedGeneration} {.status.conditions[?(@.type==\"$type\")].status}")
  read -r generation observed status <<<"$s"
  [ "$status" = True ] && [ "$observed" = "$generation" ]
}
deployment_ready() { # NAMESPACE NAME: every replica updated and ready, none left over
  local s
  s=$(k -n "$1" get deployment "$2" -o jsonpath='{.spec.replicas} {.status.updatedReplicas} {.status.readyReplicas} {.status.replicas}')
  read -r want updated ready total <<<"$s"
  [ -n "$want" ] && [ "$updated" = "$want" ] && [ "$ready" = "$want" ] && [ "$total" = "$want" ]
}
crds_established() {
  k wait --for condition=established --timeout=5s \
    crd/distributedcaches.cache.distcache.io crd/cachetenants.cache.distcache.io
}
# ready_ips NAMESPACE SERVICE: addresses of the Service's ready endpoints.
ready_ips() {
  k -n "$1" get endpointslices -l "kubernetes.io/service-name=$2" \
    -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}'
}
have_ready_ip() { [ -n "$(ready_ips "$1" "$2")" ]; }
secret_value() { # NAMESPACE SECRET KEY
  k -n "$1" get secret "$2" -o "jsonpath={.data.$3}" | base64 -d
}

step "make demo: distcache on a local Kubernetes cluster, with ClickHouse on top"
# chdb (~900 MB from PyPI on the first run) installs while the cluster builds.
(hack/chdb-venv.sh >"$LOGS/chdb-python" 2>"$LOGS/chdb-venv.log") &
chdb_pid=$!

step "local cluster (hack/cluster.sh up; the first run builds Kubernetes, MinIO and the images)"
was_up=false
if hack/cluster.sh status >/dev/null 2>&1; then was_up=true; fi
kubeconfig=$(hack/cluster.sh up 2> >(sed -u 's/^/   /' >&2) | tail -n 1)
[ -f "$kubeconfig" ] || die "hack/cluster.sh up printed no kubeconfig"
export KUBECONFIG=$kubeconfig
if $was_up; then
  say "the cluster was already up: using the images it has (hack/cluster.sh images, or make demo-down"
  say "and make demo again, after changing the code)"
fi
k get nodes -L topology.kubernetes.io/zone,node.kubernetes.io/instance-type | sed 's/^/   /'

step "operator: CRDs, RBAC and the manager in distcache-system ($IMG)"
IMG=$IMG CACHENODE_IMG=$CACHENODE_IMG KUBECTL="$ROOT/bin/kubectl" hack/deploy-manifests.sh >"$LOGS/operator.yaml"
k apply --server-side --force-conflicts -f "$LOGS/operator.yaml" >"$LOGS/operator-apply.log" ||
  { cat "$LOGS/operator-apply.log" >&2; die "applying the operator failed"; }
say "$(wc -l <"$LOGS/operator-apply.log") objects applied (.demo/operator.yaml)"
wait_for "CRDs established" crds_established
wait_for "operator ready" deployment_ready distcache-system distcache-controller-manager

step "config/local: MinIO, DistributedCache demo, CacheTenant clickhouse (with spec.gateway)"
k apply --server-side --force-conflicts -k config/local | sed 's/^/   /'
# A gateway Deployment from an older demo (config/local wrote one by hand).
k -n analytics delete deployment,service,secret gateway gateway-keys --ignore-not-found >/dev/null 2>&1 || true
wait_for "MinIO ready" deployment_ready minio minio
wait_for "DistributedCache demo Ready" ready_condition distributedcache distcache demo
wait_for "CacheTenant clickhouse Ready (client certificate issued)" ready_condition cachetenant analytics clickhouse
wait_for "CacheTenant clickhouse GatewayReady (the operator's gateway in zone-a)" ready_condition cachetenant analytics clickhouse GatewayReady
wait_for "gateway endpoint ready" have_ready_ip analytics clickhouse-gateway

minio_ip=$(ready_ips minio minio | head -n 1)
gateway_ip=$(ready_ips analytics clickhouse-gateway | head -n 1)
[ -n "$minio_ip" ] || die "MinIO has no ready endpoint"
minio_user=$(secret_value minio minio-root MINIO_ROOT_USER)
minio_password=$(secret_value minio minio-root MINIO_ROOT_PASSWORD)
endpoint=$(k -n analytics get cachetenant clickhouse -o jsonpath='{.status.endpoint}')
credentials=$(k -n analytics get cachetenant clickhouse -o jsonpath='{.status.credentialsSecret}')
gateway_port=${endpoint##*:}
gateway_key=$(secret_value analytics "$credentials" AWS_ACCESS_KEY_ID)
gateway_secret=$(secret_value analytics "$credentials" AWS_SECRET_ACCESS_KEY)
bucket=$(k -n analytics get cachetenant clickhouse -o jsonpath='{.spec.buckets[0]}')

step "bucket $bucket in MinIO (http://$minio_ip:9000, the pod's address)"
code=$(curl -sS -o "$LOGS/bucket.xml" -w '%{http_code}' --max-time 30 -X PUT \
  --aws-sigv4 "aws:amz:us-east-1:s3" --user "$minio_user:$minio_password" "http://$minio_ip:9000/$bucket")
case "$code" in
  200) say "created" ;;
  409) say "already there" ;;
  *) die "creating bucket $bucket: HTTP $code: $(cat "$LOGS/bucket.xml")" ;;
esac

step "what the operator made"
say "\$ kubectl get distributedcache -A"
k get distributedcache -A | sed 's/^/   /'
progressing=$(k -n distcache get distributedcache demo \
  -o jsonpath='{.status.conditions[?(@.type=="Progressing")].status} {.status.conditions[?(@.type=="Progressing")].message}')
if [[ $progressing == True* ]]; then say "(the operator is still at work: ${progressing#True }; the cache serves meanwhile)"; fi
say "\$ kubectl get cachetenant -A"
k get cachetenant -A | sed 's/^/   /'
say "\$ kubectl get pods -n distcache -o wide"
k get pods -n distcache -o wide | sed 's/^/   /'
say "\$ kubectl get pods -n analytics -o wide"
k get pods -n analytics -o wide | sed 's/^/   /'
say "\$ kubectl get cm demo-ring -n distcache -o jsonpath='{.data.zone-a\\.json}'   (summarized)"
k -n distcache get cm demo-ring -o jsonpath='{.data.zone-a\.json}' | python3 -c '
import json, sys
r = json.load(sys.stdin)
ms = r.get("members", [])
print("   ring of zone %s: epoch %s, %s, %d members" % (r.get("zone"), r.get("epoch"), r.get("hash", {}).get("algorithm"), len(ms)))
for m in ms:
    print("     %-24s %-44s weight %-4s %s" % (m.get("name"), m.get("address"), m.get("weight"), m.get("state")))
'

step "ClickHouse on this machine reaches the pods directly"
wait "$chdb_pid" || { cat "$LOGS/chdb-venv.log" >&2; die "installing chdb failed (hack/chdb-venv.sh)"; }
python=$(tail -n 1 "$LOGS/chdb-python")
node_metrics=$(k -n distcache get pods -l app.kubernetes.io/name=cachenode,app.kubernetes.io/instance=demo \
  -o jsonpath='{range .items[*]}{.status.podIP}{"\n"}{end}' | sed '/^$/d; s#.*#http://&:9090/metrics#' | paste -sd,)
say "the tenant's endpoint is $endpoint (status.endpoint), keys in Secret analytics/$credentials;"
say "inside the cluster ClickHouse would use this disk, with the Secret as its environment:"
cat <<XML | sed 's/^/     /'
<clickhouse><storage_configuration><disks>
  <distcache>
    <type>s3</type>
    <endpoint>$endpoint/$bucket/clickhouse/</endpoint>
    <access_key_id from_env="AWS_ACCESS_KEY_ID"/>
    <secret_access_key from_env="AWS_SECRET_ACCESS_KEY"/>
  </distcache>
</disks></storage_configuration></clickhouse>
XML
say "this machine is outside the cluster's DNS: it uses that Service's ready pod instead"
say "gateway  http://$gateway_ip:$gateway_port  (Service analytics/clickhouse-gateway)"
say "S3       http://$minio_ip:9000  MinIO's root keys (Secret minio/minio-root)"
"$python" hack/demo/clickhouse.py demo --bucket "$bucket" \
  --gateway "http://$gateway_ip:$gateway_port" --gateway-key "$gateway_key" --gateway-secret "$gateway_secret" \
  --s3 "http://$minio_ip:9000" --s3-key "$minio_user" --s3-secret "$minio_password" \
  --node-metrics "$node_metrics" --gateway-metrics "http://$gateway_ip:9091/metrics"

step "make demo done in ${SECONDS}s; the cluster keeps running. Try:"
cat <<EOF
   export KUBECONFIG=$KUBECONFIG PATH=$ROOT/bin:\$PATH
   kubectl get distributedcache -A -w                                  # in a second terminal
   kubectl scale distributedcache/demo -n distcache --replicas=4       # a 4th node joins the ring
   kubectl get cm demo-ring -n distcache -o jsonpath='{.data.zone-a\.json}'
   kubectl get cachetenant -A
   kubectl get pods -n distcache -o wide
   curl -s http://$gateway_ip:9091/metrics | grep ^distcache_gateway_requests_total
   make demo        # again: loads the table afresh and reruns the query (the cluster is reused)
   make demo-down   # removes the cluster and everything in it
EOF
