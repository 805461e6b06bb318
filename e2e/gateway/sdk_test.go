package gateway_test

//lint:file-ignore SA1019 feature/s3/manager's Uploader and Downloader are what aws-sdk-go-v2 users run; its successor, transfermanager, is v0.x

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// TestGetObjectRanges reads random, suffix, open-ended and out-of-bounds
// ranges of objects spanning many chunks and compares every byte, status
// and header with MinIO's own answers.
func TestGetObjectRanges(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 8 << 20})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	sizes := map[string]int{"big.bin": 9*chunkSize + 12345, "one-chunk.bin": chunkSize, "tiny.bin": 7, "empty.bin": 0}
	data := map[string][]byte{}
	for key, n := range sizes {
		data[key] = testutil.RandomBytes(r, n)
		e.cluster.PutDirect("bucket-a", key, data[key])
	}

	t.Run("random ranges are byte-exact", func(t *testing.T) {
		big := data["big.bin"]
		size := int64(len(big))
		for i := 0; i < 60; i++ {
			first := r.Int64N(size)
			last := first + r.Int64N(min(size-first, 3*chunkSize))
			rng := fmt.Sprintf("bytes=%d-%d", first, last)
			got, out, err := e.get("bucket-a", "big.bin", rng)
			testutil.Must(t, err)
			if !bytes.Equal(got, big[first:last+1]) {
				t.Fatalf("%s: %d bytes, not the object's", rng, len(got))
			}
			wantCR := fmt.Sprintf("bytes %d-%d/%d", first, last, size)
			if aws.ToString(out.ContentRange) != wantCR || aws.ToInt64(out.ContentLength) != last-first+1 {
				t.Fatalf("%s: Content-Range %q length %d, want %q", rng, aws.ToString(out.ContentRange), aws.ToInt64(out.ContentLength), wantCR)
			}
		}
	})

	t.Run("same answers as MinIO", func(t *testing.T) {
		cases := []struct{ key, rng string }{
			{"big.bin", ""}, {"big.bin", "bytes=0-0"}, {"big.bin", "bytes=-1"}, {"big.bin", "bytes=-300000"},
			{"big.bin", "bytes=2000000-"}, {"big.bin", fmt.Sprintf("bytes=%d-", chunkSize)},
			{"big.bin", fmt.Sprintf("bytes=%d-%d", chunkSize-1, chunkSize)}, {"big.bin", "bytes=100-99999999999"},
			{"big.bin", fmt.Sprintf("bytes=%d-", sizes["big.bin"])}, {"big.bin", "bytes=99999999-"},
			{"one-chunk.bin", "bytes=-10"}, {"tiny.bin", "bytes=-100"}, {"tiny.bin", "bytes=3-"}, {"tiny.bin", "bytes=7-"},
			{"tiny.bin", ""}, {"empty.bin", ""},
		}
		for _, c := range cases {
			want := rawGet(t, e.cluster.MinIO.Endpoint, c.key, c.rng, e.cluster.MinIO.AccessKey, e.cluster.MinIO.SecretKey)
			got := rawGet(t, e.srv.URL(), c.key, c.rng, accessKey, secretKey)
			if got.status != want.status || !bytes.Equal(got.body, want.body) && got.status < 300 {
				t.Errorf("%s %q: gateway %d (%d bytes), MinIO %d (%d bytes)", c.key, c.rng, got.status, len(got.body), want.status, len(want.body))
				continue
			}
			if got.status >= 300 {
				if code := xmlCode(got.body); code != xmlCode(want.body) {
					t.Errorf("%s %q: gateway error %s, MinIO %s", c.key, c.rng, code, xmlCode(want.body))
				}
				continue
			}
			for _, h := range []string{"Content-Range", "Content-Length", "ETag", "Last-Modified", "Accept-Ranges"} {
				if got.header.Get(h) != want.header.Get(h) {
					t.Errorf("%s %q: %s is %q, MinIO says %q", c.key, c.rng, h, got.header.Get(h), want.header.Get(h))
				}
			}
		}
	})

	t.Run("416 InvalidRange", func(t *testing.T) {
		_, _, err := e.get("bucket-a", "big.bin", fmt.Sprintf("bytes=%d-", sizes["big.bin"]))
		wantCode(t, "range past the end", err, "InvalidRange", http.StatusRequestedRangeNotSatisfiable)
		_, _, err = e.get("bucket-a", "empty.bin", "bytes=0-")
		wantCode(t, "range of an empty object", err, "InvalidRange", http.StatusRequestedRangeNotSatisfiable)
	})

	t.Run("HeadObject", func(t *testing.T) {
		want, err := e.cluster.Direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("big.bin")})
		testutil.Must(t, err)
		got, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("big.bin")})
		testutil.Must(t, err)
		if aws.ToString(got.ETag) != aws.ToString(want.ETag) || aws.ToInt64(got.ContentLength) != int64(sizes["big.bin"]) ||
			!aws.ToTime(got.LastModified).Equal(aws.ToTime(want.LastModified)) ||
			aws.ToString(got.ContentType) != aws.ToString(want.ContentType) || aws.ToString(got.AcceptRanges) != "bytes" {
			t.Errorf("HeadObject: gateway %+v, MinIO %+v", *got, *want)
		}
		rng, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("big.bin"), Range: aws.String("bytes=10-19")})
		testutil.Must(t, err)
		if aws.ToInt64(rng.ContentLength) != 10 || aws.ToString(rng.ContentRange) != fmt.Sprintf("bytes 10-19/%d", sizes["big.bin"]) {
			t.Errorf("ranged HeadObject: length %d, range %q", aws.ToInt64(rng.ContentLength), aws.ToString(rng.ContentRange))
		}
		_, err = e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("nope")})
		if httpStatus(err) != http.StatusNotFound {
			t.Errorf("HeadObject of a missing key: %v", err)
		}
	})

	t.Run("response overrides", func(t *testing.T) {
		out, err := e.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("tiny.bin"),
			ResponseContentType: aws.String("text/csv"), ResponseContentDisposition: aws.String(`attachment; filename="t.csv"`),
			ResponseCacheControl: aws.String("no-store")})
		testutil.Must(t, err)
		out.Body.Close()
		if aws.ToString(out.ContentType) != "text/csv" || aws.ToString(out.ContentDisposition) != `attachment; filename="t.csv"` ||
			aws.ToString(out.CacheControl) != "no-store" {
			t.Errorf("overrides ignored: %q %q %q", aws.ToString(out.ContentType), aws.ToString(out.ContentDisposition), aws.ToString(out.CacheControl))
		}
	})

	t.Run("presigned GET", func(t *testing.T) {
		ps, err := s3.NewPresignClient(e.s3).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("tiny.bin")},
			s3.WithPresignExpires(time.Minute))
		testutil.Must(t, err)
		resp, err := http.Get(ps.URL)
		testutil.Must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data["tiny.bin"]) {
			t.Errorf("presigned GET: %d %q", resp.StatusCode, body)
		}
	})
}

// TestConditionalGets checks If-Match and If-None-Match on GET and HEAD.
func TestConditionalGets(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	data := []byte("conditional body")
	etag := aws.ToString(e.put("bucket-a", "cond.txt", data).ETag)
	get := func(in *s3.GetObjectInput) error {
		in.Bucket, in.Key = aws.String("bucket-a"), aws.String("cond.txt")
		out, err := e.s3.GetObject(ctx, in)
		if err == nil {
			out.Body.Close()
		}
		return err
	}
	wantCode(t, "If-Match mismatch", get(&s3.GetObjectInput{IfMatch: aws.String(`"0000"`)}), "PreconditionFailed", http.StatusPreconditionFailed)
	if err := get(&s3.GetObjectInput{IfMatch: aws.String(etag)}); err != nil {
		t.Errorf("If-Match match: %v", err)
	}
	if err := get(&s3.GetObjectInput{IfNoneMatch: aws.String(etag)}); httpStatus(err) != http.StatusNotModified {
		t.Errorf("If-None-Match match: %v, want 304", err)
	}
	if err := get(&s3.GetObjectInput{IfNoneMatch: aws.String(`"0000"`)}); err != nil {
		t.Errorf("If-None-Match mismatch: %v", err)
	}
	if err := get(&s3.GetObjectInput{IfModifiedSince: aws.Time(time.Now().Add(time.Hour))}); httpStatus(err) != http.StatusNotModified {
		t.Errorf("If-Modified-Since the future: %v, want 304", err)
	}
	if err := get(&s3.GetObjectInput{IfUnmodifiedSince: aws.Time(time.Now().Add(-time.Hour))}); httpStatus(err) != http.StatusPreconditionFailed {
		t.Errorf("If-Unmodified-Since the past: %v, want 412", err)
	}
	_, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("cond.txt"), IfMatch: aws.String(`"0000"`)})
	if httpStatus(err) != http.StatusPreconditionFailed {
		t.Errorf("HEAD If-Match mismatch: %v, want 412", err)
	}
	_, err = e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("cond.txt"), IfNoneMatch: aws.String(etag)})
	if httpStatus(err) != http.StatusNotModified {
		t.Errorf("HEAD If-None-Match match: %v, want 304", err)
	}
	// 304 carries the validators, no body.
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL()+"/bucket-a/cond.txt", nil)
	req.Header.Set("If-None-Match", etag)
	resp := signedDo(t, req, nil, accessKey, secretKey)
	if resp.status != http.StatusNotModified || resp.header.Get("ETag") != etag || len(resp.body) != 0 {
		t.Errorf("raw 304: %d, ETag %q, %d body bytes", resp.status, resp.header.Get("ETag"), len(resp.body))
	}
}

// TestPutObject writes small (buffered) and large (streamed) objects
// through the cache and checks S3 has exactly them.
func TestPutObject(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 16 << 20})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	for name, n := range map[string]int{"empty": 0, "small": 1000, "chunk-plus-one": chunkSize + 1, "large": 9<<20 + 17} {
		t.Run(name, func(t *testing.T) {
			data := testutil.RandomBytes(r, n)
			key := "put/" + name
			out, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key),
				Body: bytes.NewReader(data), ContentType: aws.String("application/x-test")})
			testutil.Must(t, err)
			if direct := e.cluster.GetDirect("bucket-a", key, ""); !bytes.Equal(direct, data) {
				t.Fatalf("S3 holds %d bytes, want the %d put", len(direct), n)
			}
			head, err := e.cluster.Direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
			testutil.Must(t, err)
			if aws.ToString(out.ETag) != aws.ToString(head.ETag) || aws.ToString(head.ContentType) != "application/x-test" {
				t.Errorf("PutObject ETag %q / S3 %q, content type %q", aws.ToString(out.ETag), aws.ToString(head.ETag), aws.ToString(head.ContentType))
			}
			if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, data) {
				t.Errorf("read back %d bytes, want %d", len(got), n)
			}
		})
	}
	t.Run("declared checksums are answered back", func(t *testing.T) {
		body := []byte("checksummed body")
		crc := make([]byte, 4)
		binary.BigEndian.PutUint32(crc, crc32.ChecksumIEEE(body))
		sha := sha256.Sum256(body)
		// The SDK computes the CRC-32 itself (a header or an aws-chunked
		// trailer); the SHA-256 is given as a header.
		out, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("put/crc32"),
			Body: bytes.NewReader(body), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
		testutil.Must(t, err)
		if got, want := aws.ToString(out.ChecksumCRC32), base64.StdEncoding.EncodeToString(crc); got != want {
			t.Errorf("CRC-32 answered %q, want %q", got, want)
		}
		out, err = e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("put/sha256"),
			Body: bytes.NewReader(body), ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sha[:]))})
		testutil.Must(t, err)
		if got, want := aws.ToString(out.ChecksumSHA256), base64.StdEncoding.EncodeToString(sha[:]); got != want {
			t.Errorf("SHA-256 answered %q, want %q", got, want)
		}
		if out.ChecksumType != types.ChecksumTypeFullObject {
			t.Errorf("checksum type %q, want FULL_OBJECT", out.ChecksumType)
		}
	})
	t.Run("checksums S3 keeps are answered to checksum mode", func(t *testing.T) {
		body := []byte("a checksummed object")
		// Through the gateway (the SDK declares the CRC-32 in a header on
		// plain http), and straight to S3 by another writer.
		_, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("put/kept-crc32"),
			Body: bytes.NewReader(body), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
		testutil.Must(t, err)
		_, err = e.cluster.Direct.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("put/direct-sha256"),
			Body: bytes.NewReader(body), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
		testutil.Must(t, err)
		for _, key := range []string{"put/kept-crc32", "put/direct-sha256"} {
			in := &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled}
			direct, err := e.cluster.Direct.HeadObject(ctx, in)
			testutil.Must(t, err)
			want := headChecksum(direct)
			if want == "" {
				t.Fatalf("%s: S3 keeps no checksum", key)
			}
			for i := range 2 { // the second from the metadata the cache keeps
				h, err := e.s3.HeadObject(ctx, in)
				testutil.Must(t, err)
				// The SDK checks the body against the checksum answered.
				g, err := e.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key),
					ChecksumMode: types.ChecksumModeEnabled})
				testutil.Must(t, err)
				got, err := io.ReadAll(g.Body)
				g.Body.Close()
				testutil.Must(t, err)
				gc := checksumString(g.ChecksumCRC32, g.ChecksumCRC32C, g.ChecksumCRC64NVME, g.ChecksumSHA1, g.ChecksumSHA256, g.ChecksumType)
				if hc := headChecksum(h); hc != want || gc != want || !bytes.Equal(got, body) {
					t.Errorf("%s, read %d: HEAD answered checksum %q, GET %q; S3 %q", key, i, hc, gc, want)
				}
			}
			// As S3: not without checksum mode, nor to a range.
			h, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
			testutil.Must(t, err)
			g, err := e.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key),
				Range: aws.String("bytes=0-3"), ChecksumMode: types.ChecksumModeEnabled})
			testutil.Must(t, err)
			g.Body.Close()
			if hc, gc := headChecksum(h), checksumString(g.ChecksumCRC32, g.ChecksumCRC32C, g.ChecksumCRC64NVME, g.ChecksumSHA1, g.ChecksumSHA256, g.ChecksumType); hc != "" || gc != "" {
				t.Errorf("%s: HEAD without checksum mode answered %q, a range %q", key, hc, gc)
			}
		}
	})
	t.Run("user metadata is passed through and answered from the cache", func(t *testing.T) {
		expires := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
		put := func(body string, md map[string]string, cacheControl string) {
			t.Helper()
			_, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("put/meta"),
				Body: strings.NewReader(body), Metadata: md, CacheControl: aws.String(cacheControl),
				ContentDisposition: aws.String(`attachment; filename="m.txt"`), ContentLanguage: aws.String("de"),
				Expires: &expires})
			testutil.Must(t, err)
		}
		// check compares what the gateway answers (HEAD, then GET twice:
		// the second from the metadata the cache keeps) with S3's HEAD.
		check := func(body string) {
			t.Helper()
			head, err := e.cluster.Direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("put/meta")})
			testutil.Must(t, err)
			gh, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("put/meta")})
			testutil.Must(t, err)
			for i := range 2 {
				g, err := e.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("put/meta")})
				testutil.Must(t, err)
				got, err := io.ReadAll(g.Body)
				g.Body.Close()
				testutil.Must(t, err)
				if string(got) != body {
					t.Errorf("GET %d read back %q, want %q", i, got, body)
				}
				for _, c := range []struct{ what, gateway, s3 string }{
					{"HEAD Cache-Control", aws.ToString(gh.CacheControl), aws.ToString(head.CacheControl)},
					{"HEAD Content-Disposition", aws.ToString(gh.ContentDisposition), aws.ToString(head.ContentDisposition)},
					{"HEAD Content-Language", aws.ToString(gh.ContentLanguage), aws.ToString(head.ContentLanguage)},
					{"HEAD Expires", aws.ToString(gh.ExpiresString), aws.ToString(head.ExpiresString)},
					{"HEAD metadata", fmt.Sprint(gh.Metadata), fmt.Sprint(head.Metadata)},
					{"GET Cache-Control", aws.ToString(g.CacheControl), aws.ToString(head.CacheControl)},
					{"GET Content-Disposition", aws.ToString(g.ContentDisposition), aws.ToString(head.ContentDisposition)},
					{"GET Expires", aws.ToString(g.ExpiresString), aws.ToString(head.ExpiresString)},
					{"GET metadata", fmt.Sprint(g.Metadata), fmt.Sprint(head.Metadata)},
				} {
					if c.gateway != c.s3 || c.s3 == "" || c.s3 == "map[]" {
						t.Errorf("%s: the gateway answered %q, S3 %q", c.what, c.gateway, c.s3)
					}
				}
			}
		}
		many := map[string]string{"owner": "team-a"}
		for i := range 24 { // more header lines than a read connection's answer takes
			many[fmt.Sprintf("field-%02d", i)] = strconv.Itoa(i)
		}
		put("with metadata", many, "max-age=60")
		check("with metadata")
		// An overwrite through the gateway with other metadata: never the old.
		put("rewritten", map[string]string{"owner": "team-b"}, "no-store")
		check("rewritten")
	})
	t.Run("storage class is kept and answered from the cache", func(t *testing.T) {
		// wantClass checks what the gateway answers (HEAD, then GET twice:
		// the second from the metadata the cache keeps) against S3's HEAD
		// and want ("": STANDARD, which S3 does not name).
		wantClass := func(key, want string) {
			t.Helper()
			head, err := e.cluster.Direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
			testutil.Must(t, err)
			gh, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
			testutil.Must(t, err)
			got := []string{string(head.StorageClass), string(gh.StorageClass)}
			for range 2 {
				g, err := e.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
				testutil.Must(t, err)
				g.Body.Close()
				got = append(got, string(g.StorageClass))
			}
			if fmt.Sprint(got) != fmt.Sprint([]string{want, want, want, want}) {
				t.Errorf("%s: storage class of S3's HEAD, the gateway's HEAD and two GETs %q, want %q", key, got, want)
			}
		}
		getsBefore := nodecluster.Gather(t, e.cluster.S3Registry, "distcache_s3_requests_total", map[string]string{"op": "get"})
		for _, c := range []struct{ key, class, want string }{
			{"put/rrs", "REDUCED_REDUNDANCY", "REDUCED_REDUNDANCY"},
			{"put/standard", "STANDARD", ""},
		} {
			data := testutil.RandomBytes(r, chunkSize+5)
			_, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(c.key),
				Body: bytes.NewReader(data), StorageClass: types.StorageClass(c.class)})
			testutil.Must(t, err)
			if got := e.mustGet("bucket-a", c.key, ""); !bytes.Equal(got, data) {
				t.Errorf("%s: read back other bytes", c.key)
			}
			wantClass(c.key, c.want)
		}
		// Written through the cache like any PUT: reading it back is a hit.
		if gets := nodecluster.Gather(t, e.cluster.S3Registry, "distcache_s3_requests_total", map[string]string{"op": "get"}) - getsBefore; gets != 0 {
			t.Errorf("reading back what was PUT with a storage class made %v S3 GETs, want 0", gets)
		}
		// An overwrite without one is STANDARD again, never the old class.
		e.put("bucket-a", "put/rrs", []byte("standard now"))
		wantClass("put/rrs", "")
		// Written to S3 behind the cache: the class S3's HEAD gives.
		_, err := e.cluster.Direct.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("put/rrs-direct"),
			Body: strings.NewReader("behind the cache"), StorageClass: types.StorageClassReducedRedundancy})
		testutil.Must(t, err)
		wantClass("put/rrs-direct", "REDUCED_REDUNDANCY")
		// A class this S3 does not offer: S3's refusal, and nothing stored.
		_, err = e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("put/ia"),
			Body: strings.NewReader("x"), StorageClass: types.StorageClassStandardIa})
		wantCode(t, "a storage class MinIO does not offer", err, "InvalidStorageClass", http.StatusBadRequest)
		if _, _, err := e.get("bucket-a", "put/ia", ""); !isNoSuchKey(err) {
			t.Errorf("put/ia after its refusal: %v, want NoSuchKey", err)
		}
	})
	t.Run("conditional write", func(t *testing.T) {
		_, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("put/small"),
			Body: strings.NewReader("must not replace"), IfNoneMatch: aws.String("*")})
		wantCode(t, "If-None-Match: * on an existing key", err, "PreconditionFailed", http.StatusPreconditionFailed)
	})
}

// TestMultipartUpload uploads parts and copied parts, completes and aborts
// uploads, with explicit calls and with the SDK's upload manager.
func TestMultipartUpload(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 16 << 20})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 6))
	src := testutil.RandomBytes(r, 6<<20)
	e.cluster.PutDirect("bucket-a", "mp/source", src)
	part1, part3 := testutil.RandomBytes(r, 5<<20), testutil.RandomBytes(r, 1234)
	const key = "mp/assembled"
	// A cached old version under the key: completing must replace it.
	old := testutil.RandomBytes(r, 3*chunkSize)
	e.put("bucket-a", key, old)
	if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, old) {
		t.Fatal("old version differs")
	}

	b, k := aws.String("bucket-a"), aws.String(key)
	mp, err := e.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: k, ContentType: aws.String("application/x-parts")})
	testutil.Must(t, err)
	up1, err := e.s3.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: mp.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(part1)})
	testutil.Must(t, err)
	up2, err := e.s3.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: b, Key: k, UploadId: mp.UploadId, PartNumber: aws.Int32(2),
		CopySource: aws.String("bucket-a/mp/source"), CopySourceRange: aws.String("bytes=1000-5243879")})
	testutil.Must(t, err)
	up3, err := e.s3.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: mp.UploadId, PartNumber: aws.Int32(3),
		Body: bytes.NewReader(part3)})
	testutil.Must(t, err)
	parts, err := e.s3.ListParts(ctx, &s3.ListPartsInput{Bucket: b, Key: k, UploadId: mp.UploadId})
	testutil.Must(t, err)
	if len(parts.Parts) != 3 {
		t.Fatalf("ListParts: %d parts, want 3", len(parts.Parts))
	}
	_, err = e.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
			{PartNumber: aws.Int32(1), ETag: up1.ETag, ChecksumCRC32: up1.ChecksumCRC32},
			{PartNumber: aws.Int32(2), ETag: up2.CopyPartResult.ETag},
			{PartNumber: aws.Int32(3), ETag: up3.ETag, ChecksumCRC32: up3.ChecksumCRC32},
		}}})
	testutil.Must(t, err)
	want := slices.Concat(part1, src[1000:5243880], part3)
	if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, want) {
		t.Fatalf("completed object: %d bytes, want %d (stale: %v)", len(got), len(want), bytes.Equal(got, old))
	}
	if got := e.mustGet("bucket-a", key, "bytes=5242870-5242889"); !bytes.Equal(got, want[5242870:5242890]) {
		t.Error("range across the part boundary differs")
	}

	t.Run("abort", func(t *testing.T) {
		mp, err := e.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mp/aborted")})
		testutil.Must(t, err)
		_, err = e.s3.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: aws.String("mp/aborted"), UploadId: mp.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(part3)})
		testutil.Must(t, err)
		list, err := e.s3.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: b, Prefix: aws.String("mp/aborted")})
		testutil.Must(t, err)
		if len(list.Uploads) != 1 {
			t.Fatalf("ListMultipartUploads: %d uploads, want 1", len(list.Uploads))
		}
		_, err = e.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: b, Key: aws.String("mp/aborted"), UploadId: mp.UploadId})
		testutil.Must(t, err)
		list, err = e.s3.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: b, Prefix: aws.String("mp/aborted")})
		testutil.Must(t, err)
		if len(list.Uploads) != 0 || e.existsInS3("bucket-a", "mp/aborted") {
			t.Errorf("after abort: %d uploads listed, object exists %v", len(list.Uploads), e.existsInS3("bucket-a", "mp/aborted"))
		}
	})

	t.Run("upload manager", func(t *testing.T) {
		data := testutil.RandomBytes(r, 13<<20+5)
		up := manager.NewUploader(e.s3, func(u *manager.Uploader) { u.PartSize = 5 << 20; u.Concurrency = 3 })
		_, err := up.Upload(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("mp/manager"), Body: bytes.NewReader(data)})
		testutil.Must(t, err)
		if got := e.mustGet("bucket-a", "mp/manager", ""); !bytes.Equal(got, data) {
			t.Errorf("uploaded with the manager: read %d bytes, want %d", len(got), len(data))
		}
		dl := manager.NewDownloader(e.s3, func(d *manager.Downloader) { d.PartSize = 3 << 20; d.Concurrency = 4 })
		buf := manager.NewWriteAtBuffer(nil)
		_, err = dl.Download(ctx, buf, &s3.GetObjectInput{Bucket: b, Key: aws.String("mp/manager")})
		testutil.Must(t, err)
		if !bytes.Equal(buf.Bytes(), data) {
			t.Error("downloaded with the manager (parallel ranges): bytes differ")
		}
	})
}

// TestCopyObject copies over a cached object; reads must see the copy, and
// after a DeleteObjects, the deletion. Also with an immutable cache, whose
// metadata the gateway keeps: writes it passes through drop what it kept.
func TestCopyObject(t *testing.T) {
	for _, immutable := range []bool{false, true} {
		t.Run(fmt.Sprintf("immutable=%v", immutable), func(t *testing.T) {
			e := newEnv(t, envOptions{pageCache: 8 << 20, immutable: immutable})
			ctx := context.Background()
			r := rand.New(rand.NewPCG(7, 8))
			v1, v2 := testutil.RandomBytes(r, 2*chunkSize+5), testutil.RandomBytes(r, 2*chunkSize+5)
			e.put("bucket-a", "copy/dst", v1)
			e.put("shared", "copy/src", v2)
			if got := e.mustGet("bucket-a", "copy/dst", ""); !bytes.Equal(got, v1) {
				t.Fatal("first read differs")
			}
			out, err := e.s3.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("copy/dst"),
				CopySource: aws.String("shared/copy/src")})
			testutil.Must(t, err)
			if out.CopyObjectResult == nil || aws.ToString(out.CopyObjectResult.ETag) == "" {
				t.Errorf("CopyObject result: %+v", out.CopyObjectResult)
			}
			if got := e.mustGet("bucket-a", "copy/dst", ""); !bytes.Equal(got, v2) {
				t.Fatalf("read after CopyObject: stale %v", bytes.Equal(got, v1))
			}
			_, err = e.s3.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("copy/other"),
				CopySource: aws.String("bucket-b/anything")})
			wantCode(t, "copy from a bucket of another tenant", err, "AccessDenied", http.StatusForbidden)

			_, err = e.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bucket-a"), Delete: &types.Delete{
				Objects: []types.ObjectIdentifier{{Key: aws.String("copy/dst")}}}})
			testutil.Must(t, err)
			_, _, err = e.get("bucket-a", "copy/dst", "")
			wantCode(t, "read after DeleteObjects", err, "NoSuchKey", http.StatusNotFound)
		})
	}
}

// TestListObjects lists with prefix, delimiter and continuation (several
// pages) and compares with MinIO's own listing.
func TestListObjects(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	var keys []string
	for i := 0; i < 23; i++ {
		keys = append(keys, fmt.Sprintf("logs/2026/%02d/part-%d.bin", i%4, i))
	}
	keys = append(keys, "logs/readme.txt", "logs/sp ace+plus(1).bin", "other/x", "logs/日本.txt")
	for _, k := range keys {
		e.cluster.PutDirect("bucket-a", k, []byte(k))
	}
	list := func(c *s3.Client, in s3.ListObjectsV2Input) (objs, prefixes []string, pages int) {
		t.Helper()
		in.Bucket = aws.String("bucket-a")
		p := s3.NewListObjectsV2Paginator(c, &in)
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			testutil.Must(t, err)
			pages++
			for _, o := range page.Contents {
				objs = append(objs, aws.ToString(o.Key))
			}
			for _, cp := range page.CommonPrefixes {
				prefixes = append(prefixes, aws.ToString(cp.Prefix))
			}
		}
		return objs, prefixes, pages
	}
	for name, in := range map[string]s3.ListObjectsV2Input{
		"prefix, 5 per page":       {Prefix: aws.String("logs/2026/"), MaxKeys: aws.Int32(5)},
		"delimiter":                {Prefix: aws.String("logs/"), Delimiter: aws.String("/")},
		"delimiter, 1 per page":    {Prefix: aws.String("logs/2026/"), Delimiter: aws.String("/"), MaxKeys: aws.Int32(1)},
		"everything, 4 per page":   {MaxKeys: aws.Int32(4)},
		"start-after":              {StartAfter: aws.String("logs/2026/02"), MaxKeys: aws.Int32(3)},
		"url encoding, 2 per page": {Prefix: aws.String("logs/"), EncodingType: types.EncodingTypeUrl, MaxKeys: aws.Int32(2)},
	} {
		gotObjs, gotPrefixes, pages := list(e.s3, in)
		wantObjs, wantPrefixes, wantPages := list(e.cluster.Direct, in)
		if !slices.Equal(gotObjs, wantObjs) || !slices.Equal(gotPrefixes, wantPrefixes) || pages != wantPages {
			t.Errorf("%s: gateway %d objects %d prefixes in %d pages, MinIO %d %d in %d\n%v\n%v",
				name, len(gotObjs), len(gotPrefixes), pages, len(wantObjs), len(wantPrefixes), wantPages, gotObjs, wantObjs)
		}
		if in.MaxKeys != nil && pages < 2 {
			t.Errorf("%s: one page only; the test wants continuation", name)
		}
	}
	// ListObjects (v1) with a marker.
	v1, err := e.s3.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String("bucket-a"), Prefix: aws.String("logs/2026/"), MaxKeys: aws.Int32(5)})
	testutil.Must(t, err)
	if len(v1.Contents) != 5 || !aws.ToBool(v1.IsTruncated) {
		t.Errorf("ListObjects v1: %d objects, truncated %v", len(v1.Contents), aws.ToBool(v1.IsTruncated))
	}
	// HeadBucket and GetBucketLocation pass through.
	if _, err := e.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("bucket-a")}); err != nil {
		t.Errorf("HeadBucket: %v", err)
	}
	if _, err := e.s3.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String("bucket-a")}); err != nil {
		t.Errorf("GetBucketLocation: %v", err)
	}
	attrs, err := e.s3.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String("bucket-a"), Key: aws.String("other/x"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesObjectSize}})
	testutil.Must(t, err)
	if aws.ToInt64(attrs.ObjectSize) != int64(len("other/x")) {
		t.Errorf("GetObjectAttributes: size %d", aws.ToInt64(attrs.ObjectSize))
	}
}

// TestDeleteObjects deletes one object and a batch; reads then fail with
// NoSuchKey even though they were cached.
func TestDeleteObjects(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 8 << 20})
	ctx := context.Background()
	var ids []types.ObjectIdentifier
	for i := 0; i < 12; i++ {
		k := "del/" + strconv.Itoa(i)
		e.put("bucket-a", k, bytes.Repeat([]byte{byte(i)}, chunkSize+i))
		e.mustGet("bucket-a", k, "") // cached now
		if i > 0 {
			ids = append(ids, types.ObjectIdentifier{Key: aws.String(k)})
		}
	}
	_, err := e.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("del/0")})
	testutil.Must(t, err)
	out, err := e.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bucket-a"), Delete: &types.Delete{Objects: ids}})
	testutil.Must(t, err)
	if len(out.Deleted) != 11 || len(out.Errors) != 0 {
		t.Fatalf("DeleteObjects: %d deleted, %d errors", len(out.Deleted), len(out.Errors))
	}
	for i := 0; i < 12; i++ {
		k := "del/" + strconv.Itoa(i)
		if e.existsInS3("bucket-a", k) {
			t.Errorf("%s still in S3", k)
		}
		_, _, err := e.get("bucket-a", k, "")
		wantCode(t, "GET "+k+" after delete", err, "NoSuchKey", http.StatusNotFound)
	}
}

// TestOverwriteIsNeverStale overwrites a cached key again and again, with
// every kind of write the gateway offers, and reads it back each time.
func TestOverwriteIsNeverStale(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 32 << 20})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(9, 10))
	const key = "hot/key.bin"
	b, k := aws.String("bucket-a"), aws.String(key)
	check := func(step string, want []byte) {
		t.Helper()
		// Whole, ranged and HEAD, twice (the second from the page cache).
		for i := 0; i < 2; i++ {
			if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, want) {
				t.Fatalf("%s: read %d returned stale or wrong bytes (%d, want %d)", step, i, len(got), len(want))
			}
			if got := e.mustGet("bucket-a", key, "bytes=-1000"); !bytes.Equal(got, want[len(want)-1000:]) {
				t.Fatalf("%s: suffix read %d is stale", step, i)
			}
		}
		head, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: k})
		testutil.Must(t, err)
		direct, err := e.cluster.Direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: k})
		testutil.Must(t, err)
		if aws.ToString(head.ETag) != aws.ToString(direct.ETag) || aws.ToInt64(head.ContentLength) != int64(len(want)) {
			t.Fatalf("%s: HEAD says %s/%d, S3 %s", step, aws.ToString(head.ETag), aws.ToInt64(head.ContentLength), aws.ToString(direct.ETag))
		}
	}
	for round := 0; round < 3; round++ {
		// Same size every time: only the version tells them apart.
		v := testutil.RandomBytes(r, 3*chunkSize+77)
		e.put("bucket-a", key, v)
		check(fmt.Sprintf("round %d PutObject", round), v)

		v = testutil.RandomBytes(r, 3*chunkSize+77)
		e.put("bucket-a", "hot/src", v)
		_, err := e.s3.CopyObject(ctx, &s3.CopyObjectInput{Bucket: b, Key: k, CopySource: aws.String("bucket-a/hot/src")})
		testutil.Must(t, err)
		check(fmt.Sprintf("round %d CopyObject", round), v)

		v = testutil.RandomBytes(r, 3*chunkSize+77)
		mp, err := e.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: k})
		testutil.Must(t, err)
		up, err := e.s3.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: mp.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(v)})
		testutil.Must(t, err)
		_, err = e.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
				{PartNumber: aws.Int32(1), ETag: up.ETag, ChecksumCRC32: up.ChecksumCRC32}}}})
		testutil.Must(t, err)
		check(fmt.Sprintf("round %d CompleteMultipartUpload", round), v)

		_, err = e.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: k})
		testutil.Must(t, err)
		_, _, err = e.get("bucket-a", key, "")
		wantCode(t, fmt.Sprintf("round %d after DeleteObject", round), err, "NoSuchKey", http.StatusNotFound)
	}
}

// TestErrorCodes checks the S3 error codes clients rely on.
func TestErrorCodes(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.cluster.PutDirect("bucket-b", "theirs", []byte("team-b's data"))
	getErr := func(c *s3.Client, bucket, key string) error {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err == nil {
			out.Body.Close()
		}
		return err
	}
	wantCode(t, "missing key", getErr(e.s3, "bucket-a", "missing"), "NoSuchKey", http.StatusNotFound)
	wantCode(t, "missing bucket (allowed)", getErr(e.s3, "ghost-bucket", "k"), "NoSuchBucket", http.StatusNotFound)
	_, err := e.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("ghost-bucket")})
	wantCode(t, "list a missing bucket", err, "NoSuchBucket", http.StatusNotFound)
	wantCode(t, "bucket of another tenant", getErr(e.s3, "bucket-b", "theirs"), "AccessDenied", http.StatusForbidden)
	_, err = e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-b"), Key: aws.String("x"), Body: strings.NewReader("x")})
	wantCode(t, "put to another tenant's bucket", err, "AccessDenied", http.StatusForbidden)
	_, err = e.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bucket-b")})
	wantCode(t, "list another tenant's bucket", err, "AccessDenied", http.StatusForbidden)
	_, err = e.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bucket-b"),
		Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("theirs")}}}})
	wantCode(t, "batch delete in another tenant's bucket", err, "AccessDenied", http.StatusForbidden)
	if !e.existsInS3("bucket-b", "theirs") {
		t.Error("team-b's object is gone")
	}

	wrong := testutil.S3Client(e.srv.URL(), accessKey, "not-the-secret")
	wantCode(t, "wrong secret", getErr(wrong, "bucket-a", "missing"), "SignatureDoesNotMatch", http.StatusForbidden)
	_, err = wrong.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("forged"), Body: strings.NewReader("x")})
	wantCode(t, "put with the wrong secret", err, "SignatureDoesNotMatch", http.StatusForbidden)
	if e.existsInS3("bucket-a", "forged") {
		t.Error("a forged PUT reached S3")
	}
	unknown := testutil.S3Client(e.srv.URL(), "NOSUCHKEY", secretKey)
	wantCode(t, "unknown access key", getErr(unknown, "bucket-a", "missing"), "InvalidAccessKeyId", http.StatusForbidden)

	// MinIO's own credentials are not the gateway's.
	minioCreds := testutil.S3Client(e.srv.URL(), e.cluster.MinIO.AccessKey, e.cluster.MinIO.SecretKey)
	wantCode(t, "S3 credentials", getErr(minioCreds, "bucket-a", "missing"), "InvalidAccessKeyId", http.StatusForbidden)

	_, err = e.s3.ListBuckets(ctx, &s3.ListBucketsInput{})
	wantCode(t, "ListBuckets", err, "NotImplemented", http.StatusNotImplemented)
	_, err = e.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("new-bucket")})
	wantCode(t, "CreateBucket", err, "NotImplemented", http.StatusNotImplemented)
	_, err = e.s3.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String("bucket-a"), Key: aws.String("k"), ACL: types.ObjectCannedACLPrivate})
	wantCode(t, "PutObjectAcl", err, "NotImplemented", http.StatusNotImplemented)
	// Tags are S3's to keep (TestObjectTaggingGoesToS3), here its 404.
	_, err = e.s3.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String("bucket-a"), Key: aws.String("k"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}}})
	wantCode(t, "PutObjectTagging of a missing key", err, "NoSuchKey", http.StatusNotFound)
	// A part of an object is S3's to answer (TestPartAndVersionReadsGoToS3), here its 404.
	_, err = e.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("k"), PartNumber: aws.Int32(1)})
	wantCode(t, "GetObject partNumber of a missing key", err, "NoSuchKey", http.StatusNotFound)

	// Unsigned requests, virtual-hosted style, and the shape of an error.
	resp, err := http.Get(e.srv.URL() + "/bucket-a/missing")
	testutil.Must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || xmlCode(body) != "AccessDenied" {
		t.Errorf("anonymous GET: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL()+"/missing", nil)
	req.Host = "bucket-a.localhost"
	vh := signedDo(t, req, nil, accessKey, secretKey)
	if vh.status != http.StatusBadRequest || xmlCode(vh.body) != "InvalidRequest" || !strings.Contains(string(vh.body), "path-style") {
		t.Errorf("virtual-hosted GET: %d %s", vh.status, vh.body)
	}
	req, _ = http.NewRequest(http.MethodGet, e.srv.URL()+"/bucket-a/missing", nil)
	nsk := signedDo(t, req, nil, accessKey, secretKey)
	var doc struct {
		Code, Message, Resource, RequestId string
	}
	if err := xmlUnmarshal(nsk.body, &doc); err != nil || doc.Code != "NoSuchKey" || doc.Resource != "/bucket-a/missing" ||
		doc.RequestId == "" || doc.RequestId != nsk.header.Get("X-Amz-Request-Id") || doc.Message == "" {
		t.Errorf("NoSuchKey document %+v (%v), x-amz-request-id %q", doc, err, nsk.header.Get("X-Amz-Request-Id"))
	}
}

// Object tags are S3's: PutObjectTagging, GetObjectTagging and
// DeleteObjectTagging go through to S3, and change nothing the cache keeps
// (reading the object stays a hit). A WriteBack key's tags are refused
// (S3 may not have the key yet), and refusing a DeleteObjectTagging
// deletes nothing.
func TestObjectTaggingGoesToS3(t *testing.T) {
	e := newEnv(t, envOptions{tenants: drainTenants})
	ctx := context.Background()
	data := testutil.SeededBytes(5, 2*chunkSize+3)
	const key = "plain/tagged"
	e.put("bucket-a", key, data)
	b, k := aws.String("bucket-a"), aws.String(key)
	tagsOf := func(c *s3.Client) string {
		t.Helper()
		out, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: k})
		testutil.Must(t, err)
		var kv []string
		for _, tag := range out.TagSet {
			kv = append(kv, aws.ToString(tag.Key)+"="+aws.ToString(tag.Value))
		}
		slices.Sort(kv)
		return fmt.Sprint(kv)
	}

	_, err := e.s3.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: k, Tagging: &types.Tagging{TagSet: []types.Tag{
		{Key: aws.String("team"), Value: aws.String("a")}, {Key: aws.String("tier"), Value: aws.String("hot")}}}})
	testutil.Must(t, err)
	if direct, through := tagsOf(e.cluster.Direct), tagsOf(e.s3); direct != "[team=a tier=hot]" || through != direct {
		t.Errorf("tags in MinIO %s, through the gateway %s; want [team=a tier=hot]", direct, through)
	}
	getsBefore := nodecluster.Gather(t, e.cluster.S3Registry, "distcache_s3_requests_total", map[string]string{"op": "get"})
	if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, data) {
		t.Fatal("the tagged object reads back other bytes")
	}
	if gets := nodecluster.Gather(t, e.cluster.S3Registry, "distcache_s3_requests_total", map[string]string{"op": "get"}) - getsBefore; gets != 0 {
		t.Errorf("reading the object after tagging it made %v S3 GETs, want 0 (its chunks stay cached)", gets)
	}
	_, err = e.s3.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: b, Key: k})
	testutil.Must(t, err)
	if direct, through := tagsOf(e.cluster.Direct), tagsOf(e.s3); direct != "[]" || through != "[]" {
		t.Errorf("after DeleteObjectTagging: tags in MinIO %s, through the gateway %s; want none", direct, through)
	}
	if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, data) {
		t.Fatal("the object reads back other bytes after its tags were deleted")
	}

	// A WriteBack key (drainTenants: wb/).
	held := testutil.SeededBytes(6, 1000)
	e.put("bucket-a", "wb/tagged", held)
	hk := aws.String("wb/tagged")
	_, err = e.s3.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: hk, Tagging: &types.Tagging{TagSet: []types.Tag{
		{Key: aws.String("team"), Value: aws.String("a")}}}})
	wantCode(t, "PutObjectTagging of a WriteBack key", err, "NotImplemented", http.StatusNotImplemented)
	_, err = e.s3.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: hk})
	wantCode(t, "GetObjectTagging of a WriteBack key", err, "NotImplemented", http.StatusNotImplemented)
	_, err = e.s3.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: b, Key: hk})
	wantCode(t, "DeleteObjectTagging of a WriteBack key", err, "NotImplemented", http.StatusNotImplemented)
	if got := e.mustGet("bucket-a", "wb/tagged", ""); !bytes.Equal(got, held) {
		t.Fatal("the WriteBack key reads back other bytes after its tagging was refused")
	}
}

// headChecksum is a HeadObject answer's checksum and its type, "" when none.
func headChecksum(h *s3.HeadObjectOutput) string {
	return checksumString(h.ChecksumCRC32, h.ChecksumCRC32C, h.ChecksumCRC64NVME, h.ChecksumSHA1, h.ChecksumSHA256, h.ChecksumType)
}

// checksumString writes the checksum fields of an answer ("" when none).
func checksumString(crc32, crc32c, crc64nvme, sha1, sha256 *string, typ types.ChecksumType) string {
	var b strings.Builder
	for _, c := range []struct {
		name string
		v    *string
	}{{"crc32", crc32}, {"crc32c", crc32c}, {"crc64nvme", crc64nvme}, {"sha1", sha1}, {"sha256", sha256}} {
		if c.v != nil {
			fmt.Fprintf(&b, "%s=%s ", c.name, *c.v)
		}
	}
	if b.Len() > 0 || typ != "" {
		fmt.Fprintf(&b, "type=%s", typ)
	}
	return b.String()
}
