package tenancy

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
)

const validYAML = `
tenants:
  - name: clickhouse-prod
    buckets: [ch-data, ch-backups]
    quotaBytes: 107374182400
    credentials:
      accessKeyID: AKIAEXAMPLE
      secretAccessKey: s3cr3t
      sessionToken: t0ken
  - name: analytics
    buckets:
      - events
      - ch-data
`

func TestParseValid(t *testing.T) {
	c, err := Parse([]byte(validYAML))
	testutil.Must(t, err)
	if len(c.Tenants) != 2 {
		t.Fatalf("%d tenants, want 2", len(c.Tenants))
	}
	ch, ok := c.Tenant("clickhouse-prod")
	if !ok {
		t.Fatal("clickhouse-prod not found")
	}
	if ch.QuotaBytes != 107374182400 {
		t.Errorf("quota %d", ch.QuotaBytes)
	}
	if ch.Credentials == nil || *ch.Credentials != (Credentials{AccessKeyID: "AKIAEXAMPLE", SecretAccessKey: "s3cr3t", SessionToken: "t0ken"}) {
		t.Errorf("credentials %+v", ch.Credentials)
	}
	an, ok := c.Tenant("analytics")
	if !ok || an.Credentials != nil || an.QuotaBytes != 0 {
		t.Errorf("analytics = %+v, %v", an, ok)
	}
	for _, tc := range []struct {
		tenant, bucket string
		want           bool
	}{
		{"clickhouse-prod", "ch-data", true},
		{"clickhouse-prod", "ch-backups", true},
		{"clickhouse-prod", "events", false},
		{"clickhouse-prod", "ch-dat", false},
		{"clickhouse-prod", "", false},
		{"clickhouse-prod", "*", false},
		{"analytics", "events", true},
		{"analytics", "ch-data", true}, // two tenants may share a bucket
		{"analytics", "ch-backups", false},
	} {
		tenant, _ := c.Tenant(tc.tenant)
		if got := tenant.AllowsBucket(tc.bucket); got != tc.want {
			t.Errorf("%s.AllowsBucket(%q) = %v, want %v", tc.tenant, tc.bucket, got, tc.want)
		}
	}
	if _, ok := c.Tenant("nobody"); ok {
		t.Error("unknown tenant found")
	}
	var nobody *Tenant
	if nobody.AllowsBucket("events") {
		t.Error("nil tenant allows a bucket")
	}
}

func TestParseEmptyList(t *testing.T) {
	for _, in := range []string{"tenants: []", `{"tenants": []}`} {
		c, err := Parse([]byte(in))
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if len(c.Tenants) != 0 {
			t.Errorf("Parse(%q): %d tenants", in, len(c.Tenants))
		}
	}
}

// A hand-made Config (no index) answers Tenant too.
func TestHandMadeConfig(t *testing.T) {
	c := &Config{Tenants: []Tenant{{Name: "a", Buckets: []string{"bkt"}}}}
	if a, ok := c.Tenant("a"); !ok || !a.AllowsBucket("bkt") {
		t.Errorf("Tenant(a) = %+v, %v", a, ok)
	}
	var nilConfig *Config
	if _, ok := nilConfig.Tenant("a"); ok {
		t.Error("nil config has a tenant")
	}
}

func TestParseInvalid(t *testing.T) {
	tenant := func(body string) string { return "tenants:\n  - name: ok\n    buckets: [bkt]\n  - " + body }
	pol := func(policies string) string {
		return "tenants:\n  - name: p\n    buckets: [bkt]\n    policies: [" + policies + "]\n"
	}
	tests := []struct {
		name string
		in   string
		want []string // substrings of the error
	}{
		{"empty file", "", []string{"tenants: required"}},
		{"comments only", "# nothing\n", []string{"tenants: required"}},
		{"null tenants", "tenants:\n", []string{"tenants: required"}},
		{"not YAML", "tenants: [", []string{"tenancy:"}},
		{"unknown top-level field", "tenants: []\nextra: 1\n", []string{`unknown field "extra"`}},
		{"unknown tenant field", tenant("name: b\n    buckets: [bkt]\n    quota: 5\n"), []string{`unknown field "quota"`}},
		{"unknown credentials field", tenant("name: b\n    buckets: [bkt]\n    credentials: {accessKeyID: a, secretAccessKey: s, region: x}\n"), []string{`unknown field "region"`}},
		{"duplicate key", tenant("name: b\n    name: c\n    buckets: [bkt]\n"), []string{`key "name" already set`}},
		{"duplicate tenant", tenant("name: ok\n    buckets: [other]\n"), []string{`tenants[1] ("ok"): name: duplicate of tenants[0]`}},
		{"missing name", tenant("buckets: [bkt]\n"), []string{"tenants[1]: name:", "empty"}},
		{"bad name", tenant("name: Bad_Name\n    buckets: [bkt]\n"), []string{`tenants[1] ("Bad_Name"): name:`, "DNS label"}},
		{"long name", tenant("name: " + strings.Repeat("a", 64) + "\n    buckets: [bkt]\n"), []string{"name:", "longer than 63"}},
		{"no buckets key", tenant("name: b\n"), []string{`tenants[1] ("b"): buckets: at least one bucket`}},
		{"empty buckets", tenant("name: b\n    buckets: []\n"), []string{`tenants[1] ("b"): buckets: at least one bucket`}},
		{"wildcard bucket", tenant("name: b\n    buckets: ['*']\n"), []string{`tenants[1] ("b"): buckets[0]:`, "wildcards are not allowed"}},
		{"bad bucket name", tenant("name: b\n    buckets: [good, Bad_Bucket]\n"), []string{`tenants[1] ("b"): buckets[1]:`, `"Bad_Bucket"`}},
		{"duplicate bucket", tenant("name: b\n    buckets: [bkt, bkt]\n"), []string{`buckets[1]: duplicate bucket "bkt"`}},
		{"negative quota", tenant("name: b\n    buckets: [bkt]\n    quotaBytes: -1\n"), []string{`tenants[1] ("b"): quotaBytes: must be >= 0`}},
		{"fractional quota", tenant("name: b\n    buckets: [bkt]\n    quotaBytes: 1.5\n"), []string{"quotaBytes"}},
		{"credentials without secret", tenant("name: b\n    buckets: [bkt]\n    credentials: {accessKeyID: a}\n"), []string{`credentials.secretAccessKey: required`}},
		{"credentials without key id", tenant("name: b\n    buckets: [bkt]\n    credentials: {secretAccessKey: s}\n"), []string{`credentials.accessKeyID: required`}},
		{"every problem reported", tenant("name: B\n    buckets: []\n    quotaBytes: -5\n"), []string{"name:", "buckets:", "quotaBytes:"}},
		{"policy of another bucket", pol("{bucket: other, mode: ReadOnly}"), []string{`policies[0].bucket: "other" is not one of the tenant's buckets`}},
		{"unknown mode", pol("{bucket: bkt, mode: WriteAround}"), []string{`policies[0].mode: "WriteAround" is not one of WriteThrough, WriteBack, Transient, ReadOnly, NoCache`}},
		{"four replicas", pol("{bucket: bkt, mode: WriteBack, replicas: 4}"), []string{"policies[0].replicas: 4 is not between 1 and 3"}},
		{"negative replicas", pol("{bucket: bkt, mode: Transient, replicas: -1}"), []string{"policies[0].replicas: -1 is not between 1 and 3"}},
		{"expiry of a write-back policy", pol("{bucket: bkt, mode: WriteBack, expiry: 1h}"), []string{"policies[0].expiry: only Transient policies expire"}},
		{"expiry not a duration", pol("{bucket: bkt, mode: Transient, expiry: tomorrow}"), []string{`policies[0].expiry: "tomorrow" is not a positive duration`}},
		{"mode in lower case", pol("{bucket: bkt, mode: readonly}"), []string{`policies[0].mode`}},
		{"duplicate policy", pol("{bucket: bkt, prefix: a/, mode: ReadOnly}, {bucket: bkt, prefix: a/, mode: NoCache}"), []string{"policies[1]: duplicate of policies[0]"}},
		{"unknown policy field", pol("{bucket: bkt, mode: ReadOnly, ttl: 1h}"), []string{`unknown field "ttl"`}},
		{"replicas of a read-only policy", pol("{bucket: bkt, mode: ReadOnly, replicas: 2}"), []string{"policies[0].replicas: only WriteBack and Transient policies have replicas"}},
		{"expiry of a read-only policy", pol("{bucket: bkt, mode: NoCache, expiry: 1h}"), []string{"policies[0].expiry: only Transient policies expire"}},
		{"policy field case", pol("{bucket: bkt, Mode: ReadOnly}"), []string{`policies[0]: field "Mode": field names are case-sensitive`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestValidateBucketName(t *testing.T) {
	for b, ok := range map[string]bool{
		"abc": true, "ch-data": true, "my.bucket.v2": true, "1bucket": true,
		strings.Repeat("a", 63): true, "192.168.5.4x": true,
		"ab": false, strings.Repeat("a", 64): false, "Abc": false, "a_b": false,
		"-abc": false, "abc-": false, ".abc": false, "abc.": false, "a..b": false,
		"a.-b": false, "a-.b": false, "192.168.5.4": false, "10.0.0.01": false,
		"xn--abc": false, "sthree-abc": false, "*": false, "ch-*": false, "a b": false,
	} {
		if err := ValidateBucketName(b); (err == nil) != ok {
			t.Errorf("ValidateBucketName(%q) = %v, want ok=%v", b, err, ok)
		}
	}
}

func TestCredentialsRedacted(t *testing.T) {
	c := &Credentials{AccessKeyID: "AKIAEXAMPLE", SecretAccessKey: "s3cr3t", SessionToken: "t0ken"}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "creds", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", *c), fmt.Sprintf("%#v", *c), logged.String()} {
		if strings.Contains(s, "s3cr3t") || strings.Contains(s, "t0ken") {
			t.Errorf("secret leaked: %s", s)
		}
		if !strings.Contains(s, "AKIAEXAMPLE") {
			t.Errorf("access key ID missing: %s", s)
		}
	}
}

// The policy of a key is the one of the longest prefix that matches it, in
// its bucket only; keys without one are WriteThrough.
func TestPolicyFor(t *testing.T) {
	c, err := Parse([]byte(`tenants:
  - name: ch
    buckets: [data, logs]
    policies:
      - {bucket: data, mode: NoCache}
      - {bucket: data, prefix: tmp/, mode: ReadOnly}
      - {bucket: data, prefix: tmp/keep/, mode: WriteThrough}
      - {bucket: logs, prefix: archive/, mode: ReadOnly}
`))
	testutil.Must(t, err)
	tn, _ := c.Tenant("ch")
	for _, tc := range []struct {
		bucket, key string
		want        Mode
	}{
		{"data", "table/part", NoCache},
		{"data", "tmp/spill", ReadOnly},
		{"data", "tmp/keep/x", WriteThrough},
		{"data", "tmp", NoCache}, // a prefix is not a directory
		{"logs", "archive/2026", ReadOnly},
		{"logs", "current", WriteThrough},
		{"other", "tmp/spill", WriteThrough},
	} {
		if got := tn.PolicyFor(tc.bucket, tc.key); got.Mode != tc.want {
			t.Errorf("PolicyFor(%s, %s) = %s, want %s", tc.bucket, tc.key, got.Mode, tc.want)
		}
	}
	if got := tn.PolicyFor("logs", "archive/x").String(); got != `ReadOnly (bucket logs, prefix "archive/")` {
		t.Errorf("String() = %s", got)
	}
}

// A WriteBack key that an S3-compatible store would refuse to name is
// written through; Transient keys never go to S3 and stay held.
func TestPolicyForKeysSomeStoresRefuse(t *testing.T) {
	c, err := Parse([]byte(`tenants:
  - name: ch
    buckets: [data]
    policies:
      - {bucket: data, prefix: wb/, mode: WriteBack}
      - {bucket: data, prefix: tmp/, mode: Transient}
`))
	testutil.Must(t, err)
	tn, _ := c.Tenant("ch")
	for key, want := range map[string]Mode{
		"wb/table/part.bin": WriteBack, "wb/dir/": WriteBack, "wb/sp ace/ü/x": WriteBack, "wb/.hidden": WriteBack, "wb/a..b": WriteBack,
		"wb/a//b": WriteThrough, "wb//x": WriteThrough, "wb/./x": WriteThrough, "wb/x/..": WriteThrough, "wb/ . /x": WriteThrough,
		"wb/nul\x00": WriteThrough, "wb/bad\xff": WriteThrough, "tmp/a//b": Transient,
	} {
		if got := tn.PolicyFor("data", key).Mode; got != want {
			t.Errorf("PolicyFor(data, %q) = %s, want %s", key, got, want)
		}
	}
}
