#!/usr/bin/env bash
# make stack / make stack-down: a local distcache on loopback for people and
# for checks. MinIO (or the S3 given by S3_ENDPOINT/S3_ACCESS_KEY/S3_SECRET_KEY),
# three cache nodes sharing one ring, and two S3 gateways, one per tenant (A
# and B), each with its own client certificate, credentials and bucket.
# WRITE_MODE=write-back or WRITE_MODE=transient puts tenant A's bucket under
# that write policy (docs/write-back.md: WriteBack or Transient, two
# replicas); unset (or write-through), writes go through to S3 as always.
# Everything lives in .stack/ (gitignored); .stack/env describes it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
st="$root/.stack"

down() {
  if [ -f "$st/pids" ]; then
    while read -r pid name; do
      kill "$pid" 2>/dev/null && echo "stopped $name ($pid)" || true
    done <"$st/pids"
    # Wait for them so ports and files are released.
    while read -r pid _; do
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    done <"$st/pids"
    rm -f "$st/pids"
  fi
}

case "${1:-up}" in
  down) down; exit 0 ;;
  up) ;;
  *) echo "usage: $0 [up|down]" >&2; exit 2 ;;
esac

# Checked before anything is stopped or started.
WRITE_MODE=${WRITE_MODE:-write-through}
case "$WRITE_MODE" in
  write-through) policy_a="" ;;
  write-back) policy_a=WriteBack ;;
  transient) policy_a=Transient ;;
  *) echo "WRITE_MODE=$WRITE_MODE: want write-back, transient or write-through (the default, when unset)" >&2; exit 2 ;;
esac

down
rm -rf "$st"; mkdir -p "$st"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_http() { for _ in $(seq 1 600); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "timed out waiting for $1 (logs in .stack/)" >&2; return 1; }
start() { # name, command...
  local name=$1; shift
  nohup setsid "$@" >"$st/$name.log" 2>&1 </dev/null &
  echo "$! $name" >>"$st/pids"
}

# The S3 origin.
if [ -n "${S3_ENDPOINT:-}" ]; then
  : "${S3_ACCESS_KEY:?S3_ENDPOINT needs S3_ACCESS_KEY}" "${S3_SECRET_KEY:?S3_ENDPOINT needs S3_SECRET_KEY}"
else
  S3_ACCESS_KEY=stack-admin
  S3_SECRET_KEY=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  port=$(free_port)
  S3_ENDPOINT="http://127.0.0.1:$port"
  MINIO_ROOT_USER=$S3_ACCESS_KEY MINIO_ROOT_PASSWORD=$S3_SECRET_KEY MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CI_CD=on \
    start minio bin/minio server --quiet --address "127.0.0.1:$port" --certs-dir "$st/minio-certs" "$st/minio"
  wait_http "$S3_ENDPOINT/minio/health/ready"
fi
s3curl() { curl -fsS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" "$@"; }
BUCKET_A=tenant-a-data BUCKET_B=tenant-b-data
for b in $BUCKET_A $BUCKET_B; do
  s3curl -o /dev/null -X PUT "$S3_ENDPOINT/$b" 2>/dev/null || s3curl -o /dev/null -I "$S3_ENDPOINT/$b"
done

# Certificates: node certificates double as the nodes' peer identities.
NODES=(cache-0 cache-1 cache-2)
node_args=()
for n in "${NODES[@]}"; do node_args+=(--node "$n"); done
bin/cachenode certs --dir "$st/certs" --server-dns localhost --server-ip 127.0.0.1 "${node_args[@]}" \
  --tenant tenant-a --tenant tenant-b >/dev/null

# With WRITE_MODE, tenant A's whole bucket is held on two of the three nodes.
policies_a=""
if [ -n "$policy_a" ]; then
  policies_a=$'\n    policies:\n      - {bucket: '"$BUCKET_A"', mode: '"$policy_a"', replicas: 2}'
fi
cat >"$st/tenants.yaml" <<YAML
tenants:
  - name: tenant-a
    buckets: [$BUCKET_A]
    quotaBytes: 268435456$policies_a
  - name: tenant-b
    buckets: [$BUCKET_B]
    quotaBytes: 268435456
YAML

# The ring: three members on loopback.
declare -A API OPS
members=""
for i in "${!NODES[@]}"; do
  n=${NODES[$i]}; API[$n]=$(free_port); OPS[$n]=$(free_port)
  members+="${members:+,}{\"name\":\"$n\",\"address\":\"127.0.0.1:${API[$n]}\",\"ordinal\":$i,\"weight\":100,\"state\":\"active\"}"
done
echo "{\"epoch\":1,\"zone\":\"local\",\"hash\":{\"algorithm\":\"rendezvous-xxhash64\",\"seed\":0},\"members\":[$members]}" >"$st/ring.json"

node_urls="" metrics_urls=""
for n in "${NODES[@]}"; do
  AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY \
  start "$n" bin/cachenode serve --node-name "$n" --ring-file "$st/ring.json" \
    --listen "127.0.0.1:${API[$n]}" --metrics-listen "127.0.0.1:${OPS[$n]}" \
    --tls-cert "$st/certs/node-$n.crt" --tls-key "$st/certs/node-$n.key" --client-ca "$st/certs/ca.crt" \
    --tenants-file "$st/tenants.yaml" --data-dir "$st/$n" --disk-bytes 1Gi --ram-bytes 256Mi \
    --s3-endpoint "$S3_ENDPOINT" --s3-path-style
  node_urls+="${node_urls:+ }https://127.0.0.1:${API[$n]}"
  metrics_urls+="${metrics_urls:+ }http://127.0.0.1:${OPS[$n]}/metrics"
done
for n in "${NODES[@]}"; do wait_http "http://127.0.0.1:${OPS[$n]}/readyz"; done

# Gateways: one per tenant, each with its own S3 credentials for its clients.
gateway_env=""
for t in a b; do
  gw=$(free_port); gwops=$(free_port)
  key="tenant-$t-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  secret=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  start "gateway-$t" bin/cachenode gateway --listen "127.0.0.1:$gw" --metrics-listen "127.0.0.1:$gwops" \
    --nodes "${node_urls// /,}" --tls-cert "$st/certs/tenant-tenant-$t.crt" --tls-key "$st/certs/tenant-tenant-$t.key" \
    --ca "$st/certs/ca.crt" --access-key "$key" --secret-key "$secret"
  wait_http "http://127.0.0.1:$gwops/readyz"
  if [ "$t" = a ]; then
    gateway_env+="STACK_GATEWAY_ENDPOINT=http://127.0.0.1:$gw"$'\n'"STACK_ACCESS_KEY=$key"$'\n'"STACK_SECRET_KEY=$secret"$'\n'"STACK_BUCKET=$BUCKET_A"$'\n'
  else
    gateway_env+="STACK_GATEWAY_B_ENDPOINT=http://127.0.0.1:$gw"$'\n'"STACK_B_ACCESS_KEY=$key"$'\n'"STACK_B_SECRET_KEY=$secret"$'\n'"STACK_B_BUCKET=$BUCKET_B"$'\n'
  fi
done

{
  printf '%s' "$gateway_env"
  echo "STACK_S3_ENDPOINT=$S3_ENDPOINT"
  echo "STACK_S3_ACCESS_KEY=$S3_ACCESS_KEY"
  echo "STACK_S3_SECRET_KEY=$S3_SECRET_KEY"
  echo "STACK_NODE_ENDPOINTS=\"$node_urls\""
  echo "STACK_CA_FILE=$st/certs/ca.crt"
  echo "STACK_METRICS_URLS=\"$metrics_urls\""
  echo "STACK_TENANT_A_CERT=$st/certs/tenant-tenant-a.crt"
  echo "STACK_TENANT_A_KEY=$st/certs/tenant-tenant-a.key"
  echo "STACK_WRITE_MODE=$WRITE_MODE"
} >"$st/env"
echo "stack is up; tenant A's bucket $BUCKET_A is $WRITE_MODE${policy_a:+ ($policy_a, 2 replicas)}"
echo "settings in .stack/env (source it), logs in .stack/*.log; stop with: make stack-down"
