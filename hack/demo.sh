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
#   3. the S3 link: MinIO on this machine is well under a millisecond away,
#      S3 tens of milliseconds, so MinIO's readers reach it through a proxy
#      on the host (clickhouse.py link) that holds each request
#      DEMO_S3_LATENCY_MS: ClickHouse on the host directly, the cache nodes
#      through the Service minio/minio-link (no selector; its EndpointSlice
#      is the host's address on the pods' bridge). config/local is applied
#      through an overlay in .demo/config that points the cache's
#      spec.s3.endpoint there (config/local itself stays as e2e/cluster
#      uses it);
#   4. the bucket analytics-data in MinIO;
#   5. Prometheus on the host (bin/prometheus, hack/prometheus.sh) scraping
#      the cache nodes and the gateway every second with the labels the
#      operator's ServiceMonitor and PodMonitor give them;
#   6. hack/demo/clickhouse.py with chdb (ClickHouse's engine, hack/chdb-venv.sh):
#      loads a reviews table through the gateway and runs one query against S3
#      directly, through distcache for the first time and hot, in fresh
#      ClickHouse processes; then the Grafana dashboard's hit ratio and
#      bytes-by-tier queries as that Prometheus evaluates them, and where the
#      dashboard's ConfigMap is.
#
# The cluster stays up, and with it the S3 link (the cache reads S3 through
# it) and Prometheus, in the background (pids in .demo/); `hack/demo.sh down`
# (make demo-down) stops them and removes the cluster. Running make demo again
# reuses the cluster, restarts the link and Prometheus and loads the table
# afresh. Needs root, like hack/cluster.sh.
# Logs of the steps that print a lot are in .demo/.
#
#   DEMO_TIMEOUT  seconds each wait may take (default 300)
#   DEMO_ROWS     rows of the reviews table (default 600000, ~54 MiB)
#   DEMO_S3_LATENCY_MS  the S3 link's latency per request (default 30, as B2 in
#                 docs/benchmarks.md); 0: no link, everything reads MinIO as it is
#   DEMO_PROMETHEUS_PORT  Prometheus's port on 127.0.0.1 (default 19090)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LOGS="$ROOT/.demo"
TIMEOUT="${DEMO_TIMEOUT:-300}"
export DEMO_START=$(($(date +%s) - SECONDS))
IMG=distcache.local/operator:dev
CACHENODE_IMG=distcache.local/cachenode:dev
S3_LATENCY_MS="${DEMO_S3_LATENCY_MS:-30}"
PROMETHEUS_ADDR="127.0.0.1:${DEMO_PROMETHEUS_PORT:-19090}"
# hack/cluster.sh's bridge of the pods: its address is the pods' gateway,
# this machine as the pods reach it. The S3 link listens there.
BRIDGE=distcache-br0
LINK_PORT=19000
LINK_SERVICE=http://minio-link.minio.svc:9000

bold=$'\033[1m' off=$'\033[0m'
[ -t 1 ] || bold="" off=""
step() { printf '\n%s== %s%s  [%ds]\n' "$bold" "$*" "$off" "$SECONDS"; }
say() { printf '   %s\n' "$*"; }
die() {
  echo "demo: error: $*" >&2
  exit 1
}

# stop_pidfile FILE PATTERN: stops the process whose pid FILE holds (an earlier
# make demo started it in the background) if its command line still contains
# PATTERN (the pid was not reused), and removes FILE.
stop_pidfile() {
  local pid
  [ -f "$1" ] || return 0
  pid=$(cat "$1")
  if [[ $pid =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$2"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  rm -f "$1"
}
stop_background() {
  stop_pidfile "$LOGS/prometheus.pid" "--storage.tsdb.path=$LOGS/prometheus-data"
  stop_pidfile "$LOGS/s3-link.pid" "hack/demo/clickhouse.py link"
}

# make demo-down: the S3 link and Prometheus; the operator, so that it does not
# recreate the caches' StatefulSets while hack/cluster.sh down deletes every
# workload; then the cluster.
if [ "${1:-}" = down ]; then
  stop_background
  if kubeconfig=$(hack/cluster.sh kubeconfig 2>/dev/null); then
    "$ROOT/bin/kubectl" --kubeconfig "$kubeconfig" -n distcache-system delete deployment distcache-controller-manager \
      --ignore-not-found --timeout=60s || true
  fi
  exec hack/cluster.sh down
fi

[ "$(id -u)" = 0 ] || die "make demo runs a local Kubernetes cluster (kubelet, iptables, interfaces): run it as root"
for c in go python3 curl; do command -v "$c" >/dev/null || die "$c is required"; done
[[ $S3_LATENCY_MS =~ ^[0-9]+([.][0-9]+)?$ ]] || die "DEMO_S3_LATENCY_MS=$S3_LATENCY_MS: want milliseconds, 0 for no link"
link=true
if [[ $S3_LATENCY_MS =~ ^0*([.]0*)?$ ]]; then link=false; fi
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
statefulset_rolled() { # NAMESPACE NAME: every pod on the current revision and ready
  local s
  s=$(k -n "$1" get statefulset "$2" -o jsonpath='{.spec.replicas} {.status.updatedReplicas} {.status.readyReplicas} {.status.currentRevision} {.status.updateRevision}')
  read -r want updated ready current update <<<"$s"
  [ -n "$want" ] && [ "$updated" = "$want" ] && [ "$ready" = "$want" ] && [ "$current" = "$update" ]
}
bridge_address() {
  local a
  a=$(ip -4 -o addr show dev "$BRIDGE" 2>/dev/null | awk '{print $4}' | head -n 1)
  [ -n "$a" ] && echo "${a%/*}"
}
link_answers() { # HOST:PORT PIDFILE: the link runs and MinIO answers through it
  kill -0 "$(cat "$2")" 2>/dev/null || die "the S3 link exited: $(cat "$LOGS/s3-link.log")"
  curl -sf -o /dev/null --max-time 5 "http://$1/minio/health/ready"
}

# write_overlay DIR HOST_IP: a kustomization of config/local in DIR whose
# cache reads S3 at LINK_SERVICE, the Service minio/minio-link whose one
# endpoint is the S3 link on HOST_IP.
write_overlay() {
  mkdir -p "$1"
  cat >"$1/kustomization.yaml" <<EOF
# Written by hack/demo.sh: config/local with the cache reading S3 through the
# demo's S3 link (DEMO_S3_LATENCY_MS), a proxy on the host.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="$1" "$ROOT/config/local")
- link.yaml
patches:
- target: {group: cache.distcache.io, kind: DistributedCache, name: demo}
  patch: |-
    - op: replace
      path: /spec/s3/endpoint
      value: $LINK_SERVICE
EOF
  cat >"$1/link.yaml" <<EOF
# MinIO as the cache nodes reach it: through the S3 link on the host
# ($2:$LINK_PORT, the pods' gateway). No selector: the EndpointSlice names
# the host's address.
apiVersion: v1
kind: Service
metadata:
  name: minio-link
  namespace: minio
spec:
  ports:
  - {name: s3, port: 9000, targetPort: $LINK_PORT, protocol: TCP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: minio-link
  namespace: minio
  labels:
    kubernetes.io/service-name: minio-link
    endpointslice.kubernetes.io/managed-by: demo.distcache.io
addressType: IPv4
ports:
- {name: s3, port: $LINK_PORT, protocol: TCP}
endpoints:
- addresses: ["$2"]
  conditions: {ready: true}
EOF
}

# pods NAMESPACE SELECTOR: "name|IP|zone|cache|cache namespace" (from the pod
# labels) of the pods with an address that are not being deleted.
pods() {
  local name ip deleting rest
  k -n "$1" get pods -l "$2" -o jsonpath='{range .items[*]}{.metadata.name}|{.status.podIP}|{.metadata.deletionTimestamp}|{.metadata.labels.cache\.distcache\.io/zone}|{.metadata.labels.cache\.distcache\.io/cache}|{.metadata.labels.cache\.distcache\.io/cache-namespace}{"\n"}{end}' |
    while IFS='|' read -r name ip deleting rest; do
      if [ -n "$ip" ] && [ -z "$deleting" ]; then echo "$name|$ip|$rest"; fi
    done
}
NODE_PODS=app.kubernetes.io/name=cachenode,app.kubernetes.io/instance=demo
GATEWAY_PODS=app.kubernetes.io/name=distcache-gateway,app.kubernetes.io/instance=clickhouse-gateway

# prometheus_config NODES GATEWAYS (pods' lines): scrapes the cache nodes and
# the tenant's gateways every second with the target labels the operator's
# ServiceMonitor (distcache/demo) and PodMonitor (analytics/clickhouse-gateway)
# give them in a cluster that runs the prometheus-operator (as
# e2e/monitoring's scrapeConfig does): namespace, pod, container, endpoint and
# zone from the pod label; service and job = the cache for the nodes; job =
# namespace/PodMonitor, cache and cache_namespace from the pod labels for the
# gateways. Debian's Prometheus has no Kubernetes discovery: the targets are
# the pods of now.
prometheus_config() {
  local name ip zone cache cache_ns
  printf '%s\n' "# Written by hack/demo.sh." \
    "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}" \
    "scrape_configs:" \
    "- job_name: serviceMonitor/distcache/demo/0" \
    "  static_configs:"
  while IFS='|' read -r name ip zone _; do
    printf '  - targets: ["%s:9090"]\n    labels: {namespace: distcache, service: demo, job: demo, endpoint: metrics, container: cachenode, pod: %s, zone: %s}\n' \
      "$ip" "$name" "$zone"
  done <<<"$1"
  printf '%s\n' "- job_name: podMonitor/analytics/clickhouse-gateway/0" "  static_configs:"
  while IFS='|' read -r name ip zone cache cache_ns; do
    printf '  - targets: ["%s:9091"]\n    labels: {namespace: analytics, job: analytics/clickhouse-gateway, endpoint: metrics, container: gateway, pod: %s, zone: %s, cache: %s, cache_namespace: %s}\n' \
      "$ip" "$name" "$zone" "$cache" "$cache_ns"
  done <<<"$2"
}
prometheus_ready() { curl -sf -o /dev/null --max-time 2 "http://$PROMETHEUS_ADDR/-/ready"; }

step "make demo: distcache on a local Kubernetes cluster, with ClickHouse on top"
# The S3 link and Prometheus of an earlier run (restarted below).
stop_background
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

if $link; then
  host_ip=$(bridge_address) || die "no IPv4 address on $BRIDGE, the pods' bridge (hack/cluster.sh): is the cluster up?"
  write_overlay "$LOGS/config" "$host_ip"
  step "config/local, the cache reading S3 through the link: MinIO, DistributedCache demo, CacheTenant clickhouse (with spec.gateway)"
  k apply --server-side --force-conflicts -k "$LOGS/config" | sed 's/^/   /'
  minio_cluster_ip=$(k -n minio get service minio -o jsonpath='{.spec.clusterIP}')
  [ -n "$minio_cluster_ip" ] || die "Service minio/minio has no cluster IP"
  setsid python3 hack/demo/clickhouse.py link --listen "$host_ip:$LINK_PORT" --target "$minio_cluster_ip:9000" \
    --latency-ms "$S3_LATENCY_MS" >"$LOGS/s3-link.log" 2>&1 </dev/null &
  echo $! >"$LOGS/s3-link.pid"
  say "S3 link: $host_ip:$LINK_PORT (this machine, on the pods' bridge) -> MinIO (Service minio/minio, $minio_cluster_ip:9000),"
  say "each request ${S3_LATENCY_MS} ms later; pid in .demo/s3-link.pid, log .demo/s3-link.log"
  say "the cache's spec.s3.endpoint: $LINK_SERVICE (Service minio/minio-link, its EndpointSlice: $host_ip:$LINK_PORT)"
else
  step "config/local: MinIO, DistributedCache demo, CacheTenant clickhouse (with spec.gateway); no S3 link (DEMO_S3_LATENCY_MS=0)"
  k apply --server-side --force-conflicts -k config/local | sed 's/^/   /'
  k -n minio delete service,endpointslice minio-link --ignore-not-found >/dev/null
fi
# The gateway of an earlier run holds the pages of the table that run read in
# its RAM: it restarts (while the rest gets ready), so that this run starts as
# the first did. The waits below wait for the new pod.
if [ -n "$(pods analytics "$GATEWAY_PODS" 2>/dev/null || true)" ]; then
  k -n analytics delete pod -l "$GATEWAY_PODS" --wait=false >/dev/null
  say "the gateway of an earlier run restarts (its RAM holds the pages of the table that run read)"
fi
# A gateway Deployment from an older demo (config/local wrote one by hand).
k -n analytics delete deployment,service,secret gateway gateway-keys --ignore-not-found >/dev/null 2>&1 || true
wait_for "MinIO ready" deployment_ready minio minio
if $link; then
  wait_for "MinIO answers through the S3 link" link_answers "$host_ip:$LINK_PORT" "$LOGS/s3-link.pid"
fi
wait_for "DistributedCache demo Ready" ready_condition distributedcache distcache demo
wait_for "cache nodes on the current spec (StatefulSet demo-zone-a rolled out)" statefulset_rolled distcache demo-zone-a
wait_for "CacheTenant clickhouse Ready (client certificate issued)" ready_condition cachetenant analytics clickhouse
wait_for "CacheTenant clickhouse GatewayReady (the operator's gateway in zone-a)" ready_condition cachetenant analytics clickhouse GatewayReady
wait_for "gateway endpoint ready" have_ready_ip analytics clickhouse-gateway
wait_for "gateway Deployment rolled out" deployment_ready analytics clickhouse-gateway-zone-a

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

step "Prometheus on this machine (bin/prometheus): the cache nodes and the gateway, as the operator's monitors would"
prometheus=$(hack/prometheus.sh 2>"$LOGS/prometheus-install.log") ||
  { cat "$LOGS/prometheus-install.log" >&2; die "hack/prometheus.sh failed"; }
if prometheus_ready; then die "something already answers on $PROMETHEUS_ADDR: set DEMO_PROMETHEUS_PORT to a free port"; fi
node_pods=$(pods distcache "$NODE_PODS")
gateway_pods=$(pods analytics "$GATEWAY_PODS")
if [ -z "$node_pods" ] || [ -z "$gateway_pods" ]; then die "no cache node or no gateway pod to scrape"; fi
prometheus_config "$node_pods" "$gateway_pods" >"$LOGS/prometheus.yml"
rm -rf "$LOGS/prometheus-data"
setsid "$prometheus" --config.file="$LOGS/prometheus.yml" --storage.tsdb.path="$LOGS/prometheus-data" \
  --web.listen-address="$PROMETHEUS_ADDR" --storage.tsdb.retention.time=1d --log.level=warn \
  >"$LOGS/prometheus.log" 2>&1 </dev/null &
echo $! >"$LOGS/prometheus.pid"
wait_for "Prometheus ready at http://$PROMETHEUS_ADDR" prometheus_ready
say "it scrapes $(wc -l <<<"$node_pods") cache nodes and $(wc -l <<<"$gateway_pods") gateway every second (.demo/prometheus.yml: the pods of now)"
say "and keeps running after the demo (pid in .demo/prometheus.pid; make demo-down stops it)"

step "ClickHouse on this machine reaches the pods directly"
wait "$chdb_pid" || { cat "$LOGS/chdb-venv.log" >&2; die "installing chdb failed (hack/chdb-venv.sh)"; }
python=$(tail -n 1 "$LOGS/chdb-python")
node_metrics=$(cut -d'|' -f2 <<<"$node_pods" | sed 's#.*#http://&:9090/metrics#' | paste -sd,)
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
if $link; then
  s3="http://$host_ip:$LINK_PORT"
  say "S3       $s3  MinIO through the S3 link, ${S3_LATENCY_MS} ms per request; MinIO's root keys (Secret minio/minio-root)"
else
  s3="http://$minio_ip:9000"
  say "S3       $s3  MinIO's pod; MinIO's root keys (Secret minio/minio-root)"
fi
"$python" hack/demo/clickhouse.py demo --bucket "$bucket" \
  --gateway "http://$gateway_ip:$gateway_port" --gateway-key="$gateway_key" --gateway-secret="$gateway_secret" \
  --s3 "$s3" --s3-key="$minio_user" --s3-secret="$minio_password" --s3-latency-ms "$S3_LATENCY_MS" \
  --node-metrics "$node_metrics" --gateway-metrics "http://$gateway_ip:9091/metrics" \
  --prometheus "http://$PROMETHEUS_ADDR" --cache distcache/demo
say "the dashboard itself, for a Grafana in the cluster (its sidecar loads ConfigMaps labelled grafana_dashboard=1;"
say "the cache's spec.monitoring.grafanaDashboard):"
say "\$ kubectl -n distcache get configmap demo-dashboard"
k -n distcache get configmap demo-dashboard | sed 's/^/   /'

running="the cluster keeps running, with Prometheus"
if $link; then running="the cluster keeps running, with the S3 link and Prometheus"; fi
step "make demo done in ${SECONDS}s; $running. Try:"
cat <<EOF
   export KUBECONFIG=$KUBECONFIG PATH=$ROOT/bin:\$PATH
   kubectl get distributedcache -A -w                                  # in a second terminal
   kubectl scale distributedcache/demo -n distcache --replicas=4       # a 4th node joins the ring
   kubectl get cm demo-ring -n distcache -o jsonpath='{.data.zone-a\.json}'
   kubectl get cachetenant -A
   kubectl get pods -n distcache -o wide
   curl -s http://$gateway_ip:9091/metrics | grep ^distcache_gateway_requests_total
   curl -s http://$PROMETHEUS_ADDR/api/v1/query --data-urlencode 'query=sum by (pod, result) (distcache_chunk_reads_total)'
   make demo        # again: loads the table afresh and reruns the query (the cluster is reused)
   make demo-down   # stops the S3 link and Prometheus, removes the cluster and everything in it
EOF
