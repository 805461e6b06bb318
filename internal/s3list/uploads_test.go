package s3list

import (
	"fmt"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
)

func uploadsOf(p *UploadsPage) string {
	var out []string
	for _, u := range p.Uploads {
		out = append(out, u.Key+"@"+u.UploadID)
	}
	for _, cp := range p.CommonPrefixes {
		out = append(out, cp.Prefix+"/")
	}
	s := strings.Join(out, " ")
	if p.IsTruncated {
		s += fmt.Sprintf(" | next %s@%s", p.NextKeyMarker, p.NextUploadIDMarker)
	}
	return s
}

func TestMergeUploads(t *testing.T) {
	up := func(key, id string) Upload {
		return Upload{Key: key, UploadID: id, Initiated: "2026-01-01T00:00:00.000Z"}
	}
	held := []Upload{up("b", "distcache-1"), up("c", "distcache-2"), up("c", "distcache-3"), up("dir/x", "distcache-4"), up("z", "distcache-5")}
	for _, tt := range []struct {
		name string
		s3   UploadsPage
		q    UploadsRequest
		want string
	}{
		{"a key's held uploads after S3's", UploadsPage{Uploads: []Upload{up("a", "s3-1"), up("c", "s3-2")}}, UploadsRequest{},
			"a@s3-1 b@distcache-1 c@s3-2 c@distcache-2 c@distcache-3 dir/x@distcache-4 z@distcache-5"},
		{"cut at max-uploads", UploadsPage{Uploads: []Upload{up("a", "s3-1"), up("c", "s3-2")}}, UploadsRequest{MaxUploads: 4},
			"a@s3-1 b@distcache-1 c@s3-2 c@distcache-2 | next c@distcache-2"},
		{"after a held marker", UploadsPage{}, UploadsRequest{KeyMarker: "c", UploadIDMarker: "distcache-2"},
			"c@distcache-3 dir/x@distcache-4 z@distcache-5"},
		{"after an S3 marker of a key", UploadsPage{}, UploadsRequest{KeyMarker: "c", UploadIDMarker: "s3-2"},
			"c@distcache-2 c@distcache-3 dir/x@distcache-4 z@distcache-5"},
		{"after a key marker", UploadsPage{}, UploadsRequest{KeyMarker: "c"},
			"dir/x@distcache-4 z@distcache-5"},
		{"under a prefix", UploadsPage{}, UploadsRequest{Prefix: "c"},
			"c@distcache-2 c@distcache-3"},
		{"S3's next page covers what is past its end", UploadsPage{Uploads: []Upload{up("a", "s3-1"), up("c", "s3-2")}, IsTruncated: true,
			NextKeyMarker: "c", NextUploadIDMarker: "s3-2"}, UploadsRequest{},
			"a@s3-1 b@distcache-1 c@s3-2 c@distcache-2 c@distcache-3 | next c@s3-2"},
		{"common prefixes, one each", UploadsPage{CommonPrefixes: []CommonPrefix{{"dir/"}}}, UploadsRequest{Delimiter: "/"},
			"b@distcache-1 c@distcache-2 c@distcache-3 z@distcache-5 dir//"},
		{"after a common prefix", UploadsPage{}, UploadsRequest{Delimiter: "/", KeyMarker: "dir/"},
			"z@distcache-5"},
		{"an S3 that ignores the markers and max-uploads", UploadsPage{Uploads: []Upload{up("a", "s3-1"), up("c", "s3-3"), up("c", "s3-2")}},
			UploadsRequest{KeyMarker: "c", UploadIDMarker: "s3-2", MaxUploads: 2},
			"c@s3-3 c@distcache-2 | next c@distcache-2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			page := tt.s3
			MergeUploads(&page, tt.q, append([]Upload(nil), held...))
			if got := uploadsOf(&page); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestUploadsPageRoundTrip(t *testing.T) {
	body := []byte(`<?xml version="1.0" encoding="UTF-8"?>
<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker><NextKeyMarker></NextKeyMarker><NextUploadIdMarker></NextUploadIdMarker><Prefix>a%20b</Prefix><MaxUploads>1000</MaxUploads><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated><Upload><Key>a%20b/c</Key><UploadId>x</UploadId><StorageClass>STANDARD</StorageClass><Initiated>2026-01-01T00:00:00.000Z</Initiated></Upload></ListMultipartUploadsResult>`)
	p, err := ParseUploads(body)
	testutil.Must(t, err)
	if p.Prefix != "a b" || len(p.Uploads) != 1 || p.Uploads[0].Key != "a b/c" {
		t.Fatalf("parsed %+v", p)
	}
	out, err := p.Marshal()
	testutil.Must(t, err)
	if !strings.Contains(string(out), "<Key>a%20b%2Fc</Key>") || !strings.Contains(string(out), "<Prefix>a%20b</Prefix>") || p.Uploads[0].Key != "a b/c" {
		t.Errorf("marshalled %s", out)
	}
}
