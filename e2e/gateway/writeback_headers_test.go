package gateway_test

//lint:file-ignore SA1019 feature/s3/manager's Uploader and Downloader are what aws-sdk-go-v2 users run; its successor, transfermanager, is v0.x

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// objectHeaders are the stored headers an S3 answer gives, as one string
// to compare (user metadata sorted by fmt).
func objectHeaders(cacheControl, disposition, language, expires *string, md map[string]string) string {
	return fmt.Sprintf("Cache-Control=%q Content-Disposition=%q Content-Language=%q Expires=%q metadata=%v",
		aws.ToString(cacheControl), aws.ToString(disposition), aws.ToString(language), aws.ToString(expires), md)
}

// A WriteBack key keeps the headers S3 stores (user metadata,
// Cache-Control, ...) with the held version: another gateway reads them
// before S3 has the object, S3 gets them with it (single PUT and multipart
// upload), and what the gateways answer before and after is what S3
// answers. Metadata S3 would refuse is refused at once, not acknowledged.
func TestWriteBackKeepsStoredHeaders(t *testing.T) {
	writer := newEnv(t, envOptions{tenants: heldTenants, pageCache: 8 << 20})
	reader := gatewayOn(t, writer.cluster, envOptions{})
	ctx := context.Background()
	r := testutil.NewRand(91)
	expires := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	small, large := testutil.RandomBytes(r, 10<<10), testutil.RandomBytes(r, 11<<20)

	writer.cluster.Proxy.Inject(s3proxy.Rule{Method: "PUT", Fault: s3proxy.InternalError},
		s3proxy.Rule{Method: "POST", Fault: s3proxy.InternalError})
	_, err := writer.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/headers/small"),
		Body: bytes.NewReader(small), ContentType: aws.String("text/csv"), Metadata: map[string]string{"owner": "team-a", "batch": "7"},
		CacheControl: aws.String("max-age=60"), ContentDisposition: aws.String(`attachment; filename="s.csv"`),
		ContentLanguage: aws.String("de"), Expires: &expires})
	testutil.Must(t, err)
	up := manager.NewUploader(writer.s3, func(u *manager.Uploader) { u.PartSize = 5 << 20 })
	_, err = up.Upload(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/headers/large"),
		Body: bytes.NewReader(large), Metadata: map[string]string{"owner": "team-b"}, CacheControl: aws.String("no-store")})
	testutil.Must(t, err)

	// What another gateway answers, while S3 refuses every write.
	answered := func(key string) string {
		t.Helper()
		h, err := reader.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
		testutil.Must(t, err)
		g, err := reader.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
		testutil.Must(t, err)
		_, err = io.Copy(io.Discard, g.Body)
		g.Body.Close()
		testutil.Must(t, err)
		head := objectHeaders(h.CacheControl, h.ContentDisposition, h.ContentLanguage, h.ExpiresString, h.Metadata)
		if get := objectHeaders(g.CacheControl, g.ContentDisposition, g.ContentLanguage, g.ExpiresString, g.Metadata); get != head {
			t.Errorf("%s: GET answers %s, HEAD %s", key, get, head)
		}
		return head
	}
	before := map[string]string{}
	for key, want := range map[string]string{"wb/headers/small": "owner:team-a", "wb/headers/large": "owner:team-b"} {
		if got := inMinIO(t, writer, key); got != nil {
			t.Fatalf("%s reached MinIO while it refused writes", key)
		}
		before[key] = answered(key)
		if !strings.Contains(before[key], want) || !strings.Contains(before[key], "distcache-version:") {
			t.Errorf("%s before S3 has it: %s, want its metadata (%s) and the cache's version", key, before[key], want)
		}
	}
	// GetObjectAttributes of a held version: from the cache, as S3 will.
	attrs, err := reader.s3.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/headers/large"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesObjectSize,
			types.ObjectAttributesStorageClass, types.ObjectAttributesObjectParts}})
	testutil.Must(t, err)
	if aws.ToString(attrs.ETag) != strings.Trim(multipartETag(large, 5<<20), `"`) || aws.ToInt64(attrs.ObjectSize) != int64(len(large)) ||
		attrs.StorageClass != types.StorageClassStandard || attrs.ObjectParts == nil || aws.ToInt32(attrs.ObjectParts.TotalPartsCount) != 3 {
		t.Errorf("attributes of the held large object: ETag %s, size %d, class %s, parts %+v", aws.ToString(attrs.ETag),
			aws.ToInt64(attrs.ObjectSize), attrs.StorageClass, attrs.ObjectParts)
	}
	if !strings.Contains(before["wb/headers/small"], `Cache-Control="max-age=60" Content-Disposition="attachment; filename=\"s.csv\"" Content-Language="de" Expires="Tue, 06 May 2031 07:08:09 GMT"`) {
		t.Errorf("small before S3 has it: %s", before["wb/headers/small"])
	}

	writer.cluster.Proxy.ClearFaults()
	for key, body := range map[string][]byte{"wb/headers/small": small, "wb/headers/large": large} {
		testutil.WaitFor(t, key+" in MinIO", func() bool { return bytes.Equal(inMinIO(t, writer, key), body) })
		h, err := writer.cluster.Direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
		testutil.Must(t, err)
		if got := objectHeaders(h.CacheControl, h.ContentDisposition, h.ContentLanguage, h.ExpiresString, h.Metadata); got != before[key] {
			t.Errorf("%s: S3 has %s, the gateways answered %s before", key, got, before[key])
		}
		if after := answered(key); after != before[key] {
			t.Errorf("%s after persistence: %s, before %s", key, after, before[key])
		}
	}

	// Once S3 has it, S3 answers: the same.
	after, err := reader.s3.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/headers/large"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesObjectSize}})
	testutil.Must(t, err)
	if aws.ToString(after.ETag) != aws.ToString(attrs.ETag) || aws.ToInt64(after.ObjectSize) != aws.ToInt64(attrs.ObjectSize) {
		t.Errorf("attributes from S3: ETag %s, size %d; from the cache before: %s, %d", aws.ToString(after.ETag), aws.ToInt64(after.ObjectSize),
			aws.ToString(attrs.ETag), aws.ToInt64(attrs.ObjectSize))
	}

	// Refused as S3 would refuse it, or because the cache could not keep it.
	_, err = writer.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/headers/too-much"),
		Body: strings.NewReader("x"), Metadata: map[string]string{"big": strings.Repeat("v", 2040)}})
	wantCode(t, "2 KiB of user metadata", err, "MetadataTooLarge", 400)
	// The cache's own version mark, as a client copying an object's
	// metadata sends it back, is replaced by the new version's.
	_, err = writer.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/headers/theirs"),
		Body: strings.NewReader("x"), Metadata: map[string]string{"distcache-version": "1", "mine": "kept"}})
	testutil.Must(t, err)
	theirs, err := reader.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/headers/theirs")})
	testutil.Must(t, err)
	if md := theirs.Metadata; md["mine"] != "kept" || md["distcache-version"] == "1" || md["distcache-version"] == "" {
		t.Errorf("a held write sent with distcache-version 1 is answered with metadata %v, want its own version and mine=kept", md)
	}
	// A declared checksum is checked as the body comes, by the gateway and
	// by the node that holds it; the held version keeps it, answers it to
	// checksum mode before S3 has it, and S3 gets and keeps it.
	body := []byte("checked")
	_, err = writer.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/headers/crc32"),
		Body: bytes.NewReader(body), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	testutil.Must(t, err)
	withMode := &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/headers/crc32"), ChecksumMode: types.ChecksumModeEnabled}
	held, err := reader.s3.HeadObject(ctx, withMode)
	testutil.Must(t, err)
	crc := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(body)))
	if c, want := headChecksum(held), "crc32="+crc+" type=FULL_OBJECT"; c != want {
		t.Errorf("a held version is answered with checksum %q, want %q", c, want)
	}
	attributes := func(c *s3.Client) string {
		t.Helper()
		a, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/headers/crc32"),
			ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesChecksum, types.ObjectAttributesEtag}})
		testutil.Must(t, err)
		if a.Checksum == nil {
			return "none"
		}
		return checksumString(a.Checksum.ChecksumCRC32, a.Checksum.ChecksumCRC32C, a.Checksum.ChecksumCRC64NVME,
			a.Checksum.ChecksumSHA1, a.Checksum.ChecksumSHA256, a.Checksum.ChecksumType)
	}
	heldAttributes := attributes(reader.s3)
	if heldAttributes != headChecksum(held) {
		t.Errorf("GetObjectAttributes of the held version answers checksum %q, HEAD %q", heldAttributes, headChecksum(held))
	}
	testutil.WaitFor(t, "wb/headers/crc32 in MinIO", func() bool { return bytes.Equal(inMinIO(t, writer, "wb/headers/crc32"), body) })
	if s3Attributes := attributes(writer.cluster.Direct); s3Attributes != heldAttributes {
		t.Errorf("GetObjectAttributes: S3 answers checksum %q, the cache answered %q before", s3Attributes, heldAttributes)
	}
	direct, err := writer.cluster.Direct.HeadObject(ctx, withMode)
	testutil.Must(t, err)
	persisted, err := reader.s3.HeadObject(ctx, withMode)
	testutil.Must(t, err)
	if c, d := headChecksum(persisted), headChecksum(direct); c != d || d != headChecksum(held) {
		t.Errorf("once persisted, the gateway answers checksum %q, S3 %q; before %q", c, d, headChecksum(held))
	}
	// S3 might refuse a storage class only once the version is persisted.
	_, err = writer.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/headers/rrs"),
		Body: strings.NewReader("x"), StorageClass: types.StorageClassReducedRedundancy})
	wantCode(t, "a storage class on a held key", err, "NotImplemented", http.StatusNotImplemented)
	if err != nil && !strings.Contains(err.Error(), "storage class") {
		t.Errorf("the refusal does not name the storage class: %v", err)
	}
	for _, key := range []string{"wb/headers/too-much", "wb/headers/rrs"} {
		if _, _, err := reader.get("bucket-a", key, ""); !isNoSuchKey(err) {
			t.Errorf("%s after its refusal: %v, want NoSuchKey", key, err)
		}
	}
}

// A node checks the checksum declared for a held write itself (a writer
// with a tenant certificate reaches it without a gateway): one that does not
// match is refused with BadDigest and nothing is held; one that is no
// checksum is refused before the body is read.
func TestHeldWriteChecksumIsCheckedByTheNode(t *testing.T) {
	e := newEnv(t, envOptions{tenants: heldTenants})
	cl := e.cluster.HTTPClient(pki.Identity{Kind: pki.KindTenant, Name: "team-a"})
	body := []byte("held body")
	crc := func(b []byte) string {
		return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(b)))
	}
	put := func(key, checksum string) (int, string) {
		t.Helper()
		// The key's metadata owner takes its held writes.
		o := chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: key}
		owner := e.cluster.Member(0).Ring.Load().Candidates(nodeapi.MetaID(o), 0)[0].Name
		i := slices.IndexFunc(e.cluster.Members(), func(m *nodecluster.Member) bool { return m.Name == owner })
		req, err := http.NewRequest(http.MethodPut, "https://"+e.cluster.Member(i).Addr+nodeapi.ObjectPath("bucket-a", key), bytes.NewReader(body))
		testutil.Must(t, err)
		req.Header.Set(nodeapi.HeaderStoredPrefix+"X-Amz-Checksum-Crc32", checksum)
		resp, err := cl.Do(req)
		testutil.Must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status, answer := resp.StatusCode, string(b)
		return status, answer
	}
	for _, tc := range []struct {
		name, checksum, code string
		status               int
	}{
		{"mismatch", crc([]byte("other body")), "BadDigest", http.StatusBadRequest},
		{"not a checksum", "AAAA", "InvalidRequest", http.StatusBadRequest},
		{"match", crc(body), "", http.StatusOK},
	} {
		key := "wb/node-checked/" + strings.ReplaceAll(tc.name, " ", "-")
		status, answer := put(key, tc.checksum)
		if status != tc.status || !strings.Contains(answer, tc.code) {
			t.Errorf("%s: HTTP %d %s, want %d %s", tc.name, status, answer, tc.status, tc.code)
		}
		_, _, err := e.get("bucket-a", key, "")
		if held := err == nil; held != (tc.status == http.StatusOK) {
			t.Errorf("%s: held after the answer: %v (%v)", tc.name, held, err)
		}
	}
}
