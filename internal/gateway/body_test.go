package gateway

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"
)

func TestExpectEOF(t *testing.T) {
	if err := expectEOF(strings.NewReader("")); err != nil {
		t.Errorf("empty: %v", err)
	}
	if err := expectEOF(strings.NewReader("x")); err == nil {
		t.Error("extra byte not reported")
	}
	bad := errors.New("bad digest")
	if err := expectEOF(iotest.ErrReader(bad)); !errors.Is(err, bad) { // an empty body failing at its end
		t.Errorf("got %v, want the end-of-body error", err)
	}
}
