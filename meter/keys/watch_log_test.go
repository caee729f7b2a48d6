package keys

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestWatchFailureLoggedOncePerOutage: while the key buckets' streams are
// gone (NATS back empty, until a meter makes them again), every gateway
// logged "key cache: watch ... stream not found" at WARN once a second for
// each bucket, three lines a second (an operations review: 267 lines on one
// gateway). One line a bucket says so now, and one more when its watch is
// set up again.
func TestWatchFailureLoggedOncePerOutage(t *testing.T) {
	js := metertest.Connect(t, metertest.NewServer(t))
	ctx := context.Background()
	b, err := EnsureBuckets(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{KeysBucket, CustomersBucket, PricesBucket} {
		if err := js.DeleteKeyValue(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	var buf lockedBuf
	c := NewCache(func(context.Context) (Buckets, error) { return b, nil }, nil, slog.New(slog.NewJSONHandler(&buf, nil)))
	sctx, cancel := context.WithTimeout(ctx, 3500*time.Millisecond) // three retries at least
	_ = c.Start(sctx)
	cancel()
	if n := strings.Count(buf.String(), `"msg":"key cache: watch"`); n != 3 {
		t.Errorf("3.5 s without the buckets' streams logged %d lines of \"key cache: watch\" (one a second for each bucket); want 3, one a bucket:\n%s", n, buf.String())
	}
	if _, err := EnsureBuckets(ctx, js, 1); err != nil { // a meter makes them again
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := c.Start(wctx); err != nil {
		t.Fatalf("the cache did not load once the buckets were back: %v", err)
	}
	_ = c.Stop(ctx)
	if n := strings.Count(buf.String(), "watching again"); n != 3 {
		t.Errorf("%d lines say the watch was set up again; want 3, one a bucket:\n%s", n, buf.String())
	}
}
