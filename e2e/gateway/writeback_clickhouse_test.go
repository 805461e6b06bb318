package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	dto "github.com/prometheus/client_model/go"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/chdbtest"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// clickhouseHeldTenants puts team-a's clickhouse/held/ under WriteBack,
// two copies.
var clickhouseHeldTenants = teamAPolicies("{bucket: clickhouse, prefix: held/, mode: WriteBack, replicas: 2}")

// The MergeTree table of the write-back test: its UUID is fixed, so that
// a fresh ClickHouse can ATTACH it over the first one's disk metadata
// (the parts' local paths are store/<uuid>/...).
const (
	chTableUUID    = "d15ca4e0-0027-4b2a-9c1e-00000000c11c"
	chColumns      = "(id UInt64, grp UInt16, d Date, val UInt64, name String, payload String)"
	chEngine       = "ENGINE = MergeTree PARTITION BY toYYYYMM(d) ORDER BY (grp, id)"
	chBatchRows    = 20_000
	chBatches      = 5 // the last one comes after the mutations
	chHeldPrefix   = "held/"
	chSessionLimit = 5 * time.Minute
)

// chStep is one statement of a chdb session; a select's rows are kept
// under its name. Optional statements may fail (a cache this build of
// ClickHouse does not have).
type chStep struct {
	Name     string `json:"name"`
	SQL      string `json:"sql"`
	Select   bool   `json:"select,omitempty"`
	Optional bool   `json:"optional,omitempty"`
}

// chSessionPy runs the steps it reads (JSON) from stdin in one chdb
// session and prints {"results": {name: rows}} or, when a statement fails,
// also "failed" and "error".
const chSessionPy = `import json, sys
from chdb import session
spec = json.load(sys.stdin)
s = session.Session(spec["workdir"])
results = {}
try:
    for st in spec["steps"]:
        print("step:", st["name"], flush=True, file=sys.stderr)
        try:
            if st.get("select"):
                r = s.query(st["sql"], "JSONCompact")
                body = r.bytes() if hasattr(r, "bytes") else str(r).encode()
                results[st["name"]] = json.loads(body)["data"] if body.strip() else []
            else:
                s.query(st["sql"], "CSV")
        except Exception as e:
            if st.get("optional"):
                continue
            json.dump({"results": results, "failed": st["name"], "error": str(e)}, sys.stdout)
            sys.exit(1)
finally:
    s.close()
json.dump({"results": results}, sys.stdout)
`

// chSession runs steps in a new chdb process whose session directory is
// workdir, and returns the selects' rows by name. The test fails, naming
// the statement and ClickHouse's error, if one fails.
func chSession(t *testing.T, workdir string, steps []chStep) map[string]any {
	t.Helper()
	script := filepath.Join(t.TempDir(), "session.py")
	testutil.Must(t, os.WriteFile(script, []byte(chSessionPy), 0o600))
	spec, err := json.Marshal(map[string]any{"workdir": workdir, "steps": steps})
	testutil.Must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), chSessionLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, chdbtest.Python(t), script)
	cmd.Stdin = bytes.NewReader(spec)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	runErr := cmd.Run()
	var out struct {
		Results map[string]any `json:"results"`
		Failed  string         `json:"failed"`
		Error   string         `json:"error"`
	}
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	decErr := dec.Decode(&out)
	switch {
	case out.Failed != "":
		t.Fatalf("chdb: %s failed: %s\nstderr:\n%s", out.Failed, out.Error, tailString(stderr.String(), 8<<10))
	case runErr != nil || decErr != nil:
		t.Fatalf("chdb session: %v (output: %v)\nstderr:\n%s", runErr, decErr, tailString(stderr.String(), 8<<10))
	}
	return out.Results
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// chDisk is an S3 disk at endpoint (http://host:port/bucket/prefix/) whose
// metadata ClickHouse keeps in the local directory metadata.
func chDisk(endpoint, accessKey, secretKey, metadata string) string {
	return fmt.Sprintf("disk(type = s3, endpoint = %s, access_key_id = %s, secret_access_key = %s, region = %s, "+
		"metadata_path = %s)", chString(endpoint), chString(accessKey), chString(secretKey), chString(region),
		chString(metadata+"/"))
}

func chString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// chRows are batch b's rows (ids [b*chBatchRows, (b+1)*chBatchRows)).
func chRows(b int) string {
	return fmt.Sprintf(`SELECT number AS id, toUInt16(id %% 97) AS grp, toDate('2024-01-01') + toIntervalDay(id %% 90) AS d,
		(id * 2654435761) %% 1000003 AS val, concat('name-', toString(id %% 1000)) AS name,
		hex(SHA256(toString(id))) AS payload FROM numbers(%d, %d)`, b*chBatchRows, chBatchRows)
}

// chSelects are the answers compared at each stage, under stage.<name>:
// aggregates, point and range reads and a fingerprint of every row, after
// dropping ClickHouse's caches so that they read the disk.
func chSelects(stage string, parts bool) []chStep {
	var steps []chStep
	for _, c := range []string{"MARK CACHE", "UNCOMPRESSED CACHE", "PAGE CACHE", "QUERY CACHE"} {
		steps = append(steps, chStep{Name: "drop " + c, SQL: "SYSTEM DROP " + c, Optional: true})
	}
	for _, q := range []struct{ name, sql string }{
		{"totals", `SELECT count(), sum(id), min(id), max(id), sum(val), uniqExact(grp), uniqExact(name), min(d), max(d) FROM events`},
		{"by_grp", `SELECT grp, count(), sum(id), sum(val), min(name), max(name) FROM events GROUP BY grp ORDER BY grp`},
		{"by_month", `SELECT toYYYYMM(d) AS m, count(), sum(val), uniqExact(grp) FROM events GROUP BY m ORDER BY m`},
		{"points", `SELECT id, grp, d, val, name, payload FROM events WHERE id IN (0, 3, 7, 13, 12345, 23456, 54321, 79999, 85000, 99999) ORDER BY id`},
		{"pk_range", `SELECT grp, id, val, name FROM events WHERE grp = 42 AND id >= 40000 ORDER BY grp, id LIMIT 20`},
		{"top_val", `SELECT id, val FROM events ORDER BY val DESC, id LIMIT 10`},
		{"fingerprint", `SELECT groupBitXor(cityHash64(id, grp, d, val, name, payload)), sum(cityHash64(payload, id)) FROM events`},
	} {
		steps = append(steps, chStep{Name: stage + "." + q.name, SQL: q.sql, Select: true})
	}
	if parts {
		// Deterministic only when no background merge can be under way:
		// after OPTIMIZE FINAL and the mutations.
		steps = append(steps, chStep{Name: stage + ".parts", Select: true, SQL: `SELECT partition, count(), sum(rows)
			FROM system.parts WHERE table = 'events' AND active GROUP BY partition ORDER BY partition`})
	}
	return steps
}

// chWorkload creates the table on disk and runs the INSERTs, merges and
// mutations, selecting after each stage. A scratch table on the same disk
// is filled and dropped (its objects deleted) on the way.
func chWorkload(disk string) []chStep {
	steps := []chStep{
		{Name: "json numbers", SQL: "SET output_format_json_quote_64bit_integers = 0"},
		{Name: "create", SQL: fmt.Sprintf("CREATE TABLE events UUID '%s' %s %s SETTINGS min_bytes_for_wide_part = 0, disk = %s",
			chTableUUID, chColumns, chEngine, disk)},
	}
	for b := 0; b < chBatches-1; b++ {
		steps = append(steps, chStep{Name: fmt.Sprintf("insert %d", b), SQL: "INSERT INTO events " + chRows(b)})
	}
	steps = append(steps, chSelects("inserted", false)...)
	steps = append(steps, chStep{Name: "merge", SQL: "OPTIMIZE TABLE events FINAL"})
	steps = append(steps, chSelects("merged", true)...)
	steps = append(steps,
		chStep{Name: "update", SQL: `ALTER TABLE events UPDATE val = val * 2 + 1, name = concat(name, '-u') WHERE grp < 10
			SETTINGS mutations_sync = 1`})
	steps = append(steps, chSelects("updated", true)...)
	steps = append(steps,
		chStep{Name: "alter delete", SQL: "ALTER TABLE events DELETE WHERE id % 10 = 3 SETTINGS mutations_sync = 1"},
		chStep{Name: "lightweight delete", SQL: "DELETE FROM events WHERE grp = 7 SETTINGS mutations_sync = 1"},
		chStep{Name: "mutations left", Select: true, SQL: "SELECT count() FROM system.mutations WHERE table = 'events' AND NOT is_done"},
	)
	steps = append(steps, chSelects("deleted", true)...)
	steps = append(steps,
		chStep{Name: "scratch", SQL: fmt.Sprintf("CREATE TABLE scratch %s %s SETTINGS disk = %s", chColumns, chEngine, disk)},
		chStep{Name: "scratch insert", SQL: "INSERT INTO scratch " + chRows(7)},
		chStep{Name: "scratch count", Select: true, SQL: "SELECT count(), sum(id) FROM scratch"},
		chStep{Name: "scratch drop", SQL: "DROP TABLE scratch SYNC"},
		chStep{Name: fmt.Sprintf("insert %d", chBatches-1), SQL: "INSERT INTO events " + chRows(chBatches-1)},
		chStep{Name: "merge again", SQL: "OPTIMIZE TABLE events FINAL"},
	)
	steps = append(steps, chSelects("final", true)...)
	return append(steps, chS3Events())
}

// chS3Events are ClickHouse's own counts of its S3 requests (info.*: not
// compared).
func chS3Events() chStep {
	return chStep{Name: "info.s3_events", Select: true,
		SQL: "SELECT event, value FROM system.events WHERE event LIKE 'S3%' OR event LIKE 'DiskS3%' ORDER BY event"}
}

// chAnswers drops the info.* entries.
func chAnswers(results map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range results {
		if !strings.HasPrefix(k, "info.") {
			out[k] = v
		}
	}
	return out
}

// chStage returns the answers of one stage (stage.*).
func chStage(results map[string]any, stage string) map[string]any {
	out := map[string]any{}
	for k, v := range results {
		if strings.HasPrefix(k, stage+".") {
			out[k] = v
		}
	}
	return out
}

// chWantFinalRows is how many rows the workload leaves: every id but those
// with id%10 == 3 (ALTER DELETE) and grp == 7 (DELETE FROM), of the
// batches inserted before those deletes; the last batch keeps all its rows.
func chWantFinalRows() uint64 {
	var n uint64
	for id := 0; id < (chBatches-1)*chBatchRows; id++ {
		if id%10 != 3 && id%97 != 7 {
			n++
		}
	}
	return n + chBatchRows
}

// A MergeTree table on a WriteBack bucket: INSERTs, merges (OPTIMIZE
// FINAL), mutations (ALTER UPDATE, ALTER DELETE, lightweight DELETE) and
// a dropped table, with S3 refusing every upload and DELETE, answer every
// SELECT as the same statements on MinIO directly do, while MinIO has none
// of the table's objects and S3 is never asked for them; once S3 takes writes and the nodes have persisted
// everything, MinIO holds exactly the objects ClickHouse's disk metadata
// names, and a fresh ClickHouse on MinIO directly, attaching the table
// over that metadata, reads the same answers.
func TestClickHouseOnWriteBackBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("needs chdb (hack/chdb-venv.sh); skipped in -short mode")
	}
	chdbtest.Python(t)
	e := newEnv(t, envOptions{tenants: clickhouseHeldTenants, pageCache: 64 << 20})
	t.Cleanup(func() {
		if t.Failed() {
			logGatewayOps(t, e)
			logS3Requests(t, e)
		}
	})
	minio := e.cluster.MinIO
	dir := t.TempDir()
	start := time.Now()

	// The reference: the same statements on MinIO directly.
	ref := chSession(t, filepath.Join(dir, "reference"), chWorkload(
		chDisk(minio.Endpoint+"/clickhouse/reference/disk/", minio.AccessKey, minio.SecretKey, filepath.Join(dir, "reference-disk"))))
	t.Logf("reference on MinIO directly: %v; ClickHouse's S3 requests: %v", time.Since(start).Round(time.Millisecond), ref["info.s3_events"])
	if got, want := chdbtest.Uint(t, ref, "final.totals", 0, 0), chWantFinalRows(); got != want {
		t.Fatalf("the reference has %d rows in the end, want %d", got, want)
	}

	// Through the gateway, with S3 refusing every upload, DELETE and
	// DeleteObjects (POST): what ClickHouse reads back can only come from
	// what the nodes hold, and its deletes of held files (DROP TABLE ...
	// SYNC, old parts) are the nodes' to hold too.
	e.cluster.Proxy.Inject(s3proxy.Rule{Method: "PUT", Fault: s3proxy.InternalError},
		s3proxy.Rule{Method: "DELETE", Fault: s3proxy.InternalError}, s3proxy.Rule{Method: "POST", Fault: s3proxy.InternalError})
	heldMeta := filepath.Join(dir, "held-disk")
	start = time.Now()
	got := chSession(t, filepath.Join(dir, "held"), chWorkload(
		chDisk(e.srv.URL()+"/clickhouse/"+chHeldPrefix+"disk/", accessKey, secretKey, heldMeta)))
	t.Logf("through the gateway on the write-back prefix: %v; ClickHouse's S3 requests: %v", time.Since(start).Round(time.Millisecond), got["info.s3_events"])
	logGatewayOps(t, e)
	logS3Requests(t, e)
	chdbtest.RequireSame(t, "MinIO directly", chAnswers(ref), "write-back before persistence", chAnswers(got))

	// The persisters ask S3 which version it has (HEAD) before each
	// attempt to send one (PUT or DELETE, refused): more HEADs than that, or
	// any GET, would be reads looking up a held object in S3.
	heads, sends := map[string]int{}, map[string]int{}
	for _, r := range e.cluster.Proxy.Requests() {
		if !strings.HasPrefix(r.Path, "/clickhouse/"+chHeldPrefix) {
			continue
		}
		switch r.Method {
		case "HEAD":
			heads[r.Path]++
		case "PUT", "DELETE":
			sends[r.Path]++
		default:
			t.Fatalf("S3 got %s %s: a held object was looked up in S3", r.Method, r.Path)
		}
	}
	for path, n := range heads {
		if n > sends[path]+1 { // +1: an attempt whose send is under way
			t.Fatalf("S3 got %d HEADs of %s for %d attempts to persist it: a held object was looked up in S3", n, path, sends[path])
		}
	}
	if keys := minioKeys(t, e, chHeldPrefix); len(keys) != 0 {
		t.Fatalf("MinIO holds %d objects under %s while it refused writes, e.g. %s", len(keys), chHeldPrefix, keys[0])
	}
	dirty := e.cluster.Sum("distcache_writeback_objects", map[string]string{"tenant": "team-a", "kind": "dirty"})
	named := diskObjects(t, heldMeta)
	t.Logf("held before persistence: %v dirty copies on the nodes; the table's disk metadata names %d objects", dirty, len(named))
	if dirty == 0 || len(named) == 0 {
		t.Fatalf("nothing held (%v dirty copies) or no objects named by the disk metadata (%d)", dirty, len(named))
	}

	// S3 takes writes again: the nodes persist everything, and MinIO ends
	// with exactly the objects the table's metadata names (none of the
	// dropped table's).
	e.cluster.Proxy.ClearFaults()
	start = time.Now()
	waitLong(t, "the nodes to persist every held write", func() bool {
		return e.cluster.Sum("distcache_writeback_objects", map[string]string{"tenant": "team-a", "kind": "dirty"}) == 0
	})
	t.Logf("persisted in %v: %v uploads and %v deletes sent to S3", time.Since(start).Round(time.Millisecond),
		e.cluster.Sum("distcache_writeback_persist_attempts_total", map[string]string{"op": "put", "result": "ok"}),
		e.cluster.Sum("distcache_writeback_persist_attempts_total", map[string]string{"op": "delete", "result": "ok"}))
	inMinIO := minioKeys(t, e, chHeldPrefix)
	if missing, extra := keyDiff(named, inMinIO); len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("after persistence MinIO lacks %d objects the table's metadata names (%s) and holds %d it does not (%s)",
			len(missing), firstKeys(missing), len(extra), firstKeys(extra))
	}

	// A fresh ClickHouse on MinIO directly attaches the table over the
	// same disk metadata and reads the same answers.
	after := chSession(t, filepath.Join(dir, "after"), append([]chStep{
		{Name: "json numbers", SQL: "SET output_format_json_quote_64bit_integers = 0"},
		{Name: "attach", SQL: fmt.Sprintf("ATTACH TABLE events UUID '%s' %s %s SETTINGS min_bytes_for_wide_part = 0, disk = %s",
			chTableUUID, chColumns, chEngine, chDisk(minio.Endpoint+"/clickhouse/"+chHeldPrefix+"disk/", minio.AccessKey, minio.SecretKey, heldMeta))},
	}, chSelects("final", true)...))
	chdbtest.RequireSame(t, "MinIO directly", chStage(ref, "final"), "a fresh ClickHouse on MinIO after persistence", after)
}

// waitLong is testutil.WaitFor with room for the persisters' backoff (up
// to 30 s per key after S3 refused it for a while) on a loaded machine.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// minioKeys lists what MinIO itself holds under clickhouse/prefix.
func minioKeys(t *testing.T, e *env, prefix string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(e.cluster.Direct, &s3.ListObjectsV2Input{Bucket: aws.String("clickhouse"), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		testutil.Must(t, err)
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	sort.Strings(keys)
	return keys
}

// diskObjects are the S3 keys that the metadata files of a ClickHouse S3
// disk name. A metadata file is its format version, then "<count>\t<total
// bytes>", then count lines "<bytes>\t<key>" (the key in the bucket), then
// the reference count and a read-only flag.
func diskObjects(t *testing.T, metadata string) []string {
	t.Helper()
	set := map[string]bool{}
	err := filepath.WalkDir(metadata, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		var count int
		if len(lines) >= 2 {
			count, err = strconv.Atoi(strings.Split(lines[1], "\t")[0])
		}
		if len(lines) < 2 || err != nil || len(lines) < 2+count {
			return fmt.Errorf("%s is not a disk metadata file: %q", path, b)
		}
		for _, l := range lines[2 : 2+count] {
			_, key, ok := strings.Cut(l, "\t")
			if !ok {
				return fmt.Errorf("%s: object line %q", path, l)
			}
			set[key] = true
		}
		return nil
	})
	testutil.Must(t, err)
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// keyDiff returns the keys of want not in got and of got not in want.
func keyDiff(want, got []string) (missing, extra []string) {
	in := func(keys []string) map[string]bool {
		m := map[string]bool{}
		for _, k := range keys {
			m[k] = true
		}
		return m
	}
	w, g := in(want), in(got)
	for _, k := range want {
		if !g[k] {
			missing = append(missing, k)
		}
	}
	for _, k := range got {
		if !w[k] {
			extra = append(extra, k)
		}
	}
	return missing, extra
}

// firstKeys shows up to three keys.
func firstKeys(keys []string) string {
	if len(keys) > 3 {
		return strings.Join(keys[:3], ", ") + ", ..."
	}
	return strings.Join(keys, ", ")
}

// logGatewayOps logs the S3 operations the gateway served, by status.
func logGatewayOps(t *testing.T, e *env) {
	t.Helper()
	families, err := e.registry.Gather()
	testutil.Must(t, err)
	var lines []string
	for _, f := range families {
		if f.GetName() != "distcache_gateway_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			lines = append(lines, fmt.Sprintf("%s %s: %v", label(m, "operation"), label(m, "status"), m.GetCounter().GetValue()))
		}
	}
	sort.Strings(lines)
	t.Logf("S3 requests the gateway served:\n\t%s", strings.Join(lines, "\n\t"))
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// logS3Requests logs what reached the S3 proxy, by method and answer.
func logS3Requests(t *testing.T, e *env) {
	t.Helper()
	n := map[string]int{}
	for _, r := range e.cluster.Proxy.Requests() {
		n[fmt.Sprintf("%s %d (fault %s)", r.Method, r.Status, r.Fault)]++
	}
	var lines []string
	for k, v := range n {
		lines = append(lines, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(lines)
	t.Logf("requests that reached S3 (the proxy):\n\t%s", strings.Join(lines, "\n\t"))
}
