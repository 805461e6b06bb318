package chunk

import (
	"maps"
	"net/http"
	"testing"
)

func TestStoredHeaders(t *testing.T) {
	h := http.Header{}
	h.Set("X-Amz-Meta-Owner", "team-a")
	h.Set("Cache-Control", "max-age=60")
	h.Set("Expires", "Thu, 01 Jan 2032 00:00:00 GMT")
	h.Set("X-Amz-Meta-", "no name: not metadata")
	h.Set("Content-Type", "text/plain") // kept apart, in Meta.ContentType
	h.Set("X-Amz-Storage-Class", "STANDARD")
	got := StoredHeaders(h)
	want := Headers{"X-Amz-Meta-Owner": "team-a", "Cache-Control": "max-age=60", "Expires": "Thu, 01 Jan 2032 00:00:00 GMT"}
	if !maps.Equal(got, want) {
		t.Fatalf("StoredHeaders = %v, want %v", got, want)
	}
	if md := got.UserMetadata(); !maps.Equal(md, map[string]string{"owner": "team-a"}) {
		t.Errorf("UserMetadata = %v", md)
	}
	if n := got.UserMetadataSize(); n != len("Owner")+len("team-a") {
		t.Errorf("UserMetadataSize = %d", n)
	}
	back := Headers{"Cache-Control": "max-age=60", "Expires": "Thu, 01 Jan 2032 00:00:00 GMT"}.WithUserMetadata(map[string]string{"owner": "team-a"})
	if !maps.Equal(back, want) {
		t.Errorf("WithUserMetadata = %v, want %v", back, want)
	}
	// S3 names a storage class only when it is not STANDARD.
	class := StoredHeaders(http.Header{"X-Amz-Storage-Class": {"REDUCED_REDUNDANCY"}})
	if !maps.Equal(class, Headers{"X-Amz-Storage-Class": "REDUCED_REDUNDANCY"}) || class.UserMetadataSize() != 0 {
		t.Errorf("StoredHeaders of a storage class = %v", class)
	}
	if StoredHeaders(http.Header{"Content-Type": {"x"}}) != nil {
		t.Error("no stored headers: want nil")
	}
}

func TestChecksumHeaders(t *testing.T) {
	h := StoredHeaders(http.Header{"X-Amz-Checksum-Crc32": {"wMUO7w=="}, "X-Amz-Checksum-Type": {"FULL_OBJECT"},
		"X-Amz-Meta-Owner": {"team-a"}, "X-Amz-Checksum-Algorithm": {"CRC32"}, "X-Amz-Sdk-Checksum-Algorithm": {"CRC32"}})
	want := Headers{"X-Amz-Checksum-Crc32": "wMUO7w==", "X-Amz-Checksum-Type": "FULL_OBJECT", "X-Amz-Meta-Owner": "team-a"}
	if !maps.Equal(h, want) {
		t.Fatalf("StoredHeaders = %v, want %v", h, want)
	}
	if !h.HasChecksum() {
		t.Error("HasChecksum = false")
	}
	without := h.WithoutChecksum()
	if !maps.Equal(without, Headers{"X-Amz-Meta-Owner": "team-a"}) || without.HasChecksum() {
		t.Errorf("WithoutChecksum = %v", without)
	}
	if h["X-Amz-Checksum-Crc32"] == "" {
		t.Error("WithoutChecksum changed the headers it was called on")
	}
	if got := (Headers{"X-Amz-Checksum-Sha256": "x"}).WithoutChecksum(); got != nil {
		t.Errorf("WithoutChecksum of a checksum alone = %v, want nil", got)
	}
	for _, k := range ChecksumHeaders {
		if !IsChecksumHeader(k) || !IsStoredHeader(k) {
			t.Errorf("%s is not a stored checksum header", k)
		}
	}
}
