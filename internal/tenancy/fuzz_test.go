package tenancy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
)

// FuzzParse reads arbitrary tenants files. What Parse accepts must be valid
// by the documented rules, use only the documented field names (exactly as
// spelled), and survive a round trip through the YAML the operator writes.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		validYAML,
		"tenants: []",
		`{"tenants": [{"name": "a", "buckets": ["bkt"]}]}`,
		"tenants:\n  - name: a\n    buckets: [bkt]\n    NAME: b\n",
		"tenants:\n  - Name: a\n    Buckets: [bkt]\n",
		"tenants:\n  - name: a\n    buckets: [bkt]\n    credentials: {AccessKeyId: x, secretAccessKey: y}\n",
		"tenants:\n  - name: a\n    buckets: [bkt, bkt]\n",
		"tenants:\n  - name: a\n    buckets: [1.2.3.4, xn--a, a..b, '*']\n",
		"tenants:\n  - name: a\n    buckets: [bkt]\n    quotaBytes: 1e30\n",
		"tenants:\n  - name: a\n    buckets: [bkt]\n    quotaBytes: -1\n",
		"tenants:\n  - name: yes\n    buckets: [on, off, 'no']\n",
		"a: &a [x, x, x]\nb: &b [*a, *a, *a]\ntenants: []\n",
		"tenants: !!binary dGVuYW50cw==\n",
		"---\ntenants: []\n---\ntenants: [{name: a}]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		checkFieldNames(t, data)
		seen := map[string]bool{}
		for i, tn := range c.Tenants {
			if pki.ValidateName(tn.Name) != nil || seen[tn.Name] {
				t.Fatalf("tenants[%d]: accepted name %q", i, tn.Name)
			}
			seen[tn.Name] = true
			if got, ok := c.Tenant(tn.Name); !ok || got != &c.Tenants[i] {
				t.Fatalf("Tenant(%q) does not find tenants[%d]", tn.Name, i)
			}
			if len(tn.Buckets) == 0 || tn.QuotaBytes < 0 {
				t.Fatalf("tenants[%d]: accepted %+v", i, tn)
			}
			for _, b := range tn.Buckets {
				if ValidateBucketName(b) != nil || strings.ContainsAny(b, "*?/") {
					t.Fatalf("tenants[%d]: accepted bucket %q", i, b)
				}
				if !tn.AllowsBucket(b) {
					t.Fatalf("tenants[%d] does not allow its own bucket %q", i, b)
				}
			}
			if cr := tn.Credentials; cr != nil && (cr.AccessKeyID == "" || cr.SecretAccessKey == "") {
				t.Fatalf("tenants[%d]: accepted half credentials", i)
			}
		}
		out, err := yaml.Marshal(c)
		testutil.Must(t, err)
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse refuses the YAML of what it accepted: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back.Tenants, c.Tenants) {
			t.Fatalf("round trip changed the tenants:\n%+v\n%+v", c.Tenants, back.Tenants)
		}
	})
}

// checkFieldNames fails unless every key of the accepted document is one of
// the documented field names, spelled exactly (encoding/json matches keys
// case-insensitively, so "Buckets" or a second "NAME" would otherwise be
// taken silently).
func checkFieldNames(t *testing.T, data []byte) {
	t.Helper()
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("accepted a document that does not convert to JSON: %v", err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatalf("accepted a document that is not a mapping: %s", js)
	}
	fields := func(raw json.RawMessage, allowed ...string) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		for k := range m {
			if !strings.Contains(" "+strings.Join(allowed, " ")+" ", " "+k+" ") {
				t.Fatalf("accepted the undocumented field %q (allowed: %v)\n%s", k, allowed, data)
			}
		}
		return m
	}
	fields(js, "tenants")
	var tenants []json.RawMessage
	_ = json.Unmarshal(doc["tenants"], &tenants)
	for _, raw := range tenants {
		tn := fields(raw, "name", "buckets", "quotaBytes", "credentials")
		if cr, ok := tn["credentials"]; ok {
			fields(cr, "accessKeyID", "secretAccessKey", "sessionToken")
		}
	}
}

// Found by FuzzParse: keys differing from a field name in case only were
// taken for the field, silently replacing a correctly spelled one.
func TestParseRefusesCaseVariantFields(t *testing.T) {
	for _, in := range []string{
		"Tenants: []",
		"tenants:\n  - name: a\n    buckets: [bkt]\n    NAME: b\n",
		"tenants:\n  - name: a\n    Buckets: [bkt]\n",
		"tenants:\n  - name: a\n    buckets: [bkt]\n    credentials: {AccessKeyId: x, secretAccessKey: y}\n",
	} {
		if c, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), "case-sensitive") {
			t.Errorf("Parse(%q) = %+v, %v; want a case-sensitivity error", in, c, err)
		}
	}
}
