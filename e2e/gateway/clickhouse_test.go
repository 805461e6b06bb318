package gateway_test

import (
	"testing"

	"github.com/distcache/distcache/internal/testutil/chdbtest"
)

// TestClickHouseThroughGateway runs the ClickHouse scenario (chdb: a
// MergeTree table on an S3 disk with inserts, merges, mutations and drops,
// and a Parquet file through the s3() table function) against MinIO
// directly and then through the gateway, and requires identical results.
func TestClickHouseThroughGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("needs chdb (hack/chdb-venv.sh); skipped in -short mode")
	}
	chdbtest.Python(t) // build or find the venv first, so its failure reads clearly
	e := newEnv(t, envOptions{pageCache: 64 << 20})
	minio := e.cluster.MinIO
	ref := chdbtest.Run(t, chdbtest.Target{Endpoint: minio.Endpoint, AccessKey: minio.AccessKey, SecretKey: minio.SecretKey,
		Bucket: "clickhouse", Prefix: "minio-direct", Region: minio.Region})
	got := chdbtest.Run(t, chdbtest.Target{Endpoint: e.srv.URL(), AccessKey: accessKey, SecretKey: secretKey,
		Bucket: "clickhouse", Prefix: "through-gateway", Region: region})
	t.Logf("MinIO direct: %d queries in %v; through the gateway: %v", len(ref.Results), ref.Elapsed, got.Elapsed)
	chdbtest.RequireSame(t, "MinIO direct", ref.Results, "gateway", got.Results)

	// ClickHouse's reads went through the cache and its writes through
	// the write-through and pass-through paths.
	for _, op := range []string{"GetObject", "PutObject", "ListObjectsV2", "DeleteObjects"} {
		n := e.counter("distcache_gateway_requests_total", map[string]string{"operation": op})
		t.Logf("gateway served %v %s", n, op)
		if op != "DeleteObjects" && n == 0 {
			t.Errorf("ClickHouse sent no %s through the gateway", op)
		}
	}
	if n := e.counter("distcache_gateway_requests_total", map[string]string{"status": "500"}) +
		e.counter("distcache_gateway_requests_total", map[string]string{"status": "503"}); n != 0 {
		t.Errorf("%v requests failed with 5xx", n)
	}
}
