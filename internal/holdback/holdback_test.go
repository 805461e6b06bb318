package holdback

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

// failAtEOF is a body like the ones sigv4 installs: every byte, then an
// integrity error instead of io.EOF.
type failAtEOF struct {
	r   io.Reader
	err error
}

func (f *failAtEOF) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func TestHoldBackDeliversEverythingOnCleanEOF(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 2, 100, 32 << 10, 32<<10 + 1, 200<<10 + 7} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(r.IntN(256))
		}
		for name, src := range map[string]io.Reader{
			"plain":    bytes.NewReader(data),
			"one-byte": iotest.OneByteReader(bytes.NewReader(data)),
			"data-eof": iotest.DataErrReader(bytes.NewReader(data)),
		} {
			got, err := io.ReadAll(New(src))
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("%d bytes, %s: got %d bytes, err %v", size, name, len(got), err)
			}
		}
		if err := iotest.TestReader(New(bytes.NewReader(data)), data); err != nil {
			t.Errorf("%d bytes: %v", size, err)
		}
	}
}

// TestHoldBackWithholdsTheLastByteOfABadBody is why Reader exists: an
// HTTP client copying Content-Length bytes must not get them all when the
// body then fails verification.
func TestHoldBackWithholdsTheLastByteOfABadBody(t *testing.T) {
	bad := errors.New("BadDigest")
	for _, size := range []int{1, 5, 64 << 10} {
		data := bytes.Repeat([]byte{'x'}, size)
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"plain": func(r io.Reader) io.Reader { return r }, "one-byte": iotest.OneByteReader,
		} {
			h := New(wrap(&failAtEOF{r: bytes.NewReader(data), err: bad}))
			got, err := io.ReadAll(io.LimitReader(h, int64(size)))
			if len(got) != size-1 {
				t.Errorf("%d bytes, %s: the reader handed out %d bytes before the end was verified", size, name, len(got))
			}
			if !errors.Is(err, bad) {
				t.Errorf("%d bytes, %s: err %v, want the verification error", size, name, err)
			}
		}
	}
	// Without Reader, the same copy sees every byte and no error: the
	// failure the test guards against.
	got, err := io.ReadAll(io.LimitReader(&failAtEOF{r: strings.NewReader("abc"), err: bad}, 3))
	if len(got) != 3 || err != nil {
		t.Fatalf("premise: got %d bytes, %v", len(got), err)
	}
}
