package ring

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
)

// exampleJSON is the document docs/ring.md shows.
const exampleJSON = `{
  "epoch": 7,
  "zone": "eu-west-1a",
  "hash": {"algorithm": "rendezvous-xxhash64", "seed": 0},
  "members": [
    {"name": "cache-a-0", "address": "cache-a-0.cache-a.distcache.svc:8443", "ordinal": 0, "weight": 100, "state": "active"},
    {"name": "cache-a-1", "address": "cache-a-1.cache-a.distcache.svc:8443", "ordinal": 1, "weight": 100, "state": "active"},
    {"name": "cache-a-2", "address": "cache-a-2.cache-a.distcache.svc:8443", "ordinal": 2, "weight": 100, "state": "active"},
    {"name": "cache-a-3", "address": "cache-a-3.cache-a.distcache.svc:8443", "ordinal": 3, "weight": 100, "state": "draining"}
  ],
  "previous": {
    "epoch": 6,
    "members": [
      {"name": "cache-a-0", "address": "cache-a-0.cache-a.distcache.svc:8443", "ordinal": 0, "weight": 100, "state": "active"},
      {"name": "cache-a-1", "address": "cache-a-1.cache-a.distcache.svc:8443", "ordinal": 1, "weight": 100, "state": "active"},
      {"name": "cache-a-2", "address": "cache-a-2.cache-a.distcache.svc:8443", "ordinal": 2, "weight": 100, "state": "active"},
      {"name": "cache-a-3", "address": "cache-a-3.cache-a.distcache.svc:8443", "ordinal": 3, "weight": 100, "state": "active"}
    ]
  }
}`

func TestDocsExampleIsValid(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ring.md")
	testutil.Must(t, err)
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/ring.md has no ```json example")
	}
	if strings.TrimSpace(string(m[1])) != exampleJSON {
		t.Errorf("the example in docs/ring.md differs from exampleJSON in spec_test.go:\n%s", m[1])
	}
	r, err := Parse(m[1])
	testutil.Must(t, err)
	if r.Epoch() != 7 || r.Zone() != "eu-west-1a" || len(r.Members()) != 4 {
		t.Errorf("example parsed to %+v", r.Spec())
	}
}

func TestParseErrors(t *testing.T) {
	m := `{"name":"cache-a-0","address":"a0:8443"}`
	m1 := `{"name":"cache-a-1","address":"a1:8443"}`
	hash := `"hash":{"algorithm":"rendezvous-xxhash64"}`
	for _, tc := range []struct {
		name, doc string
		want      []string // substrings of the error
	}{
		{"not JSON", `epoch: 1`, []string{"ring: parse"}},
		{"empty document", ``, []string{"ring: parse", "EOF"}},
		{"trailing data", `{"epoch":1,` + hash + `,"members":[` + m + `]} {}`, []string{"trailing data"}},
		{"unknown top-level field", `{"epoch":1,"replicas":3,` + hash + `,"members":[` + m + `]}`, []string{`unknown field "replicas"`}},
		{"unknown member field", `{"epoch":1,` + hash + `,"members":[{"name":"cache-a-0","address":"a0:8443","zone":"x"}]}`, []string{`unknown field "zone"`}},
		{"unknown hash field", `{"epoch":1,"hash":{"algorithm":"rendezvous-xxhash64","salt":1},"members":[` + m + `]}`, []string{`unknown field "salt"`}},
		{"wrong type", `{"epoch":"1",` + hash + `,"members":[` + m + `]}`, []string{"epoch"}},
		{"negative epoch", `{"epoch":-1,` + hash + `,"members":[` + m + `]}`, []string{"epoch: must be >= 0"}},
		{"no hash", `{"epoch":1,"members":[` + m + `]}`, []string{`hash.algorithm: unknown algorithm ""`}},
		{"unknown algorithm", `{"epoch":1,"hash":{"algorithm":"ketama"},"members":[` + m + `]}`, []string{`hash.algorithm: unknown algorithm "ketama"`}},
		{"no members", `{"epoch":1,` + hash + `}`, []string{`members: at least one member must be "active"`}},
		{"only draining members", `{"epoch":1,` + hash + `,"members":[{"name":"cache-a-0","address":"a0:8443","state":"draining"}]}`, []string{`members: at least one member must be "active"`}},
		{"duplicate name", `{"epoch":1,` + hash + `,"members":[` + m + `,{"name":"cache-a-0","address":"a9:8443"}]}`, []string{`members[1].name: duplicate "cache-a-0" (also members[0])`}},
		{"duplicate address", `{"epoch":1,` + hash + `,"members":[` + m + `,{"name":"cache-a-1","address":"A0:8443"}]}`, []string{`members[1].address: duplicate "A0:8443"`}},
		{"explicit zero weight", `{"epoch":1,` + hash + `,"members":[` + m + `,{"name":"cache-a-1","address":"a1:8443","weight":0}]}`, []string{"members[1].weight: must be > 0, got 0", "draining"}},
		{"negative weight", `{"epoch":1,` + hash + `,"members":[{"name":"cache-a-0","address":"a0:8443","weight":-5}]}`, []string{"members[0].weight: must be > 0, got -5"}},
		{"unknown state", `{"epoch":1,` + hash + `,"members":[` + m + `,{"name":"cache-a-1","address":"a1:8443","state":"down"}]}`, []string{`members[1].state: unknown state "down"`}},
		{"empty name", `{"epoch":1,` + hash + `,"members":[{"address":"a0:8443"}]}`, []string{"members[0].name: must not be empty"}},
		{"name not a pod name", `{"epoch":1,` + hash + `,"members":[{"name":"Cache_A","address":"a0:8443"}]}`, []string{`members[0].name: "Cache_A" is not a DNS-1123 subdomain`}},
		{"address without port", `{"epoch":1,` + hash + `,"members":[{"name":"cache-a-0","address":"a0"}]}`, []string{`members[0].address: "a0" is not host:port`}},
		{"address with bad port", `{"epoch":1,` + hash + `,"members":[{"name":"cache-a-0","address":"a0:https"}]}`, []string{`members[0].address: "a0:https" has no valid port`}},
		{"negative ordinal", `{"epoch":1,` + hash + `,"members":[{"name":"cache-a-0","address":"a0:8443","ordinal":-1}]}`, []string{"members[0].ordinal: must be >= 0"}},
		{"previous epoch not lower", `{"epoch":1,` + hash + `,"members":[` + m + `],"previous":{"epoch":1,"members":[` + m + `]}}`, []string{"previous.epoch: must be >= 0 and lower than epoch 1, got 1"}},
		{"previous duplicate", `{"epoch":2,` + hash + `,"members":[` + m + `],"previous":{"epoch":1,"members":[` + m + `,` + m + `]}}`, []string{`previous.members[1].name: duplicate "cache-a-0"`, `previous.members[1].address: duplicate`}},
		{"previous explicit zero weight", `{"epoch":2,` + hash + `,"members":[` + m + `],"previous":{"epoch":1,"members":[{"name":"cache-a-0","address":"a0:8443","weight":0}]}}`, []string{"previous.members[0].weight: must be > 0, got 0"}},
		{"every problem reported", `{"epoch":-2,"hash":{"algorithm":"x"},"members":[` + m + `,` + m1 + `,{"name":"cache-a-1","address":"a1:8443","weight":-1}]}`,
			[]string{"epoch: must be >= 0", "hash.algorithm", `members[2].name: duplicate "cache-a-1" (also members[1])`, "members[2].address: duplicate", "members[2].weight: must be > 0, got -1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", r.Spec())
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestValidationErrorLists(t *testing.T) {
	_, err := New(Spec{Epoch: -1})
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errs) != 3 {
		t.Fatalf("New(Spec{Epoch: -1}) = %v; want a ValidationError of 3 (epoch, algorithm, members)", err)
	}
}

func TestParseDefaults(t *testing.T) {
	r, err := Parse([]byte(`{"epoch":3,"hash":{"algorithm":"rendezvous-xxhash64","seed":18446744073709551615},
		"members":[{"name":"cache-a-0","address":"a0:8443"},{"name":"cache-a-1","address":"a1:8443","weight":300,"state":"draining"}],
		"previous":{"epoch":2,"members":[{"name":"cache-a-0","address":"a0:8443"}]}}`))
	testutil.Must(t, err)
	want := Spec{
		Epoch: 3,
		Hash:  HashParams{Algorithm: AlgorithmRendezvousXXHash64, Seed: 1<<64 - 1},
		Members: []Member{
			{Name: "cache-a-0", Address: "a0:8443", Weight: DefaultWeight, State: StateActive},
			{Name: "cache-a-1", Address: "a1:8443", Weight: 300, State: StateDraining},
		},
		Previous: &PreviousRing{Epoch: 2, Members: []Member{{Name: "cache-a-0", Address: "a0:8443", Weight: DefaultWeight, State: StateActive}}},
	}
	if got := r.Spec(); !reflect.DeepEqual(got, want) {
		t.Errorf("Spec() = %+v\nwant %+v", got, want)
	}
}

// TestNewDoesNotDefault: a Spec built in code must have its weights and
// states set, or ask for defaults.
func TestNewDoesNotDefault(t *testing.T) {
	spec := specOf(1, []Member{{Name: "cache-a-0", Address: "a0:8443"}})
	_, err := New(spec)
	if err == nil || !strings.Contains(err.Error(), "members[0].weight: must be > 0, got 0") || !strings.Contains(err.Error(), `members[0].state: unknown state ""`) {
		t.Fatalf("New without defaults: %v", err)
	}
	spec.SetDefaults()
	r, err := New(spec)
	testutil.Must(t, err)
	if m := r.Members()[0]; m.Weight != DefaultWeight || m.State != StateActive {
		t.Errorf("after SetDefaults: %+v", m)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	r, err := Parse([]byte(exampleJSON))
	testutil.Must(t, err)
	spec := r.Spec()
	spec.Hash.Seed = 1<<64 - 3 // beyond float64 precision: must survive
	spec.Members[1].Weight = 250
	r = mustNew(t, spec)

	for name, marshal := range map[string]func() ([]byte, error){
		"Ring":  func() ([]byte, error) { return json.Marshal(r) },
		"Spec":  func() ([]byte, error) { return json.Marshal(r.Spec()) },
		"*Spec": func() ([]byte, error) { s := r.Spec(); return json.MarshalIndent(&s, "", "  ") },
	} {
		t.Run(name, func(t *testing.T) {
			data, err := marshal()
			testutil.Must(t, err)
			back, err := Parse(data)
			if err != nil {
				t.Fatalf("Parse(%s): %v", data, err)
			}
			if !reflect.DeepEqual(back.Spec(), r.Spec()) {
				t.Errorf("round trip changed the spec:\n got %+v\nwant %+v", back.Spec(), r.Spec())
			}
			for _, id := range testIDs()[:1000] {
				if back.Owner(id) != r.Owner(id) {
					t.Fatalf("round trip changed the owner of %v", id)
				}
			}
		})
	}
}

// TestSpecIsCopied: neither the spec passed to New nor one returned by Spec
// can change the ring.
func TestSpecIsCopied(t *testing.T) {
	in, err := Parse([]byte(exampleJSON))
	testutil.Must(t, err)
	spec := in.Spec()
	r := mustNew(t, spec)
	before := owners(r)[:1000]

	spec.Members[0].State = StateDraining
	spec.Previous.Members[0].Name = "changed"
	got := r.Spec()
	got.Members[1].Weight = 1
	got.Previous.Members[1].Name = "changed"
	r.Members()[2].Name = "changed"

	if !reflect.DeepEqual(r.Spec(), in.Spec()) {
		t.Errorf("ring spec changed through a copy: %+v", r.Spec())
	}
	if after := owners(r)[:1000]; !reflect.DeepEqual(before, after) {
		t.Error("placements changed through a copy")
	}
}

func TestSpecStates(t *testing.T) {
	s := Spec{Members: []Member{{Name: "a", State: StateActive}, {Name: "b", State: StateDraining}}}
	want := map[string]State{"a": StateActive, "b": StateDraining}
	if got := s.States(); !maps.Equal(got, want) {
		t.Fatalf("States() = %v, want %v", got, want)
	}
	if got := (Spec{}).States(); len(got) != 0 {
		t.Fatalf("States() of an empty ring = %v", got)
	}
}
