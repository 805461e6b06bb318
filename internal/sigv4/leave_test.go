package sigv4

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestLeavePayloadSHA256: a body whose SHA-256 is left to the caller reads
// to a clean EOF although it is not the body signed, while a declared
// checksum it fails is still refused; a body left alone still fails.
func TestLeavePayloadSHA256(t *testing.T) {
	wrongSum := [32]byte{1}
	body := func(data string, ds digests) *verifyingBody {
		return &verifyingBody{body: io.NopCloser(strings.NewReader(data)), sha: newSHA256(), want: wrongSum, digests: ds}
	}
	checked := body("tampered", nil)
	if _, err := io.ReadAll(checked); !isCode(err, CodeXAmzContentSHA256Mismatch) {
		t.Fatalf("a body left alone: err %v, want the SHA-256 mismatch", err)
	}
	left := body("tampered", nil)
	if !LeavePayloadSHA256(left) {
		t.Fatal("LeavePayloadSHA256 did not take a SHA-256-checking body")
	}
	if got, err := io.ReadAll(left); err != nil || string(got) != "tampered" {
		t.Fatalf("a body left to the caller: %q, %v", got, err)
	}
	r, _ := http.NewRequest(http.MethodPut, "http://x/b/k", nil)
	r.Header.Set("X-Amz-Checksum-Crc32", "AAAAAA==") // not the CRC32 of the body
	ds, e := headerDigests(r, nil)
	if e != nil {
		t.Fatal(e)
	}
	withChecksum := body("tampered", ds)
	LeavePayloadSHA256(withChecksum)
	if _, err := io.ReadAll(withChecksum); !isCode(err, CodeBadDigest) {
		t.Errorf("a declared checksum the body fails: err %v, want BadDigest", err)
	}
	if LeavePayloadSHA256(bytes.NewReader(nil)) || LeavePayloadSHA256(&verifyingBody{body: http.NoBody}) {
		t.Error("LeavePayloadSHA256 took a body that checks no SHA-256")
	}
}

func isCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
