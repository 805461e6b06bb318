package s3backend_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/testutil"
)

// TestCheckPayloadSHA256: a body with the declared SHA-256 reads through
// unchanged (in reads of any size); one without it gives all but its last
// byte, then a BodyError wrapping ErrPayloadSHA256Mismatch, so a copy of a
// known length never sees the whole of a body that fails.
func TestCheckPayloadSHA256(t *testing.T) {
	for _, size := range []int{1, 2, 100, 40 << 10} {
		data := testutil.SeededBytes(uint64(size), size)
		sum := sha256.Sum256(data)
		good := hex.EncodeToString(sum[:])
		if err := iotest.TestReader(s3backend.CheckPayloadSHA256(bytes.NewReader(data), good), data); err != nil {
			t.Errorf("%d bytes: %v", size, err)
		}
		got, err := io.ReadAll(s3backend.CheckPayloadSHA256(iotest.OneByteReader(bytes.NewReader(data)), good))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%d bytes, one at a time: %d bytes, %v", size, len(got), err)
		}
		bad := sha256.Sum256(append([]byte{1}, data...))
		for name, r := range map[string]io.Reader{"plain": bytes.NewReader(data), "one-byte": iotest.OneByteReader(bytes.NewReader(data))} {
			got, err := io.ReadAll(io.LimitReader(s3backend.CheckPayloadSHA256(r, hex.EncodeToString(bad[:])), int64(size)))
			var be *s3backend.BodyError
			if !errors.Is(err, s3backend.ErrPayloadSHA256Mismatch) || !errors.As(err, &be) {
				t.Errorf("%d bytes, %s: err %v, want a BodyError of ErrPayloadSHA256Mismatch", size, name, err)
			}
			if len(got) >= size {
				t.Errorf("%d bytes, %s: %d bytes handed out before the mismatch", size, name, len(got))
			}
		}
	}
	r := bytes.NewReader([]byte("x"))
	if s3backend.CheckPayloadSHA256(r, "not a sum") != r {
		t.Error("an invalid sum should declare nothing")
	}
}
