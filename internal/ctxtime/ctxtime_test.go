package ctxtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepWaitsOutTheDuration(t *testing.T) {
	start := time.Now()
	if err := Sleep(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Fatalf("Sleep returned after %v, before the 20ms were up", waited)
	}
}

func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with an ended context = %v, want context.Canceled", err)
	}
}

func TestSleepOfNothingReturnsNil(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{0, -time.Second} {
		if err := Sleep(ctx, d); err != nil {
			t.Errorf("Sleep(%v) = %v, want nil even with the context ended", d, err)
		}
	}
}

func TestEveryCallsUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() {
			if calls++; calls == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Every still running a minute after its context ended")
	}
	if calls != 3 {
		t.Fatalf("fn called %d times; want 3 (the context ended in the third)", calls)
	}
}
