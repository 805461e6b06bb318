package gateway

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"maps"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/httprange"
	"github.com/distcache/distcache/internal/nodeapi"
)

// FuzzParseRange checks parseRange against refRange, a direct reading of
// the rules in parseRange's comment with arbitrary-precision numbers, and
// checks that every range it resolves lies inside the object and is
// described by its Content-Range.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"", "bytes=0-0", "bytes=0-", "bytes=-1", "bytes=-0", "bytes = 5 - 9", "BYTES=1-2",
		"bytes=990-99999999999999999999999", "bytes=99999999999999999999-9999999999999999999", "bytes=5-2",
		"bytes=0-1,5-6", "items=0-1", "bytes=--1", "bytes=-", "byteſ=0-1", "bytes=\u00a00-1", "bytes=0-9223372036854775807"} {
		f.Add(s, int64(1000))
	}
	f.Add("bytes=0-", int64(0))
	f.Add("bytes=9223372036854775806-", int64(9223372036854775807))
	f.Fuzz(func(t *testing.T, header string, size int64) {
		if size < 0 {
			return
		}
		r, partial, err := parseRange(header, size)
		want, wantPartial, wantErr := refRange(header, size)
		if (err != nil) != wantErr || partial != wantPartial || partial && r != want {
			t.Fatalf("parseRange(%q, %d) = %+v, %v, %v; the rules say %+v, %v, unsatisfiable=%v",
				header, size, r, partial, err, want, wantPartial, wantErr)
		}
		if err != nil && (err.Status != http.StatusRequestedRangeNotSatisfiable || err.Code != CodeInvalidRange) {
			t.Fatalf("unsatisfiable range answered %d %s", err.Status, err.Code)
		}
		if !partial {
			return
		}
		if r.Off < 0 || r.Len < 1 || r.Off > size-r.Len {
			t.Fatalf("range %+v outside a %d-byte object", r, size)
		}
		var first, last, total int64
		if n, _ := fmtSscanContentRange(r.ContentRange(size), &first, &last, &total); n != 3 ||
			first != r.Off || last != r.Off+r.Len-1 || total != size {
			t.Fatalf("Content-Range %q does not describe %+v of %d", r.ContentRange(size), r, size)
		}
	})
}

func fmtSscanContentRange(s string, first, last, total *int64) (int, error) {
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, nil
	}
	a, rest, _ := strings.Cut(rest, "-")
	b, c, _ := strings.Cut(rest, "/")
	n := 0
	for _, p := range []struct {
		s   string
		dst *int64
	}{{a, first}, {b, last}, {c, total}} {
		v, err := strconv.ParseInt(p.s, 10, 64)
		if err != nil {
			return n, err
		}
		*p.dst = v
		n++
	}
	return n, nil
}

// refRange resolves a Range header by the rules, without saturating.
func refRange(header string, size int64) (httprange.Range, bool, bool) {
	header = strings.TrimSpace(header)
	unit, spec, found := strings.Cut(header, "=")
	if header == "" || !found || strings.ToLower(strings.TrimSpace(unit)) != "bytes" || strings.Contains(spec, ",") {
		return httprange.Range{}, false, false
	}
	a, b, found := strings.Cut(strings.TrimSpace(spec), "-")
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	num := func(s string) (*big.Int, bool) {
		if s == "" || strings.Trim(s, "0123456789") != "" {
			return nil, false
		}
		n, ok := new(big.Int).SetString(s, 10)
		return n, ok
	}
	sz := big.NewInt(size)
	if !found {
		return httprange.Range{}, false, false
	}
	if a == "" {
		n, ok := num(b)
		if !ok {
			return httprange.Range{}, false, false
		}
		if n.Sign() == 0 || size == 0 {
			return httprange.Range{}, false, true
		}
		if n.Cmp(sz) > 0 {
			n = sz
		}
		return httprange.Range{Off: size - n.Int64(), Len: n.Int64()}, true, false
	}
	first, ok := num(a)
	if !ok {
		return httprange.Range{}, false, false
	}
	last := new(big.Int).Sub(sz, big.NewInt(1))
	if b != "" {
		l, ok := num(b)
		if !ok || l.Cmp(first) < 0 {
			return httprange.Range{}, false, false
		}
		if l.Cmp(last) < 0 {
			last = l
		}
	}
	if first.Cmp(sz) >= 0 {
		return httprange.Range{}, false, true
	}
	return httprange.Range{Off: first.Int64(), Len: last.Int64() - first.Int64() + 1}, true, false
}

// FuzzParseRoute reads arbitrary request lines and headers the way Go's
// server does and routes them. A route the gateway serves names exactly the
// path's bucket and key (nothing dropped, nothing cleaned), with a valid
// bucket and a key S3 accepts; the node API paths built for it route back
// to the same bucket and key on the node; requests served from the cache
// carry no parameter or header that selects something else than the
// current object's bytes; and the query passed through is the client's
// minus the presigned-URL authentication.
func FuzzParseRoute(f *testing.F) {
	for _, s := range []struct {
		method       uint8
		target, h, v string
	}{
		{0, "/bkt/dir/key.bin", "Range", "bytes=0-1"},
		{0, "/bkt/a%2Fb/../c?versionId=3", "", ""},
		{0, "/bkt/k?partNumber=1&x-id=GetObject", "", ""},
		{0, "/bkt/k?uploadId=1&X-Amz-Signature=00&X-Amz-Credential=a%2Fb", "", ""},
		{2, "/bkt/k", "X-Amz-Copy-Source", "other/k"},
		{2, "/bkt/k", "X-Amz-Meta-A", "1"},
		{2, "/bkt/k?tagging", "", ""},
		{2, "/bkt//k/./..", "Content-Type", "text/plain"},
		{4, "/bkt/?delete", "", ""},
		{4, "/bkt/k?uploads", "", ""},
		{3, "/bkt/k?uploadId=abc", "", ""},
		{0, "/bkt?list-type=2&prefix=a%3Bb&continuation-token=x", "", ""},
		{0, "/bkt/k?acl", "", ""},
		{1, "/bkt/%E2%9C%93?response-content-type=a", "X-Amz-Server-Side-Encryption-Customer-Algorithm", "AES256"},
		{0, "/BKT/k", "", ""},
		{0, "/../bkt/k", "", ""},
		{0, "/bkt/" + strings.Repeat("k", 1025), "", ""},
		{0, "//bkt/k", "", ""},
		{0, "/bkt/k%00", "", ""},
		{0, "http://host/bkt/k?a=1;b=2", "", ""},
	} {
		f.Add(s.method, s.target, s.h, s.v)
	}
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodPost, http.MethodOptions, "PATCH"}
	mux, got := nodeMux()
	f.Fuzz(func(t *testing.T, m uint8, target, hname, hvalue string) {
		method := methods[int(m)%len(methods)]
		wire := method + " " + target + " HTTP/1.1\r\nHost: gw.example\r\n"
		if hname != "" {
			wire += hname + ": " + hvalue + "\r\n"
		}
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(wire + "\r\n")))
		if err != nil || strings.ContainsAny(wire[len(method)+1+len(target):], "\n") && hname == "" {
			return
		}
		q := r.URL.Query()
		rt := parseRoute(r.Method, r.URL.Path, q, r.Header)
		if rt.op == "" || (rt.handling == refused) != (rt.err != nil) {
			t.Fatalf("route %+v", rt)
		}
		if rt.handling == refused {
			return
		}
		path := r.URL.Path
		switch {
		case rt.bucket == "":
			t.Fatalf("%s %q served without a bucket: %+v", method, target, rt)
		case rt.key == "" && path != "/"+rt.bucket && path != "/"+rt.bucket+"/":
			t.Fatalf("%q routed to bucket %q", path, rt.bucket)
		case rt.key != "" && path != "/"+rt.bucket+"/"+rt.key:
			t.Fatalf("%q routed to %q / %q", path, rt.bucket, rt.key)
		case !validBucketName(rt.bucket) || strings.Contains(rt.bucket, "/") || len(rt.key) > maxKeyBytes:
			t.Fatalf("served bucket %q key of %d bytes", rt.bucket, len(rt.key))
		}
		if rt.handling == viaCacheRead || rt.handling == viaCacheWrite {
			// Parameters that select other bytes than the current object's
			// (S3's HeadObject takes partNumber and versionId only).
			selectors := []string{"partNumber", "versionId"}
			if method != http.MethodHead {
				selectors = append(selectors, "uploadId", "attributes")
			}
			for _, p := range append(selectors, objectSubresources...) {
				if q.Has(p) {
					t.Fatalf("%s with ?%s served from the cache (%s)", method, p, rt.op)
				}
			}
			if rt.key == "" || rt.handling == viaCacheWrite && r.Header.Get("X-Amz-Copy-Source") != "" ||
				r.Header.Get("X-Amz-Server-Side-Encryption-Customer-Algorithm") != "" {
				t.Fatalf("%s %q with %s served from the cache (%s)", method, target, hname, rt.op)
			}
			if rt.handling == viaCacheRead && method != http.MethodGet && method != http.MethodHead ||
				rt.handling == viaCacheWrite && (method != http.MethodPut || needsPassthroughPut(r.Header)) {
				t.Fatalf("%s %q: %s served from the cache", method, target, rt.op)
			}
			p := nodeapi.ObjectPath(rt.bucket, rt.key)
			if b, k := routeOnNode(mux, got, http.MethodGet, p); b != rt.bucket || k != rt.key {
				t.Fatalf("node path %q routes to %q / %q, want %q / %q", p, b, k, rt.bucket, rt.key)
			}
		}
		if rt.handling == viaPassthrough {
			p := passthroughURLPath(rt.bucket, rt.key)
			if b, k := routeOnNode(mux, got, method, p); b != rt.bucket || k != rt.key {
				t.Fatalf("pass-through path %q routes to %q / %q, want %q / %q", p, b, k, rt.bucket, rt.key)
			}
			fq, _ := url.ParseQuery(passthroughQuery(r.URL.RawQuery))
			for k := range presignParams {
				q.Del(k)
			}
			if !maps.EqualFunc(fq, q, slices.Equal) {
				t.Fatalf("forwarded query %v, want %v", fq, q)
			}
		}
	})
}

// nodeMux has the node API's routes (internal/node/server.go); got holds
// what the last request routed to.
func nodeMux() (*http.ServeMux, *[2]string) {
	got := new([2]string)
	h := func(w http.ResponseWriter, r *http.Request) {
		*got = [2]string{r.PathValue("bucket"), r.PathValue("key")}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/objects/{bucket}/{key...}", h)
	mux.HandleFunc("/v1/s3/{bucket}", h)
	mux.HandleFunc("/v1/s3/{bucket}/{key...}", h)
	return mux, got
}

func routeOnNode(mux *http.ServeMux, got *[2]string, method, path string) (string, string) {
	*got = [2]string{"\x00not routed", ""}
	req := httptest.NewRequest(method, "https://node.example"+path, nil)
	mux.ServeHTTP(httptest.NewRecorder(), req)
	return got[0], got[1]
}

// FuzzDeleteObjectsSplit splits arbitrary DeleteObjects bodies by owner.
// Each part must hold exactly its group's keys, as the node (which
// invalidates them) and S3 read them; together the parts hold every key of
// the body, once, in order within each owner; and a part never uses a
// namespace prefix the body declared outside the Object it came from.
func FuzzDeleteObjectsSplit(f *testing.F) {
	for _, s := range []string{
		`<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet><Object><Key>a</Key></Object><Object><Key>b&amp;c &lt;d&gt;</Key><VersionId>v1</VersionId></Object><Object><Key>e</Key><ETag>"x"</ETag></Object></Delete>`,
		`<Delete><Object><Key><![CDATA[x]]></Key></Object><Object><Key>y<!-- c --></Key></Object></Delete>`,
		`<d:Delete xmlns:d="http://s3.amazonaws.com/doc/2006-03-01/"><d:Object><d:Key>a</d:Key></d:Object><d:Object><d:Key>b</d:Key></d:Object></d:Delete>`,
		`<Delete><Object><Key>a</Key><Key>b</Key></Object><Object><Key>c</Key></Object></Delete>`,
		`<Delete><Object><Key>&#x0;</Key></Object></Delete>`,
		`<Delete><Quiet> true </Quiet><Object><Key>a</Key></Object><Object><Key>b</Key></Object></Delete>`,
		`<Delete><Object><Key>a</Key></Object></Delete><Delete><Object><Key>b</Key></Object></Delete>`,
		`<Delete xmlns:v="urn:x"><Object><Key v:a="1">a</Key></Object><Object><Key>b</Key></Object></Delete>`,
	} {
		f.Add([]byte(s))
	}
	owners := []string{"https://n1", "https://n2", "https://n3"}
	g := &Gateway{up: &Upstream{Owners: func(_, key string) []string {
		var h byte
		for i := 0; i < len(key); i++ {
			h += key[i]
		}
		return []string{owners[int(h)%len(owners)]}
	}}}
	f.Fuzz(func(t *testing.T, body []byte) {
		groups, req := g.groupByOwner("bkt", body)
		if len(groups) == 0 {
			return
		}
		all := nodeKeys(body)
		if undeclaredPrefix(body) != "" {
			return // S3 refuses the body as sent; whatever the split does
		}
		var split []string
		for _, grp := range groups {
			sub := buildDeleteBody(req.Quiet, grp.objects)
			keys := nodeKeys(sub)
			var want []string
			for _, o := range grp.objects {
				want = append(want, o.Key)
				if got := g.up.Owners("bkt", o.Key)[0]; got != grp.owner {
					t.Fatalf("key %q grouped under %s, owned by %s", o.Key, grp.owner, got)
				}
			}
			if !slices.Equal(keys, want) {
				t.Fatalf("part for %s holds %q, want %q\n%s", grp.owner, keys, want, sub)
			}
			if p := undeclaredPrefix(sub); p != "" {
				t.Fatalf("part for %s uses the undeclared prefix %q\nbody: %s\npart: %s", grp.owner, p, body, sub)
			}
			split = append(split, keys...)
		}
		slices.Sort(split)
		slices.Sort(all)
		if !slices.Equal(split, all) {
			t.Fatalf("the parts hold %q, the body %q", split, all)
		}
	})
}

// nodeKeys reads a DeleteObjects body as the node does to invalidate.
func nodeKeys(body []byte) []string {
	var req struct {
		Objects []struct {
			Key string `xml:"Key"`
		} `xml:"Object"`
	}
	if xml.Unmarshal(body, &req) != nil {
		return nil
	}
	var keys []string
	for _, o := range req.Objects {
		keys = append(keys, o.Key)
	}
	return keys
}

// undeclaredPrefix returns the first element prefix used without an
// xmlns declaration in scope (encoding/xml leaves it as the name's Space),
// or "".
func undeclaredPrefix(doc []byte) string {
	d := xml.NewDecoder(bytes.NewReader(doc))
	declared := map[string]int{}
	var stack [][]string
	for {
		tok, err := d.RawToken()
		if err != nil {
			return ""
		}
		switch e := tok.(type) {
		case xml.StartElement:
			var mine []string
			for _, a := range e.Attr {
				if a.Name.Space == "xmlns" {
					declared[a.Name.Local]++
					mine = append(mine, a.Name.Local)
				}
			}
			stack = append(stack, mine)
			if p := e.Name.Space; p != "" && p != "xml" && declared[p] == 0 {
				return p
			}
			for _, a := range e.Attr {
				if p := a.Name.Space; p != "" && p != "xml" && p != "xmlns" && declared[p] == 0 {
					return p
				}
			}
		case xml.EndElement:
			if len(stack) > 0 {
				for _, p := range stack[len(stack)-1] {
					declared[p]--
				}
				stack = stack[:len(stack)-1]
			}
		}
	}
}

// FuzzPreconditions checks the conditional-request rules against their
// definition: an ETag always matches its own quoted, weak and listed forms;
// If-Match wins over If-Unmodified-Since and If-None-Match over
// If-Modified-Since; 304 only ever for a request carrying If-None-Match or
// If-Modified-Since.
