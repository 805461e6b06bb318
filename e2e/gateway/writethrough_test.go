package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// TestPutObjectStreamsOnToS3: a PutObject too large for the gateway and the
// node to read whole first (above 4 MiB) and not so large that the node
// uploads it in parts (the cluster's part size is 5 MiB) goes on to S3 as it
// arrives, in one PUT signed with the SHA-256 the client signed: S3 has the
// node's PUT while the client is still sending the body. Before, the node
// read the whole body, then hashed it, then sent it.
func TestPutObjectStreamsOnToS3(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 16 << 20})
	body := testutil.RandomBytes(rand.New(rand.NewPCG(21, 22)), 4<<20+512<<10+5)
	sum := sha256.Sum256(body)
	declared := hex.EncodeToString(sum[:])
	const key = "streamed/object"
	e.cluster.Proxy.Reset() // (which also removes a hook)
	pr := e.cluster.Proxy.BodyHeldUntilPut(body, 4<<20, "/"+key)
	t.Cleanup(func() { e.cluster.Proxy.OnRequest(nil) })

	req := signedPut(t, e, key, body, pr)
	resp, err := http.DefaultClient.Do(req)
	testutil.Must(t, err)
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PutObject: %d %s", resp.StatusCode, answer)
	}
	var writes []s3proxy.Record
	for _, rec := range e.cluster.Proxy.Requests() {
		if rec.Method != http.MethodGet && rec.Method != http.MethodHead {
			writes = append(writes, rec)
		}
	}
	if len(writes) != 1 || writes[0].Method != http.MethodPut || writes[0].ContentSHA256 != declared {
		t.Errorf("S3 saw %+v; want one PUT signed with the client's SHA-256", writes)
	}
	if got := e.cluster.GetDirect("bucket-a", key, ""); string(got) != string(body) {
		t.Fatalf("S3 holds %d bytes, want the %d put", len(got), len(body))
	}
	if got := e.mustGet("bucket-a", key, ""); string(got) != string(body) {
		t.Errorf("read back %d bytes, want %d", len(got), len(body))
	}
}

// Reading back what was just written is a hit wherever the chunks land:
// the node that takes the write hands the chunks it does not own to their
// owners before it answers, so no GET right after a PUT reads S3.
func TestReadAfterWriteIsAHit(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := rand.New(rand.NewPCG(91, 92))
	getsBefore := nodecluster.Gather(t, e.cluster.S3Registry, "distcache_s3_requests_total", map[string]string{"op": "get"})
	for i := range 20 {
		v := testutil.RandomBytes(r, 3*chunkSize+i)
		key := fmt.Sprintf("raw/%d", i)
		e.put("bucket-a", key, v)
		if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, v) {
			t.Fatalf("%s: read back other bytes", key)
		}
	}
	if gets := nodecluster.Gather(t, e.cluster.S3Registry, "distcache_s3_requests_total", map[string]string{"op": "get"}) - getsBefore; gets != 0 {
		t.Errorf("reading back 20 objects of 4 chunks right after writing them made %v S3 GETs, want 0", gets)
	}
}

// TestBodyThatFailsVerificationNeverReachesS3 sends correctly signed
// requests whose body is not the one signed (x-amz-content-sha256 of other
// bytes). The gateway only learns it at the last byte; neither a
// write-through PutObject nor a passed-through UploadPart may leave data in
// S3, small (read whole first) or large (streamed, last byte held back).
// A PutObject whose length is not given (Transfer-Encoding: chunked) is
// refused as S3 refuses it: 411 MissingContentLength, nothing stored.
func TestPutObjectWithoutLengthIsRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	body := []byte("a body of unknown length")
	req, _ := http.NewRequest(http.MethodPut, e.srv.URL()+"/bucket-a/chunked", nil)
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), -1 // sent chunked
	resp := signedDo(t, req, nil, accessKey, secretKey, body)
	if resp.status != http.StatusLengthRequired || xmlCode(resp.body) != "MissingContentLength" {
		t.Errorf("a chunked PutObject: %d %s, want 411 MissingContentLength", resp.status, resp.body)
	}
	if e.existsInS3("bucket-a", "chunked") {
		t.Error("the object exists in S3")
	}
}

func TestBodyThatFailsVerificationNeverReachesS3(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(11, 12))
	for name, size := range map[string]int{"small": 3000, "large": 6<<20 + 3} {
		t.Run("PutObject "+name, func(t *testing.T) {
			body := testutil.RandomBytes(r, size)
			signed := bytes.Clone(body)
			signed[len(signed)-1] ^= 1 // differs in the very last byte
			key := "tampered/" + name
			req, _ := http.NewRequest(http.MethodPut, e.srv.URL()+"/bucket-a/"+key, nil)
			resp := signedDo(t, req, body, accessKey, secretKey, signed)
			if resp.status != http.StatusBadRequest || xmlCode(resp.body) != "XAmzContentSHA256Mismatch" {
				t.Errorf("status %d: %s", resp.status, resp.body)
			}
			if e.existsInS3("bucket-a", key) {
				t.Fatal("the object exists in S3")
			}
			// The same request with the right hash works: the failure was
			// the body's.
			req, _ = http.NewRequest(http.MethodPut, e.srv.URL()+"/bucket-a/"+key, nil)
			if resp := signedDo(t, req, body, accessKey, secretKey); resp.status != http.StatusOK {
				t.Fatalf("honest PUT: %d %s", resp.status, resp.body)
			}
			if !bytes.Equal(e.cluster.GetDirect("bucket-a", key, ""), body) {
				t.Error("honest PUT stored other bytes")
			}
		})
		t.Run("UploadPart "+name, func(t *testing.T) {
			key := "tampered/mp-" + name
			mp, err := e.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
			testutil.Must(t, err)
			body := testutil.RandomBytes(r, size)
			signed := bytes.Clone(body)
			signed[len(signed)-1] ^= 1
			url := fmt.Sprintf("%s/bucket-a/%s?partNumber=1&uploadId=%s", e.srv.URL(), key, aws.ToString(mp.UploadId))
			req, _ := http.NewRequest(http.MethodPut, url, nil)
			resp := signedDo(t, req, body, accessKey, secretKey, signed)
			if resp.status != http.StatusBadRequest || xmlCode(resp.body) != "XAmzContentSHA256Mismatch" {
				t.Errorf("status %d: %s", resp.status, resp.body)
			}
			// S3 must not have the part.
			parts, err := e.cluster.Direct.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), UploadId: mp.UploadId})
			testutil.Must(t, err)
			if len(parts.Parts) != 0 {
				t.Errorf("S3 has %d parts of a body that failed verification", len(parts.Parts))
			}
			_, err = e.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), UploadId: mp.UploadId})
			testutil.Must(t, err)
		})
	}
	t.Run("DeleteObjects with a forged body", func(t *testing.T) {
		e.cluster.PutDirect("bucket-a", "keep-me", []byte("x"))
		doc := []byte(`<Delete><Object><Key>keep-me</Key></Object></Delete>`)
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL()+"/bucket-a?delete", nil)
		resp := signedDo(t, req, doc, accessKey, secretKey, []byte(`<Delete><Object><Key>other</Key></Object></Delete>`))
		var d struct{ Code string }
		_ = xml.Unmarshal(resp.body, &d)
		if resp.status != http.StatusBadRequest || d.Code != "XAmzContentSHA256Mismatch" {
			t.Errorf("status %d: %s", resp.status, resp.body)
		}
		if !e.existsInS3("bucket-a", "keep-me") {
			t.Error("a forged DeleteObjects deleted the object")
		}
	})
}

// signedPut is a PutObject of body to bucket-a/key through the gateway,
// its bytes read from from, signed with the body's SHA-256 as an AWS SDK
// signs over plain HTTP.
func signedPut(t *testing.T, e *env, key string, body []byte, from io.Reader) *http.Request {
	t.Helper()
	sum := sha256.Sum256(body)
	declared := hex.EncodeToString(sum[:])
	req, err := http.NewRequest(http.MethodPut, e.srv.URL()+"/bucket-a/"+key, from)
	testutil.Must(t, err)
	req.ContentLength = int64(len(body))
	req.Header.Set("X-Amz-Content-Sha256", declared)
	testutil.Must(t, v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey},
		req, declared, "s3", region, time.Now()))
	return req
}

// pausedBody gives the first at bytes of data, then waits for release
// (closing paused once it is there) before giving the rest, as a client
// still sending a body.
type pausedBody struct {
	data            []byte
	at, off         int
	paused, release chan struct{}
}

func (b *pausedBody) Read(p []byte) (int, error) {
	if b.off == b.at && b.paused != nil {
		close(b.paused)
		b.paused = nil
		<-b.release
	}
	if b.off >= len(b.data) {
		return 0, io.EOF
	}
	end := len(b.data)
	if b.off < b.at {
		end = b.at
	}
	n := copy(p, b.data[b.off:end])
	b.off += n
	return n, nil
}

// TestPutObjectSurvivesANodeDyingMidUpload: a PutObject body the gateway
// streams to a node as it arrives (up to 4 MiB) and that node dies
// halfway: the gateway sends the body again, from what it kept, to the
// next node, and the PUT succeeds with every byte in S3.
func TestPutObjectSurvivesANodeDyingMidUpload(t *testing.T) {
	e := newEnv(t, envOptions{})
	body := testutil.RandomBytes(rand.New(rand.NewPCG(31, 32)), 1<<20+3)
	const key = "failover/object"
	owner := e.cluster.Ring().Owner(nodeapi.MetaID(chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: key})).Name
	victim := -1
	for i, m := range e.cluster.Members() {
		if m.Name == owner {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("no member %s", owner)
	}
	pb := &pausedBody{data: body, at: len(body) / 2, paused: make(chan struct{}), release: make(chan struct{})}
	paused := pb.paused
	req := signedPut(t, e, key, body, pb)
	type answer struct {
		status int
		body   string
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- answer{status: resp.StatusCode, body: string(b)}
	}()
	<-paused
	// The metadata owner, where the gateway sends a PUT first, dies with
	// (nothing exposes how much of) the first half passed on: a moment
	// lets the gateway stream it. Had it sent nothing yet, the retry
	// would not rewind, and the checks below would hold all the same.
	time.Sleep(300 * time.Millisecond)
	e.cluster.Kill(victim)
	close(pb.release)
	a := <-answered
	if a.err != nil || a.status != http.StatusOK {
		t.Fatalf("PutObject with its first node killed halfway: %d %s %v", a.status, a.body, a.err)
	}
	if got := e.cluster.GetDirect("bucket-a", key, ""); !bytes.Equal(got, body) {
		t.Fatalf("S3 has %d bytes, not the %d sent", len(got), len(body))
	}
	if n := e.counter("distcache_client_failovers_total", nil); n == 0 {
		t.Error("no failover counted: the PUT did not go to another node")
	}
}
