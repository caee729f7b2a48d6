package keys_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/keys"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestShareJoinedHasHeardTheOthers: a share that joins just after another
// gateway's publication (gateways publish every key's counts once a
// second) has heard that gateway's counts by the time Joined returns, so
// its gateway does not serve as if it held the whole limit alone.
func TestShareJoinedHasHeardTheOthers(t *testing.T) {
	t.Parallel()
	srv := metertest.NewServer(t)
	first, err := keys.NewShare(metertest.Connect(t, srv).Conn(), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Close() })
	counts := []usage.LimitCounts{{KeyID: "k", Requests: 10, Open: 3,
		Seconds: []usage.LimitSecond{{Unix: time.Now().Unix(), Requests: 10}}}}

	// The first gateway publishes once a second, as gateway.LimitShare
	// does; the second joins right after one publication.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	published := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		first.Publish(counts)
		close(published)
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				counts[0].Seq++
				first.Publish(counts)
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	<-published
	second, err := keys.NewShare(metertest.Connect(t, srv).Conn(), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Close() })
	second.Joined(context.Background())
	if req, _, open := othersSums(second, "k"); req != 10 || open != 3 {
		t.Fatalf("after Joined the share holds %d requests and %d open of the other gateway's; want 10 and 3", req, open)
	}

	// A share whose context ends stops waiting: the gateway is stopping.
	third, err := keys.NewShare(metertest.Connect(t, srv).Conn(), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = third.Close() })
	done, stop := context.WithCancel(context.Background())
	stop()
	returned := make(chan struct{})
	go func() { third.Joined(done); close(returned) }()
	select {
	case <-returned:
	case <-time.After(keys.JoinWait / 2):
		t.Fatalf("Joined did not return at its context's end (JoinWait %v)", keys.JoinWait)
	}
}
