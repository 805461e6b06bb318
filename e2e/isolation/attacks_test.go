package isolation_test

import (
	"context"
	"crypto/md5"
	"crypto/tls"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
)

// attack is one attempt by team-a to get team-b's data.
type attack struct {
	door string
	name string
	// want lists the acceptable answers: HTTP statuses, or refused for no
	// HTTP answer at all (the TLS handshake or the HTTP parser refused).
	want []int
	do   func() answer
}

// refused stands for "no HTTP answer" in attack.want.
const refused = 0

// result is one attack's outcome, for the summary table.
type result struct {
	door, name, want, got string
	leaked, leakedMeta    int
	bodyBytes             int
}

func h(kv ...string) http.Header {
	hd := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		hd.Add(kv[i], kv[i+1])
	}
	return hd
}

func wantString(w []int) string {
	var s []string
	for _, c := range w {
		if c == refused {
			s = append(s, "refused at TLS/HTTP")
		} else {
			s = append(s, fmt.Sprint(c))
		}
	}
	return strings.Join(s, " or ")
}

// TestIsolationAttacks runs every attack of team-a against team-b's cached
// data. Each subtest is one attack; the last checks look at the cache and
// S3 as a whole.
func TestIsolationAttacks(t *testing.T) {
	e := newEnv(t)
	c := e.c
	certA := c.TenantTLS(tenantA)
	s3Before := c.Proxy.Count("", "/bucket-b") + c.Proxy.Count("", "/bucket-ab")

	// A multipart upload of team-a's own, to copy parts into.
	up := e.nodeDo(0, certA, "POST", "/v1/s3/bucket-a/mp?uploads", nil, []byte{})
	var initiated struct {
		UploadID string `xml:"UploadId"`
	}
	if up.status != http.StatusOK || xml.Unmarshal(up.body, &initiated) != nil || initiated.UploadID == "" {
		t.Fatalf("CreateMultipartUpload in team-a's bucket: %v %s", up, up.body)
	}

	var attacks []attack
	attacks = append(attacks, nodeAttacks(e, certA, initiated.UploadID)...)
	attacks = append(attacks, headerAttacks(e, certA)...)
	attacks = append(attacks, peerAttacks(e, certA)...)
	attacks = append(attacks, certificateAttacks(e)...)
	attacks = append(attacks, gatewayAttacks(e)...)
	attacks = append(attacks, confusionAttacks(e, certA)...)

	var results []result
	for _, a := range attacks {
		t.Run(a.door+"/"+a.name, func(t *testing.T) {
			got := a.do()
			r := result{door: a.door, name: a.name, want: wantString(a.want), got: got.String(), bodyBytes: len(got.body)}
			r.leaked = leaked(got.body, e.markerB) + leaked([]byte(fmt.Sprint(got.header)), e.markerB)
			r.leakedMeta = e.metadataLeaks(got)
			results = append(results, r)
			status := got.status
			if got.err != nil {
				status = refused
			}
			if !slices.Contains(a.want, status) {
				t.Errorf("answer %v (body %q), want %s", got, trunc(got.body), r.want)
			}
			if r.leaked > 0 {
				t.Errorf("LEAK: %d bytes of team-b's data in the answer %v", r.leaked, got)
			}
			if r.leakedMeta > 0 {
				t.Errorf("LEAK: team-b's ETag in the answer %v: %v", got, got.header)
			}
		})
	}

	t.Run("afterwards/nothing of team-b's is cached under team-a", func(t *testing.T) {
		names := [][2]string{{"bucket-a", "../bucket-b/secret.bin"}, {"bucket-a", "secret.bin"}, {"bucket-a", "stolen"},
			{"bucket-a", "b/secret.bin"}, {"shared", "b/" + cafeNFC}}
		for _, s := range secretKeys {
			names = append(names, [2]string{s.bucket, s.key})
		}
		if n := e.heldAs(tenantA, names); n != 0 {
			t.Errorf("%d chunks of team-b's objects are cached under team-a's name", n)
		}
	})
	t.Run("afterwards/team-b's data is intact in S3 and still cached", func(t *testing.T) {
		for _, s := range secretKeys {
			if got := c.GetDirect(s.bucket, s.key, ""); string(got) != string(repeatTo(e.markerB, e.secretSize)) {
				t.Errorf("%s/%s changed in S3 (%d bytes)", s.bucket, s.key, len(got))
			}
			if !e.cached(tenantB, s.bucket, s.key) {
				t.Errorf("%s/%s is no longer cached for team-b: an attack evicted it", s.bucket, s.key)
			}
		}
	})
	t.Run("afterwards/no byte of team-b's in team-a's bucket", func(t *testing.T) {
		ctx := context.Background()
		list, err := c.Direct.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bucket-a")})
		testutil.Must(t, err)
		for _, o := range list.Contents {
			if n := leaked(c.GetDirect("bucket-a", aws.ToString(o.Key), ""), e.markerB); n > 0 {
				t.Errorf("bucket-a/%s holds %d bytes of team-b's data", aws.ToString(o.Key), n)
			}
		}
	})
	t.Run("afterwards/no request of team-a's reached team-b's buckets in S3", func(t *testing.T) {
		if n := c.Proxy.Count("", "/bucket-b") + c.Proxy.Count("", "/bucket-ab") - s3Before; n != 0 {
			t.Errorf("%d S3 requests to bucket-b or bucket-ab during the attacks", n)
		}
	})

	var scanned, leakedTotal int
	var table strings.Builder
	table.WriteString("| door | attack | expected | observed | bytes of team-b leaked |\n|---|---|---|---|---|\n")
	for _, r := range results {
		scanned += r.bodyBytes
		leakedTotal += r.leaked
		fmt.Fprintf(&table, "| %s | %s | %s | %s | %d |\n", r.door, strings.ReplaceAll(r.name, "|", `\|`), r.want, r.got, r.leaked)
	}
	t.Logf("%d attacks, %d response body bytes scanned, %d bytes of team-b's data leaked\n%s", len(results), scanned, leakedTotal, table.String())
}

// metadataLeaks counts team-b's ETags found in an answer's headers or body.
func (e *env) metadataLeaks(a answer) int {
	text := fmt.Sprint(a.header) + string(a.body)
	n := 0
	for name, etag := range e.etags {
		if strings.HasPrefix(name, "bucket-a/") {
			continue
		}
		if bare := strings.Trim(etag, `"`); bare != "" && strings.Contains(text, bare) {
			n++
		}
	}
	return n
}

// onAll sends one raw node request to every node; the answer reported is
// the first that is not as wanted (or node 0's).
func onAll(e *env, cfg *tls.Config, want []int, method, target string, header http.Header, body []byte) func() answer {
	return func() answer {
		var first answer
		for i := range e.c.Members() {
			a := e.nodeDo(i, cfg, method, target, header, body)
			st := a.status
			if a.err != nil {
				st = refused
			}
			if i == 0 {
				first = a
			}
			if !slices.Contains(want, st) || leaked(a.body, e.markerB) > 0 || e.metadataLeaks(a) > 0 {
				a.via = strings.TrimPrefix(fmt.Sprintf("node %d %s", i, a.via), " ")
				return a
			}
		}
		return first
	}
}

// nodeAttacks: team-a's certificate, the node API, names and paths.
func nodeAttacks(e *env, certA *tls.Config, uploadID string) []attack {
	const door = "node API"
	etag := e.etags["bucket-b/secret.bin"]
	size := fmt.Sprint(e.secretSize)
	forbidden, s3refuses := []int{403}, []int{400, 404}
	var out []attack
	add := func(name string, want []int, method, target string, header http.Header, body []byte) {
		out = append(out, attack{door: door, name: name, want: want, do: onAll(e, certA, want, method, target, header, body)})
	}
	add("read B's object by name", forbidden, "GET", "/v1/objects/bucket-b/secret.bin", nil, nil)
	add("read one chunk of B's object", forbidden, "GET", "/v1/objects/bucket-b/secret.bin?chunk=1", nil, nil)
	add("read B's chunk pinned to its ETag with the peer size hint", forbidden, "GET",
		"/v1/objects/bucket-b/secret.bin?chunk=0&etag="+urlQ(etag)+"&size="+size, nil, nil)
	add("range of B's object", forbidden, "GET", "/v1/objects/bucket-b/secret.bin", h("Range", "bytes=0-99"), nil)
	add("HEAD B's object", forbidden, "HEAD", "/v1/objects/bucket-b/secret.bin", nil, nil)
	add("B's metadata as JSON", forbidden, "GET", "/v1/meta/bucket-b/secret.bin", nil, nil)
	add("list B's bucket (pass-through)", forbidden, "GET", "/v1/s3/bucket-b?list-type=2", nil, nil)
	add("GET B's object via pass-through", forbidden, "GET", "/v1/s3/bucket-b/secret.bin", nil, nil)
	add("GetObjectAttributes of B's object", forbidden, "GET", "/v1/s3/bucket-b/secret.bin?attributes",
		h("X-Amz-Object-Attributes", "ETag,ObjectSize"), nil)
	add("overwrite B's object", forbidden, "PUT", "/v1/objects/bucket-b/secret.bin", nil, []byte("overwritten by team-a"))
	add("delete B's object", forbidden, "DELETE", "/v1/objects/bucket-b/secret.bin", nil, nil)
	add("DeleteObjects in B's bucket", forbidden, "POST", "/v1/s3/bucket-b?delete", nil,
		[]byte("<Delete><Object><Key>secret.bin</Key></Object></Delete>"))

	// CopyObject and UploadPartCopy from team-b's objects into team-a's bucket.
	for _, src := range []struct {
		name string
		want []int
		src  []string
	}{
		{"copy B's object into A's bucket", forbidden, []string{"bucket-b/secret.bin"}},
		{"copy source with a leading slash", forbidden, []string{"/bucket-b/secret.bin"}},
		{"copy source with %2F for the slash", forbidden, []string{"bucket-b%2Fsecret.bin"}},
		{"copy source bucket-a/../bucket-b/...", s3refuses, []string{"bucket-a/../bucket-b/secret.bin"}},
		{"copy source bucket-a%2F..%2Fbucket-b%2F...", s3refuses, []string{"bucket-a%2F..%2Fbucket-b%2Fsecret.bin"}},
		{"copy source with upper-case bucket", forbidden, []string{"BUCKET-B/secret.bin"}},
		{"copy source with a versionId", forbidden, []string{"bucket-b/secret.bin?versionId=null"}},
		{"copy source as an ARN", forbidden, []string{"arn:aws:s3:::bucket-b/secret.bin"}},
		{"copy source //bucket-b/...", []int{400}, []string{"//bucket-b/secret.bin"}},
		{"two copy sources, A's first", []int{400}, []string{"bucket-a/own.bin", "bucket-b/secret.bin"}},
		{"two copy sources, B's first", []int{400, 403}, []string{"bucket-b/secret.bin", "bucket-a/own.bin"}},
	} {
		hd := http.Header{"X-Amz-Copy-Source": src.src}
		add("CopyObject: "+src.name, src.want, "PUT", "/v1/s3/bucket-a/stolen", hd, []byte{})
		add("UploadPartCopy: "+src.name, src.want, "PUT", "/v1/s3/bucket-a/mp?partNumber=1&uploadId="+urlQ(uploadID), hd, []byte{})
	}

	// Paths: traversal, encodings, Unicode, bucket-name tricks.
	for _, p := range []struct {
		name, target string
		want         []int
	}{
		{"bucket-a/../bucket-b/ (the router cleans and redirects)", "/v1/objects/bucket-a/../bucket-b/secret.bin", forbidden},
		{"./bucket-b/", "/v1/objects/./bucket-b/secret.bin", forbidden},
		{"//bucket-b/", "/v1/objects//bucket-b/secret.bin", forbidden},
		{"bucket-a/%2E%2E/bucket-b/", "/v1/objects/bucket-a/%2E%2E/bucket-b/secret.bin", s3refuses},
		{"bucket-a/..%2Fbucket-b%2F", "/v1/objects/bucket-a/..%2Fbucket-b%2Fsecret.bin", s3refuses},
		{"bucket-a%2F..%2Fbucket-b/", "/v1/objects/bucket-a%2F..%2Fbucket-b/secret.bin", forbidden},
		{"%252F double-encoded slash", "/v1/objects/bucket-a/..%252Fbucket-b%252Fsecret.bin", s3refuses},
		{"bucket-a%252F..%252Fbucket-b", "/v1/objects/bucket-a%252F..%252Fbucket-b/secret.bin", forbidden},
		{"backslashes", `/v1/objects/bucket-a/..\bucket-b\secret.bin`, s3refuses},
		{"%5C backslashes", "/v1/objects/bucket-a/..%5Cbucket-b%5Csecret.bin", s3refuses},
		{"%00 after B's bucket", "/v1/objects/bucket-b%00/secret.bin", forbidden},
		{"%00 then ../.. (the router cleans and redirects)", "/v1/objects/bucket-a/secret.bin%00/../../bucket-b/secret.bin", forbidden},
		{"%00 in the key", "/v1/objects/bucket-a/secret.bin%00", s3refuses},
		{"raw NUL in the request line", "/v1/objects/bucket-b\x00/secret.bin", []int{400}},
		{"overlong UTF-8 ../ (%C0%AE%C0%AE%C0%AF)", "/v1/objects/bucket-a/%C0%AE%C0%AE%C0%AFbucket-b%C0%AFsecret.bin", []int{400}},
		{"overlong UTF-8 slash in the bucket", "/v1/objects/bucket-a%C0%AF..%C0%AFbucket-b/secret.bin", forbidden},
		{"fullwidth solidus U+FF0F", "/v1/objects/bucket-a/..%EF%BC%8Fbucket-b%EF%BC%8Fsecret.bin", s3refuses},
		{"fullwidth solidus in the bucket", "/v1/objects/bucket-a%EF%BC%8F..%EF%BC%8Fbucket-b/secret.bin", forbidden},
		{"one-dot leaders U+2024 for ..", "/v1/objects/bucket-a/%E2%80%A4%E2%80%A4/bucket-b/secret.bin", s3refuses},
		{"fullwidth full stops U+FF0E for ..", "/v1/objects/bucket-a/%EF%BC%8E%EF%BC%8E/bucket-b/secret.bin", s3refuses},
		{"B's NFD key by its NFC twin", "/v1/objects/bucket-b/" + pathEscape(cafeNFC), forbidden},
		{"A's NFC key by its NFD twin (no normalisation)", "/v1/objects/bucket-a/" + pathEscape(cafeNFD), []int{404}},
		{"upper-case bucket BUCKET-B", "/v1/objects/BUCKET-B/secret.bin", forbidden},
		{"mixed-case bucket Bucket-b", "/v1/objects/Bucket-b/secret.bin", forbidden},
		{"bucket-ab (A's bucket name is its prefix)", "/v1/objects/bucket-ab/secret.bin", forbidden},
		{"bucket- (prefix of B's)", "/v1/objects/bucket-/secret.bin", forbidden},
		{"bucket-bb (B's plus a suffix)", "/v1/objects/bucket-bb/secret.bin", forbidden},
		{"xbucket-b", "/v1/objects/xbucket-b/secret.bin", forbidden},
		{"bucket-b. (trailing dot)", "/v1/objects/bucket-b./secret.bin", forbidden},
		{"bucket-b%20 (trailing space)", "/v1/objects/bucket-b%20/secret.bin", forbidden},
		{"bucket-a,bucket-b", "/v1/objects/bucket-a%2Cbucket-b/secret.bin", forbidden},
		{"bucket in the query", "/v1/objects/bucket-a/secret.bin?bucket=bucket-b", []int{404}},
	} {
		add("path "+p.name, p.want, "GET", p.target, nil, nil)
	}
	add("virtual-host Host: bucket-b.localhost", []int{404}, "GET", "/v1/objects/bucket-a/secret.bin",
		h("X-Forwarded-Host", "bucket-b.localhost"), nil)
	out = append(out, attack{door: door, name: "Host: bucket-b.s3.amazonaws.com", want: []int{404}, do: func() answer {
		m := e.c.Member(0)
		return rawRoundTrip(m.Addr, certA, rawRequest("GET", "/v1/objects/bucket-a/secret.bin", "bucket-b.s3.amazonaws.com", nil, nil))
	}})
	return out
}

func urlQ(s string) string { return strings.NewReplacer(`"`, "%22", "&", "%26", "+", "%2B").Replace(s) }

// headerAttacks: headers claiming another tenant, with team-a's certificate.
func headerAttacks(e *env, certA *tls.Config) []attack {
	const door = "node API headers"
	forbidden := []int{403}
	var out []attack
	for _, x := range []struct {
		name, target string
		header       http.Header
	}{
		{"X-Distcache-Tenant: team-b", "/v1/objects/bucket-b/secret.bin", h("X-Distcache-Tenant", "team-b")},
		{"X-Distcache-Tenant: team-b on the shared bucket", "/v1/objects/shared/b/secret.bin", h("X-Distcache-Tenant", "team-b")},
		{"x-distcache-tenant: TEAM-B", "/v1/objects/bucket-b/secret.bin", h("x-distcache-tenant", "TEAM-B")},
		{"X-Distcache-Tenant: team-a, team-b", "/v1/objects/bucket-b/secret.bin", h("X-Distcache-Tenant", "team-a, team-b")},
		{"X-Distcache-Tenant twice (team-a then team-b)", "/v1/objects/bucket-b/secret.bin",
			h("X-Distcache-Tenant", "team-a", "X-Distcache-Tenant", "team-b")},
		{"X-Distcache-Tenant twice (team-b then team-a)", "/v1/objects/shared/b/secret.bin",
			h("X-Distcache-Tenant", "team-b", "X-Distcache-Tenant", "team-a")},
		{"X-Distcache-Tenant: team-b on pass-through list", "/v1/s3/bucket-b?list-type=2", h("X-Distcache-Tenant", "team-b")},
		{"X-Forwarded-For / -Host / -User", "/v1/objects/bucket-b/secret.bin",
			h("X-Forwarded-For", "10.0.0.2", "X-Forwarded-Host", "bucket-b.localhost", "X-Forwarded-User", "team-b")},
		{"Forwarded: for=...;host=bucket-b", "/v1/objects/bucket-b/secret.bin", h("Forwarded", "for=10.0.0.2;host=bucket-b.localhost")},
		{"X-Forwarded-Client-Cert naming team-b (Envoy)", "/v1/objects/bucket-b/secret.bin",
			h("X-Forwarded-Client-Cert", "By=spiffe://distcache/peer/cache-0;URI=spiffe://distcache/tenant/team-b")},
		{"X-Ssl-Client-Cert / X-Client-Cert / X-Remote-User", "/v1/objects/bucket-b/secret.bin",
			h("X-Ssl-Client-Cert", "team-b", "X-Client-Cert", "spiffe://distcache/tenant/team-b", "X-Remote-User", "team-b")},
		{"X-Distcache-Identity / X-Distcache-Peer", "/v1/objects/bucket-b/secret.bin",
			h("X-Distcache-Identity", "spiffe://distcache/peer/cache-0", "X-Distcache-Peer", "cache-0")},
		{"Authorization: Bearer team-b", "/v1/objects/bucket-b/secret.bin", h("Authorization", "Bearer team-b")},
	} {
		out = append(out, attack{door: door, name: x.name, want: forbidden, do: onAll(e, certA, forbidden, "GET", x.target, x.header, nil)})
	}
	return out
}

// peerAttacks: team-a's certificate against what only peers may do.
func peerAttacks(e *env, certA *tls.Config) []attack {
	const door = "peer endpoints"
	etag := e.etags["shared/b/secret.bin"]
	size := fmt.Sprint(e.secretSize)
	forbidden := []int{403}
	planted := []byte(strings.Repeat("planted by team-a ", 100))
	var out []attack
	add := func(name, method, target string, header http.Header, body []byte) {
		out = append(out, attack{door: door, name: name, want: forbidden, do: onAll(e, certA, forbidden, method, target, header, body)})
	}
	add("plant a chunk into B's object", "POST", "/v1/objects/bucket-b/secret.bin?chunk=0&etag="+urlQ(e.etags["bucket-b/secret.bin"]), nil, planted)
	add("plant a chunk into A's own object (bytes S3 never had)", "POST", "/v1/objects/bucket-a/own.bin?chunk=0&etag="+urlQ(e.etags["bucket-a/own.bin"]), nil, planted)
	add("plant a chunk as team-b in the shared bucket", "POST", "/v1/objects/shared/b/secret.bin?chunk=0&etag="+urlQ(etag),
		h("X-Distcache-Tenant", "team-b", "X-Distcache-Hop", "1"), planted)
	add("invalidate B's object", "POST", "/v1/objects/bucket-b/secret.bin?invalidate=1", h("X-Distcache-Hop", "1"), []byte{})
	add("invalidate B's shared object as team-b", "POST", "/v1/objects/shared/b/secret.bin?invalidate=1",
		h("X-Distcache-Tenant", "team-b", "X-Distcache-Hop", "1"), []byte{})
	add("invalidate A's own object", "POST", "/v1/objects/bucket-a/own.bin?invalidate=1", nil, []byte{})
	add("forwarded-read hop as team-b", "GET", "/v1/objects/shared/b/secret.bin?chunk=0&etag="+urlQ(etag)+"&size="+size,
		h("X-Distcache-Tenant", "team-b", "X-Distcache-Hop", "1"), nil)
	add("handoff probe (Local-Only) for B's cached chunk", "GET", "/v1/objects/shared/b/secret.bin?chunk=0&etag="+urlQ(etag)+"&size="+size,
		h("X-Distcache-Hop", "1", "X-Distcache-Local-Only", "1"), nil)
	add("X-Distcache-Hop on A's own object (peer-only header)", "GET", "/v1/objects/bucket-a/own.bin?chunk=0", h("X-Distcache-Hop", "1"), nil)
	add("X-Distcache-Local-Only on A's own object (peer-only header)", "GET", "/v1/objects/bucket-a/own.bin?chunk=0", h("X-Distcache-Local-Only", "1"), nil)
	add("metadata revalidation hop as team-b", "HEAD", "/v1/objects/shared/b/secret.bin",
		h("X-Distcache-Tenant", "team-b", "X-Distcache-Hop", "1", "X-Distcache-Revalidate", "1"), nil)
	return out
}

// confusionAttacks: both tenants may use the bucket "shared"; team-b cached
// shared/b/*, which team-a's S3 credentials may not read. team-a asking for
// the same bucket and key must go to S3 with its own credentials (and be
// refused), never get team-b's cache entry.
func confusionAttacks(e *env, certA *tls.Config) []attack {
	const door = "cache key"
	etag := e.etags["shared/b/secret.bin"]
	forbidden := []int{403}
	var out []attack
	heads := func() int { return e.c.Proxy.Count("HEAD", "/shared/b/secret.bin") }
	// The node answers 403 and S3 must have been asked with team-a's
	// credentials (a HEAD reached S3): the refusal came from S3, not from a
	// cache entry of team-b's answering first.
	viaS3 := func(do func() answer) func() answer {
		return func() answer {
			before := heads()
			a := do()
			if heads() == before {
				a.err = fmt.Errorf("no HEAD of shared/b/secret.bin reached S3: team-a was answered from the cache (%v)", a)
			}
			return a
		}
	}
	for i := range e.c.Members() {
		out = append(out, attack{door: door, name: fmt.Sprintf("same bucket and key as B's cached object, node %d", i), want: forbidden,
			do: viaS3(func() answer { return e.nodeDo(i, certA, "GET", "/v1/objects/shared/b/secret.bin", nil, nil) })})
	}
	out = append(out,
		attack{door: door, name: "B's cached chunk by bucket, key, ETag and index", want: forbidden,
			do: viaS3(func() answer {
				return e.nodeDo(0, certA, "GET", "/v1/objects/shared/b/secret.bin?chunk=2&etag="+urlQ(etag), nil, nil)
			})},
		attack{door: door, name: "NFC twin of B's NFD key", want: forbidden,
			do: onAll(e, certA, forbidden, "GET", "/v1/objects/shared/b/"+pathEscape(cafeNFC), nil, nil)},
		attack{door: door, name: "B's NFD key itself", want: forbidden,
			do: onAll(e, certA, forbidden, "GET", "/v1/objects/shared/b/"+pathEscape(cafeNFD), nil, nil)},
		attack{door: door, name: "through A's gateway", want: forbidden,
			do: func() answer { return e.s3Do(e.gwA, gatewayCredsA, s3Req{method: "GET", path: "/shared/b/secret.bin"}) }},
		attack{door: door, name: "through A's peer-certificate gateway", want: forbidden,
			do: func() answer {
				return e.s3Do(e.gwAPeer, gatewayCredsB, s3Req{method: "GET", path: "/shared/b/secret.bin"})
			}},
	)
	return out
}

// gatewayAttacks: team-a's S3 requests to its own gateways.
func gatewayAttacks(e *env) []attack {
	forbidden := []int{403}
	var out []attack
	type gwCase struct {
		name string
		want []int
		req  s3Req
	}
	delBody := []byte(`<Delete><Object><Key>secret.bin</Key></Object></Delete>`)
	sum := md5.Sum(delBody)
	cases := []gwCase{
		{"GetObject B's object", forbidden, s3Req{method: "GET", path: "/bucket-b/secret.bin"}},
		{"GetObject range of B's object", forbidden, s3Req{method: "GET", path: "/bucket-b/secret.bin", header: h("Range", "bytes=0-99")}},
		{"HeadObject B's object", forbidden, s3Req{method: "HEAD", path: "/bucket-b/secret.bin"}},
		{"ListObjectsV2 B's bucket", forbidden, s3Req{method: "GET", path: "/bucket-b", query: "list-type=2"}},
		{"GetObjectAttributes B's object", forbidden, s3Req{method: "GET", path: "/bucket-b/secret.bin", query: "attributes=",
			header: h("X-Amz-Object-Attributes", "ETag,ObjectSize")}},
		{"CopyObject from B's bucket", forbidden, s3Req{method: "PUT", path: "/bucket-a/stolen",
			header: h("X-Amz-Copy-Source", "bucket-b/secret.bin"), body: []byte{}}},
		{"CopyObject from bucket-a/../bucket-b/", []int{400, 404}, s3Req{method: "PUT", path: "/bucket-a/stolen",
			header: h("X-Amz-Copy-Source", "bucket-a/../bucket-b/secret.bin"), body: []byte{}}},
		{"PutObject over B's object", forbidden, s3Req{method: "PUT", path: "/bucket-b/secret.bin", body: []byte("overwritten")}},
		{"DeleteObject B's object", forbidden, s3Req{method: "DELETE", path: "/bucket-b/secret.bin"}},
		{"DeleteObjects in B's bucket", forbidden, s3Req{method: "POST", path: "/bucket-b", query: "delete=", body: delBody,
			header: h("Content-Md5", base64.StdEncoding.EncodeToString(sum[:]), "Content-Type", "application/xml")}},
		{"X-Distcache-Tenant: team-b on GetObject", forbidden, s3Req{method: "GET", path: "/bucket-b/secret.bin",
			header: h("X-Distcache-Tenant", "team-b")}},
		{"X-Distcache-Tenant: team-b on ListObjectsV2", forbidden, s3Req{method: "GET", path: "/bucket-b", query: "list-type=2",
			header: h("X-Distcache-Tenant", "team-b")}},
		{"X-Distcache-Tenant: team-b on the shared bucket", forbidden, s3Req{method: "GET", path: "/shared/b/secret.bin",
			header: h("X-Distcache-Tenant", "team-b")}},
		{"X-Forwarded-Host: bucket-b.localhost", []int{404}, s3Req{method: "GET", path: "/bucket-a/secret.bin",
			header: h("X-Forwarded-Host", "bucket-b.localhost", "X-Forwarded-For", "10.0.0.2", "Forwarded", "host=bucket-b.localhost")}},
		{"virtual-host Host: bucket-b.localhost", []int{400}, s3Req{method: "GET", path: "/secret.bin", host: "bucket-b.localhost"}},
		{"virtual-host Host: bucket-b.s3.amazonaws.com", []int{400}, s3Req{method: "GET", path: "/secret.bin", host: "bucket-b.s3.amazonaws.com"}},
		{"virtual-host Host: bucket-b.localhost with A's bucket in the path", []int{400}, s3Req{method: "GET",
			path: "/bucket-a/secret.bin", host: "bucket-b.localhost:9000"}},
		{"Host: bucket-b (bare)", forbidden, s3Req{method: "GET", path: "/bucket-b/secret.bin", host: "bucket-b"}},
		{"path bucket-a/../bucket-b/", []int{400, 404}, s3Req{method: "GET", path: "/bucket-a/../bucket-b/secret.bin"}},
		{"path bucket-a/..%2Fbucket-b%2F", []int{400, 404}, s3Req{method: "GET", path: "/bucket-a/..%2Fbucket-b%2Fsecret.bin"}},
		{"path bucket-a%2F..%2Fbucket-b/", []int{400, 404}, s3Req{method: "GET", path: "/bucket-a%2F..%2Fbucket-b/secret.bin"}},
		{"path ..%2Fbucket-b/", []int{400}, s3Req{method: "GET", path: "/..%2Fbucket-b/secret.bin"}},
		{"path //bucket-b/", []int{400, 403, 405, 501}, s3Req{method: "GET", path: "//bucket-b/secret.bin"}},
		{"path ./bucket-b/", []int{400}, s3Req{method: "GET", path: "/./bucket-b/secret.bin"}},
		{"path %252F double-encoded", []int{400, 404}, s3Req{method: "GET", path: "/bucket-a/..%252Fbucket-b%252Fsecret.bin"}},
		{"path backslashes", []int{400, 404}, s3Req{method: "GET", path: "/bucket-a/..%5Cbucket-b%5Csecret.bin"}},
		{"path %00", []int{400, 404}, s3Req{method: "GET", path: "/bucket-a/secret.bin%00/../../bucket-b/secret.bin"}},
		{"path overlong UTF-8 ../", []int{400, 404}, s3Req{method: "GET", path: "/bucket-a/%C0%AE%C0%AE%C0%AFbucket-b%C0%AFsecret.bin"}},
		{"path fullwidth solidus", []int{400, 404}, s3Req{method: "GET", path: "/bucket-a/..%EF%BC%8Fbucket-b%EF%BC%8Fsecret.bin"}},
		{"path one-dot leaders for ..", []int{400, 404}, s3Req{method: "GET", path: "/bucket-a/%E2%80%A4%E2%80%A4/bucket-b/secret.bin"}},
		{"NFC twin of B's NFD key", forbidden, s3Req{method: "GET", path: "/bucket-b/" + pathEscape(cafeNFC)}},
		{"upper-case bucket BUCKET-B", []int{400}, s3Req{method: "GET", path: "/BUCKET-B/secret.bin"}},
		{"bucket-ab (A's bucket name is its prefix)", forbidden, s3Req{method: "GET", path: "/bucket-ab/secret.bin"}},
		{"bucket-bb", forbidden, s3Req{method: "GET", path: "/bucket-bb/secret.bin"}},
		{"bucket-b. (trailing dot)", []int{400}, s3Req{method: "GET", path: "/bucket-b./secret.bin"}},
	}
	for _, x := range cases {
		out = append(out, attack{door: "gateway (tenant cert)", name: x.name, want: x.want,
			do: func() answer { return e.s3Do(e.gwA, gatewayCredsA, x.req) }})
		out = append(out, attack{door: "gateway (peer cert)", name: x.name, want: x.want,
			do: func() answer { return e.s3Do(e.gwAPeer, gatewayCredsB, x.req) }})
	}
	out = append(out,
		attack{door: "presigned URL", name: "B's presigned URL replayed at A's gateway", want: forbidden, do: func() answer {
			target := e.presign(e.gwB, gatewayCredsB, "/bucket-b/secret.bin")
			return rawRoundTrip(e.gwA.Addr(), nil, rawRequest("GET", target, e.gwA.Addr(), nil, nil))
		}},
		attack{door: "presigned URL", name: "B's presigned URL at A's peer-cert gateway (same signing keys)", want: forbidden, do: func() answer {
			target := e.presign(e.gwB, gatewayCredsB, "/bucket-b/secret.bin")
			return rawRoundTrip(e.gwAPeer.Addr(), nil, rawRequest("GET", target, e.gwB.Addr(), nil, nil))
		}},
		attack{door: "presigned URL", name: "B's presigned URL for one object, path changed to another", want: forbidden, do: func() answer {
			target := e.presign(e.gwB, gatewayCredsB, "/bucket-b/public.txt")
			target = strings.Replace(target, "/bucket-b/public.txt", "/bucket-b/secret.bin", 1)
			return rawRoundTrip(e.gwB.Addr(), nil, rawRequest("GET", target, e.gwB.Addr(), nil, nil))
		}},
		attack{door: "presigned URL", name: "B's presigned URL, key changed to its NFD twin", want: forbidden, do: func() answer {
			target := e.presign(e.gwB, gatewayCredsB, "/bucket-b/"+pathEscape(cafeNFC))
			target = strings.Replace(target, pathEscape(cafeNFC), pathEscape(cafeNFD), 1)
			return rawRoundTrip(e.gwB.Addr(), nil, rawRequest("GET", target, e.gwB.Addr(), nil, nil))
		}},
		attack{door: "presigned URL", name: "A's own presigned URL for B's object", want: forbidden, do: func() answer {
			target := e.presign(e.gwA, gatewayCredsA, "/bucket-b/secret.bin")
			return rawRoundTrip(e.gwA.Addr(), nil, rawRequest("GET", target, e.gwA.Addr(), nil, nil))
		}},
	)
	return out
}
