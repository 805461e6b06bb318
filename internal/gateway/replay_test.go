package gateway

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/distcache/distcache/internal/testutil"
)

// A body read in part by a failed attempt is rewound and sent whole by the
// next one; the client's body is read once, in small pieces as a network
// gives it.
func TestReplayBodyRewindsWhatWasRead(t *testing.T) {
	want := testutil.RandomBytes(rand.New(rand.NewPCG(1, 2)), 100_000)
	b := newReplayBody(iotest.HalfReader(bytes.NewReader(want)), int64(len(want)))

	first := make([]byte, 40_000)
	if _, err := io.ReadFull(b, first); err != nil {
		t.Fatal(err)
	}
	if pos, err := b.Seek(0, io.SeekCurrent); err != nil || pos != 40_000 {
		t.Fatalf("position %d, %v after reading 40000 bytes", pos, err)
	}
	if _, err := b.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(b)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the second attempt read %d bytes (%v), not the body's %d", len(got), err, len(want))
	}
	if b.src.n != int64(len(want)) || !errors.Is(b.src.err, io.EOF) {
		t.Errorf("the client's body gave %d bytes (%v); want each byte once, then EOF", b.src.n, b.src.err)
	}
	if _, err := b.Seek(200_000, io.SeekStart); err == nil {
		t.Error("a seek past what was read succeeded")
	}
}

// A body whose client failed (a signature that did not verify, a cut
// connection) is not sent again: the error reaches the reader, and the
// rewind a retry would need is refused.
func TestReplayBodyDoesNotReplayAFailedBody(t *testing.T) {
	bad := errors.New("XAmzContentSHA256Mismatch")
	b := newReplayBody(io.MultiReader(bytes.NewReader([]byte("partial")), iotest.ErrReader(bad)), 100)
	if _, err := io.ReadAll(b); !errors.Is(err, bad) {
		t.Fatalf("read error %v, want the body's", err)
	}
	if _, err := b.Seek(0, io.SeekStart); !errors.Is(err, errNoReplay) {
		t.Errorf("rewinding a failed body: %v, want errNoReplay", err)
	}
}
