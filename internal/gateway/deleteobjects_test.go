package gateway

import (
	"encoding/xml"
	"slices"
	"testing"
)

func TestDeleteObjectsSplitByOwner(t *testing.T) {
	owners := map[string]string{"a": "https://n1", "b&c <d>": "https://n2", "e": "https://n1", "f": "https://n3"}
	g := &Gateway{up: &Upstream{Owners: func(_, key string) []string { return []string{owners[key], "https://other"} }}}
	body := []byte(`<?xml version="1.0" encoding="UTF-8"?>
<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet>
<Object><Key>a</Key></Object><Object><Key>b&amp;c &lt;d&gt;</Key><VersionId>v1</VersionId></Object>
<Object><Key>e</Key><ETag>"x"</ETag></Object><Object><Key>f</Key></Object></Delete>`)
	groups, req := g.groupByOwner("bkt", body)
	if req.Quiet != "true" || len(groups) != 3 {
		t.Fatalf("quiet %q, %d groups", req.Quiet, len(groups))
	}
	want := map[string][]string{"https://n1": {"a", "e"}, "https://n2": {"b&c <d>"}, "https://n3": {"f"}}
	for _, grp := range groups {
		sub := buildDeleteBody(req.Quiet, grp.objects)
		var back struct {
			XMLName xml.Name `xml:"Delete"`
			Quiet   bool     `xml:"Quiet"`
			Objects []struct {
				Key, VersionId, ETag string
			} `xml:"Object"`
		}
		if err := xml.Unmarshal(sub, &back); err != nil {
			t.Fatalf("%s: %v\n%s", grp.owner, err, sub)
		}
		var keys []string
		for _, o := range back.Objects {
			keys = append(keys, o.Key)
			if o.Key == "b&c <d>" && o.VersionId != "v1" || o.Key == "e" && o.ETag != `"x"` {
				t.Errorf("%s: object %+v lost its fields", grp.owner, o)
			}
		}
		if !back.Quiet || !slices.Equal(keys, want[grp.owner]) || back.XMLName.Space != s3Namespace {
			t.Errorf("%s: quiet %v keys %v ns %q, want %v", grp.owner, back.Quiet, keys, back.XMLName.Space, want[grp.owner])
		}
	}
	// Without owner placement, or with a body S3 should judge, no split.
	if groups, _ := (&Gateway{up: &Upstream{}}).groupByOwner("bkt", body); groups != nil {
		t.Error("split without owners")
	}
	if groups, _ := g.groupByOwner("bkt", []byte("<Delete><Object>")); groups != nil {
		t.Error("split a malformed body")
	}
}
