// Package clickhouse_test uses ClickHouse itself (chdb, from PyPI through
// hack/chdb-venv.sh) as the S3 client: a MergeTree table on an S3 disk and a
// Parquet file read with the s3() table function (scenario.py). A run against
// MinIO directly is the reference; a run against any other endpoint that
// serves the same MinIO (the distcache gateway, a proxy) must return exactly
// the same results.
//
// Run: go test ./e2e/clickhouse/ -v   (needs bin/minio: make bin/minio; the
// first run also builds bin/chdb-venv, ~1 minute of downloads from PyPI)
package clickhouse_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/testutil/chdbtest"
	"github.com/distcache/distcache/internal/testutil/miniotest"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

const bucket = "clickhouse"

// TestClickHouseOverS3 runs the reference scenario against MinIO directly,
// checks it against the arithmetic of the generated data, then requires every
// other way of reaching the same MinIO to give identical results. To test a
// new endpoint (e.g. the gateway), add a subtest that starts it in front of
// ref.minio and calls ref.compare.
func TestClickHouseOverS3(t *testing.T) {
	if testing.Short() {
		t.Skip("needs chdb (hack/chdb-venv.sh) and MinIO; skipped in -short mode")
	}
	ref := newReference(t)

	t.Run("minio-direct-again", func(t *testing.T) {
		// Same endpoint, another prefix: the scenario itself is deterministic.
		ref.compare(t, ref.minio.Endpoint, ref.minio.AccessKey, ref.minio.SecretKey)
	})

	t.Run("through-s3proxy", func(t *testing.T) {
		// A plain reverse proxy stands in for the gateway until it exists.
		p := s3proxy.New(t, ref.minio.Endpoint)
		ref.compare(t, p.URL(), ref.minio.AccessKey, ref.minio.SecretKey)
		for _, m := range []string{"GET", "HEAD", "PUT", "POST", "DELETE"} {
			t.Logf("proxy saw %d %s requests", p.Count(m, "/"+bucket+"/"), m)
		}
		// Range reads, single and multipart uploads, DeleteObjects and
		// ListObjectsV2 all went through the proxy.
		for _, m := range []string{"GET", "PUT", "POST"} {
			if p.Count(m, "/"+bucket+"/") == 0 {
				t.Errorf("no %s requests went through the proxy", m)
			}
		}
	})
}

// reference is a MinIO with the scenario's results when ClickHouse talks to
// it directly.
type reference struct {
	minio   *miniotest.Server
	results map[string]any
}

func newReference(t *testing.T) *reference {
	t.Helper()
	chdbtest.Python(t) // build or find the venv first, so its failure reads clearly
	srv := miniotest.Start(t)
	srv.CreateBucket(t, bucket)
	res := chdbtest.Run(t, chdbtest.Target{
		Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		Bucket: bucket, Prefix: "minio-direct", Region: srv.Region,
	})
	t.Logf("MinIO direct: %d queries in %v", len(res.Results), res.Elapsed)
	logS3Events(t, res)
	checkArithmetic(t, res)
	return &reference{minio: srv, results: res.Results}
}

var nonPrefixChars = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// compare runs the scenario against endpoint, which must serve ref.minio's
// bucket under the given credentials, under a prefix of its own (derived from
// the test name) and requires the results to equal MinIO direct's.
func (ref *reference) compare(t *testing.T, endpoint, accessKey, secretKey string) *chdbtest.Result {
	t.Helper()
	prefix := strings.Trim(nonPrefixChars.ReplaceAllString(t.Name(), "-"), "-")
	res := chdbtest.Run(t, chdbtest.Target{
		Endpoint: endpoint, AccessKey: accessKey, SecretKey: secretKey,
		Bucket: bucket, Prefix: prefix, Region: ref.minio.Region,
	})
	t.Logf("%s: %d queries in %v", endpoint, len(res.Results), res.Elapsed)
	logS3Events(t, res)
	chdbtest.RequireSame(t, "MinIO direct", ref.results, endpoint, res.Results)
	return res
}

func logS3Events(t *testing.T, res *chdbtest.Result) {
	t.Helper()
	ev, _ := res.Info["s3_events"].(map[string]any)
	var parts []string
	for _, k := range []string{"S3GetObject", "S3HeadObject", "S3PutObject", "S3CreateMultipartUpload",
		"S3UploadPart", "S3CompleteMultipartUpload", "S3DeleteObjects", "S3ListObjects"} {
		if v, ok := ev[k]; ok {
			parts = append(parts, k[2:]+"="+toString(v))
		}
	}
	t.Logf("ClickHouse S3 requests: %s", strings.Join(parts, " "))
}

func toString(v any) string {
	if s, ok := v.(interface{ String() string }); ok {
		return s.String()
	}
	return "?"
}

// checkArithmetic recomputes, from the generation formulas in scenario.py,
// what a correct run must return.
func checkArithmetic(t *testing.T, res *chdbtest.Result) {
	t.Helper()
	param := func(name string) uint64 {
		t.Helper()
		n, ok := res.Params[name].(json.Number)
		u, err := strconv.ParseUint(string(n), 10, 64)
		if !ok || err != nil {
			t.Fatalf("params.%s = %#v, want an unsigned integer", name, res.Params[name])
		}
		return u
	}
	n := param("batches") * param("rows_per_batch")
	pq := param("parquet_rows")
	r := res.Results
	val := func(id uint64) uint64 { return id * 2654435761 % 1000003 }
	deleted := func(id uint64) bool { return id%10 == 3 || id%97 == 7 }
	month := func(id uint64) int { // 2024-01-01 + id%90 days: 31 in January, 29 in February
		switch d := id % 90; {
		case d < 31:
			return 0
		case d < 60:
			return 1
		default:
			return 2
		}
	}

	var sumVal, keptCount, keptSum, keptVal uint64
	var perMonth [3]uint64
	for id := range n {
		sumVal += val(id)
		perMonth[month(id)]++
		if !deleted(id) {
			keptCount++
			keptSum += id
			keptVal += val(id)
		}
	}

	expect := func(name string, row, col int, want uint64) {
		t.Helper()
		if got := chdbtest.Uint(t, r, name, row, col); got != want {
			t.Errorf("%s[%d][%d] = %d, want %d", name, row, col, got, want)
		}
	}
	expectRows := func(name string, want int) {
		t.Helper()
		if got := chdbtest.Rows(t, r, name); got != want {
			t.Errorf("%s has %d rows, want %d", name, got, want)
		}
	}

	// OPTIMIZE FINAL left one part per monthly partition.
	expectRows("parts_after_optimize", 3)
	for m := range 3 {
		expect("parts_after_optimize", m, 1, 1)
		expect("parts_after_optimize", m, 2, perMonth[m])
	}

	expect("before_delete.totals", 0, 0, n)
	expect("before_delete.totals", 0, 1, n*(n-1)/2)
	expect("before_delete.totals", 0, 2, 0)
	expect("before_delete.totals", 0, 3, n-1)
	expect("before_delete.totals", 0, 4, sumVal)
	expect("before_delete.totals", 0, 5, 97)
	expect("before_delete.totals", 0, 6, 1000)
	expectRows("before_delete.by_grp", 97)
	expectRows("before_delete.range", 30)
	expect("before_delete.range", 0, 0, 234500)

	// ALTER DELETE (id % 10 = 3) then lightweight DELETE (grp = 7).
	expect("mutations_unfinished", 0, 0, 0)
	expect("after_delete.totals", 0, 0, keptCount)
	expect("after_delete.totals", 0, 1, keptSum)
	expect("after_delete.totals", 0, 4, keptVal)
	expect("after_delete.totals", 0, 5, 96)
	expectRows("after_delete.by_grp", 96)
	var keptRange int
	for id := uint64(234500); id <= 234529; id++ {
		if !deleted(id) {
			keptRange++
		}
	}
	expectRows("after_delete.range", keptRange)

	// DROP TABLE ... SYNC removed every object the S3 disk wrote.
	expect("disk_objects_after_drop", 0, 0, 0)

	var pqVal uint64
	for id := range pq {
		pqVal += val(id)
	}
	expect("parquet.totals", 0, 0, pq)
	expect("parquet.totals", 0, 1, pq*(pq-1)/2)
	expect("parquet.totals", 0, 4, pqVal)
	expectRows("parquet.by_grp", 97)
	expectRows("parquet.range", 10)
	expect("parquet.range", 0, 0, 123450)
	expectRows("parquet.glob", 1)
	expect("parquet.glob", 0, 1, pq)
	expectRows("parquet.schema", 6)
}
