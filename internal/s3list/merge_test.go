package s3list

import (
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
)

// bucket is a model of S3's listing over a set of keys, as S3 and MinIO
// list: entries (keys, or common prefixes rolling them up) after the
// start-after position, sorted, at most max of them.
type bucket map[string]bool

func (b bucket) list(q Request) *Page {
	isPrefix := map[string]bool{}
	var entries []string
	for k := range b {
		if !strings.HasPrefix(k, q.Prefix) {
			continue
		}
		e, prefix := entryOf(q.Prefix, q.Delimiter, k)
		if _, seen := isPrefix[e]; e > q.After && !seen {
			isPrefix[e] = prefix
			entries = append(entries, e)
		}
	}
	slices.Sort(entries)
	p := &Page{MaxKeys: q.MaxKeys, Prefix: q.Prefix, Delimiter: q.Delimiter}
	if len(entries) > q.MaxKeys {
		entries, p.IsTruncated = entries[:q.MaxKeys], true
	}
	for _, e := range entries {
		if !isPrefix[e] {
			p.Contents = append(p.Contents, Object{Key: e, ETag: "s3"})
		} else {
			p.CommonPrefixes = append(p.CommonPrefixes, CommonPrefix{e})
		}
	}
	return p
}

// listAll pages through a listing as a client does, each page S3's merged
// with held, resuming where Merge says.
func listAll(t *testing.T, s3 bucket, held []Held, prefix, delim string, max int) []string {
	t.Helper()
	var out []string
	after := ""
	for range 10000 {
		q := Request{Prefix: prefix, Delimiter: delim, MaxKeys: max, After: after}
		page := s3.list(q)
		next, err := Merge(context.Background(), page, q, held, func(_ context.Context, p string, deleted []string) (bool, error) {
			for k := range s3 {
				if strings.HasPrefix(k, p) && !slices.Contains(deleted, k) {
					return true, nil
				}
			}
			return false, nil
		})
		testutil.Must(t, err)
		if len(page.Contents)+len(page.CommonPrefixes) > max {
			t.Fatalf("page of %d entries for max-keys %d", len(page.Contents)+len(page.CommonPrefixes), max)
		}
		var entries []string
		for _, o := range page.Contents {
			entries = append(entries, o.Key+"="+o.ETag)
		}
		for _, p := range page.CommonPrefixes {
			entries = append(entries, p.Prefix+"/")
		}
		slices.SortFunc(entries, func(a, b string) int { return strings.Compare(entryName(a), entryName(b)) })
		out = append(out, entries...)
		if !page.IsTruncated {
			return out
		}
		if next <= after {
			t.Fatalf("listing does not advance: next %q after %q", next, after)
		}
		after = next
	}
	t.Fatal("listing never ends")
	return nil
}

// Paging through S3's listing merged with held versions gives, for every
// prefix, delimiter and page size, what S3 lists once it has applied them.
func TestMergeListsWhatS3WillHold(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 27))
	names := []string{"a", "b", "c", "a/", "a/b", "a/c", "a/b/c", "b/x", "c/", "c/d/e", "d", "dd", "d/d"}
	for round := range 2000 {
		s3, after := bucket{}, bucket{}
		for _, n := range names {
			if rng.IntN(2) == 0 {
				s3[n], after[n] = true, true
			}
		}
		var held []Held
		for _, n := range names {
			switch rng.IntN(4) {
			case 0:
				held = append(held, Held{Object: Object{Key: n, ETag: "held"}})
				after[n] = true
			case 1:
				held = append(held, Held{Object: Object{Key: n}, Deleted: true})
				delete(after, n)
			}
		}
		prefix := []string{"", "a", "a/", "c/", "d"}[rng.IntN(5)]
		delim := []string{"", "/", "d"}[rng.IntN(3)]
		max := 1 + rng.IntN(5)
		var under []Held
		for _, h := range held {
			if strings.HasPrefix(h.Key, prefix) {
				under = append(under, h)
			}
		}
		got := listAll(t, s3, under, prefix, delim, max)
		// What S3 lists once it holds the held versions: with the ETag
		// of whichever side wrote the key last.
		var want []string
		for _, e := range listAll(t, after, nil, prefix, delim, 1000) {
			if k, ok := strings.CutSuffix(e, "=s3"); ok && slices.ContainsFunc(held, func(h Held) bool { return h.Key == k && !h.Deleted }) {
				e = k + "=held"
			}
			want = append(want, e)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: prefix %q delimiter %q max-keys %d, S3 %v, held %v:\n got %v\nwant %v", round, prefix, delim, max, keys(s3), held, got, want)
		}
	}
}

// entryName is the key or prefix an entry of listAll names.
func entryName(e string) string {
	if k, _, ok := strings.Cut(e, "="); ok {
		return k
	}
	return strings.TrimSuffix(e, "/")
}

func keys(b bucket) []string {
	var out []string
	for k := range b {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A token of S3's own resumes at an unknown place: held keys before S3's
// page are not listed again there.
func TestMergeAtForeignToken(t *testing.T) {
	page := &Page{MaxKeys: 10, Contents: []Object{{Key: "m"}, {Key: "p"}}}
	held := []Held{{Object: Object{Key: "a"}}, {Object: Object{Key: "m", ETag: "new"}}, {Object: Object{Key: "z"}}}
	if _, err := Merge(context.Background(), page, Request{MaxKeys: 10, Foreign: true}, held, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range page.Contents {
		got = append(got, o.Key+o.ETag)
	}
	if want := []string{"mnew", "p", "z"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Parse and Marshal keep what clients read, and a url-encoded answer's keys
// are decoded for merging and encoded again.
func TestParseMarshalRoundTrip(t *testing.T) {
	in := `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>a%20b%2F</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys><Delimiter>%2F</Delimiter><IsTruncated>true</IsTruncated><Contents><Key>a%20b%2Fx%2By</Key><LastModified>2026-11-27T10:00:00.000Z</LastModified><ETag>&#34;e&#34;</ETag><Size>3</Size><StorageClass>STANDARD</StorageClass></Contents><CommonPrefixes><Prefix>a%20b%2Fc%2F</Prefix></CommonPrefixes><EncodingType>url</EncodingType><NextContinuationToken>tok</NextContinuationToken></ListBucketResult>`
	p, err := Parse([]byte(in))
	testutil.Must(t, err)
	if !p.V2() || p.Prefix != "a b/" || p.Delimiter != "/" || p.Contents[0].Key != "a b/x+y" || p.Prefixes()[0] != "a b/c/" || p.Contents[0].ETag != `"e"` {
		t.Fatalf("parsed %+v", p)
	}
	out, err := p.Marshal()
	testutil.Must(t, err)
	again, err := Parse(out)
	testutil.Must(t, err)
	if !reflect.DeepEqual(again, p) {
		t.Fatalf("round trip:\n%+v\n%+v", again, p)
	}
	if !strings.Contains(string(out), "<Key>a%20b%2Fx%2By</Key>") {
		t.Fatalf("key not encoded as S3 does: %s", out)
	}
}

func TestToken(t *testing.T) {
	for _, k := range []string{"", "a/b", "ü/\x00"} {
		if got, ok := ParseToken(Token(k)); !ok || got != k {
			t.Fatalf("token of %q reads as %q %v", k, got, ok)
		}
	}
	if _, ok := ParseToken("1VjE3ZXlkS0JFZ2U="); ok {
		t.Fatal("an S3 token read as the cache's")
	}
}
