#!/usr/bin/env bash
# make demo-local: MinIO and one cache node on loopback with real mTLS
# certificates, no Kubernetes (make demo runs the whole product on a local
# cluster).
# Writes an object through the cache, puts another behind its back, reads
# both twice (miss, then hit) and shows the node's hit ratio from /metrics.
# Everything lives in .demo/ and is stopped on exit; DEMO_KEEP=1 keeps the
# servers running until Ctrl-C so you can poke at them.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
demo="$root/.demo"
rm -rf "$demo"; mkdir -p "$demo"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_http() { for _ in $(seq 1 300); do curl -fsS -o /dev/null "$@" 2>/dev/null && return 0; sleep 0.1; done; echo "timed out waiting for $*" >&2; return 1; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

MINIO_PORT=$(free_port); NODE_PORT=$(free_port); METRICS_PORT=$(free_port)
export MINIO_ROOT_USER=demo-admin MINIO_ROOT_PASSWORD=demo-secret-$(date +%s)
S3="http://127.0.0.1:$MINIO_PORT"
s3curl() { curl -fsS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$MINIO_ROOT_USER:$MINIO_ROOT_PASSWORD" "$@"; }

step "starting MinIO (the S3 backend) on $S3"
MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CI_CD=on bin/minio server --quiet --address "127.0.0.1:$MINIO_PORT" \
  --certs-dir "$demo/minio-certs" "$demo/minio" >"$demo/minio.log" 2>&1 &
pids+=($!)
wait_http "$S3/minio/health/ready"
s3curl -X PUT "$S3/analytics"

step "issuing a CA, a server certificate and a client certificate for tenant 'analytics'"
bin/cachenode certs --dir "$demo/certs" --tenant analytics --server-dns localhost --server-ip 127.0.0.1
cat >"$demo/tenants.yaml" <<YAML
tenants:
  - name: analytics
    buckets: [analytics]
    quotaBytes: 536870912
YAML

step "starting a cache node: mTLS API on :$NODE_PORT, metrics on :$METRICS_PORT"
AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=$MINIO_ROOT_PASSWORD \
bin/cachenode serve --listen "127.0.0.1:$NODE_PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
  --tls-cert "$demo/certs/server.crt" --tls-key "$demo/certs/server.key" --client-ca "$demo/certs/ca.crt" \
  --tenants-file "$demo/tenants.yaml" --data-dir "$demo/store" --disk-bytes 1Gi --ram-bytes 256Mi \
  --chunk-size 4Mi --s3-endpoint "$S3" --s3-path-style >"$demo/cachenode.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$METRICS_PORT/readyz"

NODE="https://localhost:$NODE_PORT/v1/objects/analytics"
tls=(--cacert "$demo/certs/ca.crt" --cert "$demo/certs/tenant-analytics.crt" --key "$demo/certs/tenant-analytics.key")
fmt='%{http_code}  %{size_download} bytes in %{time_total}s  cache=%header{x-distcache-cache}\n'

head -c $((48 << 20)) /dev/urandom >"$demo/table.bin"
head -c $((32 << 20)) /dev/urandom >"$demo/behind.bin"

step "write-through: PUT 48 MiB through the cache (acknowledged after S3 has it)"
curl -fsS "${tls[@]}" -T "$demo/table.bin" "$NODE/table.bin" -o /dev/null -w '%{http_code}  48 MiB acknowledged in %{time_total}s\n'

step "an object written straight to S3, behind the cache's back"
s3curl -T "$demo/behind.bin" "$S3/analytics/behind.bin"

for round in first second; do
  step "$round read of each object through the cache"
  for obj in table.bin behind.bin; do
    printf '%-11s ' "$obj"; curl -fsS "${tls[@]}" "$NODE/$obj" -o "$demo/out.bin" -w "$fmt"
    cmp -s "$demo/out.bin" "$demo/$obj" || { echo "MISMATCH for $obj" >&2; exit 1; }
  done
done

step "for comparison: the same object straight from S3 (MinIO on loopback here; real S3 adds tens of ms per request)"
printf '%-11s ' behind.bin; s3curl "$S3/analytics/behind.bin" -o /dev/null -w '%{http_code}  %{size_download} bytes in %{time_total}s\n'

step "a 64 KiB range of chunk 3 (the unit a smart client or the gateway asks for)"
curl -fsS "${tls[@]}" -H 'Range: bytes=65536-131071' "$NODE/table.bin?chunk=3" -o /dev/null -w "$fmt"

step "without a client certificate the handshake is refused"
if curl -sS --cacert "$demo/certs/ca.crt" "$NODE/table.bin" -o /dev/null 2>"$demo/nocert.err"; then
  echo "unexpected: request without a certificate succeeded" >&2; exit 1
fi
sed 's/^/  /' "$demo/nocert.err"

step "the node's metrics (http://127.0.0.1:$METRICS_PORT/metrics)"
curl -fsS "http://127.0.0.1:$METRICS_PORT/metrics" >"$demo/metrics.txt"
grep -E '^distcache_(chunk_reads_total|s3_requests_total|store_bytes|store_chunks)' "$demo/metrics.txt" | sed 's/^/  /'
awk '/^distcache_chunk_reads_total/ { v=$NF; if ($0 ~ /result="hit/) h+=v; t+=v } END { printf "\n  chunk hit ratio: %d of %d = %.0f%%\n", h, t, (t ? 100*h/t : 0) }' "$demo/metrics.txt"

if [ "${DEMO_KEEP:-0}" = 1 ]; then
  step "servers keep running (Ctrl-C to stop); try:"
  echo "  curl ${tls[*]} $NODE/table.bin -o /dev/null -w '$fmt'"
  wait
fi
step "demo done; logs in .demo/"
