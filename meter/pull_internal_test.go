package meter

import (
	"testing"
	"time"
)

func TestNextPull(t *testing.T) {
	for _, c := range []struct{ asked, got, limit, want int }{
		{64, 0, 6000, 1},         // idle: one event, waited for longer
		{1, 0, 6000, 1},          // still idle
		{1, 1, 6000, 2},          // the first event after idleness
		{2, 1, 6000, 64},         // a trickle
		{64, 64, 6000, 128},      // filled: a backlog, twice as many
		{4096, 4096, 6000, 6000}, // never past the limit
		{6000, 6000, 6000, 6000},
		{6000, 2500, 6000, 5000}, // waited out: twice what came
		{128, 40, 6000, 80},
		{6000, 10, 6000, 64},
		{64, 0, 7, 1},
		{64, 3, 7, 7}, // a limit below minPull
		{7, 7, 7, 7},
	} {
		if got := nextPull(c.asked, c.got, c.limit); got != c.want {
			t.Errorf("nextPull(%d, %d, %d) = %d, want %d", c.asked, c.got, c.limit, got, c.want)
		}
	}
}

func TestPullWait(t *testing.T) {
	const batchWait = 50 * time.Millisecond
	for _, c := range []struct {
		size    int
		pending uint64
		wait    time.Duration
		want    time.Duration
	}{
		{idlePull, 0, batchWait, idlePullWait},          // idle: one event, waited for longer
		{idlePull, 0, time.Second, time.Second},         // BatchWait longer than that
		{6000, 0, batchWait, batchWait},                 // nothing known to be stored
		{6000, 5999, batchWait, batchWait},              // not enough stored to fill it
		{6000, 6000, batchWait, backlogPullWait},        // a backlog fills it: waits for delivery only
		{64, 1 << 40, batchWait, backlogPullWait},       // any size
		{6000, 90000, 2 * time.Second, 2 * time.Second}, // BatchWait longer than that
	} {
		if got := pullWait(c.size, c.pending, c.wait); got != c.want {
			t.Errorf("pullWait(%d, %d, %v) = %v, want %v", c.size, c.pending, c.wait, got, c.want)
		}
	}
}
