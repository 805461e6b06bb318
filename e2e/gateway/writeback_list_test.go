package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// listing is how a listing is asked for: V1 or V2, prefix, delimiter and
// page size.
type listing struct {
	v1                bool
	prefix, delimiter string
	pageSize          int32
}

func (l listing) String() string {
	v := "V2"
	if l.v1 {
		v = "V1"
	}
	return fmt.Sprintf("%s prefix %q delimiter %q max-keys %d", v, l.prefix, l.delimiter, l.pageSize)
}

// listAll pages through a listing with c, as S3 SDK users do: each entry
// "key size etag" or "prefix (prefix)" for a common prefix, in the order
// S3 lists them (pages may end at other places).
func listAll(t *testing.T, c *s3.Client, bucket string, l listing) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	add := func(objects []types.Object, prefixes []types.CommonPrefix) {
		var page []string
		for _, o := range objects {
			page = append(page, fmt.Sprintf("%s %d %s", aws.ToString(o.Key), aws.ToInt64(o.Size), aws.ToString(o.ETag)))
		}
		for _, p := range prefixes {
			page = append(page, aws.ToString(p.Prefix)+" (prefix)")
		}
		slices.SortFunc(page, func(a, b string) int {
			a, _, _ = strings.Cut(a, " ")
			b, _, _ = strings.Cut(b, " ")
			return strings.Compare(a, b)
		})
		out = append(out, page...)
	}
	delimiter := aws.String(l.delimiter)
	if l.delimiter == "" {
		delimiter = nil
	}
	if !l.v1 {
		pages := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(l.prefix),
			Delimiter: delimiter, MaxKeys: aws.Int32(l.pageSize)})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			testutil.Must(t, err)
			if len(page.Contents)+len(page.CommonPrefixes) > int(l.pageSize) {
				t.Fatalf("%v: a page of %d entries", l, len(page.Contents)+len(page.CommonPrefixes))
			}
			add(page.Contents, page.CommonPrefixes)
		}
		return out
	}
	in := &s3.ListObjectsInput{Bucket: aws.String(bucket), Prefix: aws.String(l.prefix), Delimiter: delimiter, MaxKeys: aws.Int32(l.pageSize)}
	for range 1000 {
		page, err := c.ListObjects(ctx, in)
		testutil.Must(t, err)
		add(page.Contents, page.CommonPrefixes)
		if !aws.ToBool(page.IsTruncated) {
			return out
		}
		next := aws.ToString(page.NextMarker)
		if next == "" {
			next = aws.ToString(page.Contents[len(page.Contents)-1].Key)
		}
		in.Marker = aws.String(next)
	}
	t.Fatalf("%v: the listing never ends", l)
	return nil
}

// Listings through the cache show held writes before S3 has them, exactly
// as S3 lists them once they are persisted: new keys, overwrites with their
// new size and ETag, and no deleted key (by DELETE or DeleteObjects), for
// ListObjects and ListObjectsV2, every page size, with and without a
// delimiter; transient keys are listed although S3 never gets them.
func TestWriteBackListingIsWhatS3WillList(t *testing.T) {
	writer := newEnv(t, envOptions{tenants: heldTenants})
	reader := gatewayOn(t, writer.cluster, envOptions{})
	r := testutil.NewRand(73)
	ctx := context.Background()

	// What S3 has before: keys under the write-back prefix and beside it.
	var inS3 []string
	for i := range 12 {
		key := fmt.Sprintf("wb/dir-%d/old-%d", i%3, i)
		if i%4 == 0 {
			key = fmt.Sprintf("wb/old-%d", i)
		}
		inS3 = append(inS3, key)
		writer.cluster.PutDirect("bucket-a", key, testutil.RandomBytes(r, 100+i))
	}
	writer.cluster.PutDirect("bucket-a", "wa-plain", []byte("beside the write-back prefix"))
	writer.cluster.PutDirect("bucket-a", "wb-plain", []byte("beside it too"))

	// S3 refuses every write, DeleteObjects (POST) included: a batch of
	// held keys is the cache's to delete.
	writer.cluster.Proxy.Inject(s3proxy.Rule{Method: "PUT", Fault: s3proxy.InternalError},
		s3proxy.Rule{Method: "DELETE", Fault: s3proxy.InternalError}, s3proxy.Rule{Method: "POST", Fault: s3proxy.InternalError})
	for i := range 10 { // new keys, some in new directories
		writer.put("bucket-a", fmt.Sprintf("wb/dir-%d/new-%d", i%5, i), testutil.RandomBytes(r, 50+i))
	}
	writer.put("bucket-a", inS3[1], testutil.RandomBytes(r, 7)) // overwrites
	writer.put("bucket-a", inS3[4], testutil.RandomBytes(r, 9))
	for _, key := range []string{inS3[2], inS3[8], "wb/dir-4/new-4"} { // deletes of S3's and of held keys
		_, err := writer.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
		testutil.Must(t, err)
	}
	// dir-2 loses every key S3 has there and its held one: the directory
	// must leave the listing.
	var batch []types.ObjectIdentifier
	for _, key := range append(slices.Clone(inS3), "wb/dir-2/new-2", "wb/dir-2/new-7") {
		if strings.HasPrefix(key, "wb/dir-2/") && key != inS3[2] && key != inS3[8] {
			batch = append(batch, types.ObjectIdentifier{Key: aws.String(key)})
		}
	}
	out, err := writer.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bucket-a"), Delete: &types.Delete{Objects: batch}})
	testutil.Must(t, err)
	if len(out.Errors) != 0 {
		t.Fatalf("DeleteObjects: %v", out.Errors)
	}
	transient := map[string]int{"tmp/spill-a": 30, "tmp/deeper/spill-b": 31}
	for key, size := range transient {
		writer.put("bucket-a", key, testutil.RandomBytes(r, size))
	}

	var listings []listing
	for _, v1 := range []bool{false, true} {
		for _, prefix := range []string{"wb/", "wb/dir-", "wb/dir-2/", "w"} {
			for _, delimiter := range []string{"", "/"} {
				for _, size := range []int32{1, 3, 1000} {
					listings = append(listings, listing{v1, prefix, delimiter, size})
				}
			}
		}
	}
	before := map[listing][]string{}
	for _, l := range listings {
		before[l] = listAll(t, reader.s3, "bucket-a", l)
	}
	whole := listing{prefix: "wb/", pageSize: 1000}
	if slices.Equal(before[whole], listAll(t, writer.cluster.Direct, "bucket-a", whole)) {
		t.Fatal("MinIO lists what the cache lists before persistence: the writes were not held")
	}
	tmp := listAll(t, reader.s3, "bucket-a", listing{prefix: "tmp/", pageSize: 1})
	if len(tmp) != len(transient) || !strings.HasPrefix(tmp[0], "tmp/deeper/spill-b 31 ") || !strings.HasPrefix(tmp[1], "tmp/spill-a 30 ") {
		t.Fatalf("transient keys listed as %v", tmp)
	}

	writer.cluster.Proxy.ClearFaults()
	testutil.WaitFor(t, "MinIO lists what the cache listed", func() bool {
		return slices.Equal(listAll(t, writer.cluster.Direct, "bucket-a", whole), before[whole])
	})
	for _, l := range listings {
		if got := listAll(t, writer.cluster.Direct, "bucket-a", l); !slices.Equal(got, before[l]) {
			t.Errorf("%v: the cache listed before persistence\n%v\nMinIO lists after it\n%v", l, before[l], got)
		}
	}
	if got := listAll(t, writer.cluster.Direct, "bucket-a", listing{prefix: "tmp/", pageSize: 1000}); len(got) != 0 {
		t.Fatalf("transient keys reached MinIO: %v", got)
	}
}
