package s3backend_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"testing"
	"testing/iotest"

	"github.com/distcache/distcache/internal/chunk"
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

// TestCheckDeclaredChecksum: a body with every declared x-amz-checksum
// reads through unchanged; one without any of them gives all but its last
// byte, then a BodyError wrapping ErrChecksumMismatch; a value that is no
// checksum is refused before anything is read.
func TestCheckDeclaredChecksum(t *testing.T) {
	data := testutil.SeededBytes(5, 40<<10)
	crc := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(data)))
	sum := sha256.Sum256(data)
	sha := base64.StdEncoding.EncodeToString(sum[:])
	other := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(data[1:])))
	for name, h := range map[string]chunk.Headers{
		"crc32":          {"X-Amz-Checksum-Crc32": crc},
		"crc32 + sha256": {"X-Amz-Checksum-Crc32": crc, "X-Amz-Checksum-Sha256": sha, "X-Amz-Checksum-Type": "FULL_OBJECT"},
	} {
		r, err := s3backend.CheckDeclaredChecksum(iotest.HalfReader(bytes.NewReader(data)), h)
		testutil.Must(t, err)
		if err := iotest.TestReader(r, data); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, h := range map[string]chunk.Headers{
		"crc32":                {"X-Amz-Checksum-Crc32": other},
		"good sha256, bad crc": {"X-Amz-Checksum-Crc32": other, "X-Amz-Checksum-Sha256": sha},
	} {
		r, err := s3backend.CheckDeclaredChecksum(bytes.NewReader(data), h)
		testutil.Must(t, err)
		got, err := io.ReadAll(io.LimitReader(r, int64(len(data))))
		var be *s3backend.BodyError
		if !errors.Is(err, s3backend.ErrChecksumMismatch) || !errors.As(err, &be) || len(got) >= len(data) {
			t.Errorf("%s: %d bytes, err %v; want fewer than %d, then a BodyError of ErrChecksumMismatch", name, len(got), err, len(data))
		}
	}
	if _, err := s3backend.CheckDeclaredChecksum(bytes.NewReader(data), chunk.Headers{"X-Amz-Checksum-Crc32": "AAAA"}); !errors.Is(err, s3backend.ErrChecksumInvalid) {
		t.Errorf("a 3-byte CRC-32: %v, want ErrChecksumInvalid", err)
	}
	plain := bytes.NewReader(data)
	if r, err := s3backend.CheckDeclaredChecksum(plain, chunk.Headers{"X-Amz-Meta-A": "b"}); r != plain || err != nil {
		t.Error("no checksum declared: want the body as it is")
	}
}
