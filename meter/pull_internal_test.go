package meter

import "testing"

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
