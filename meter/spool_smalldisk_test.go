package meter_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestSpoolOnADiskSmallerThanASegment (a crash review): a spool starts
// a new segment at 64 MiB, and Drain deletes only the segments it has
// finished that are no longer written to. On a data directory smaller
// than a segment (a 4 MiB tmpfs), every outage's records stayed in the
// one segment after they were sent, until a restart: NATS out of reach a
// few times, the disk filled with records long sent, and the spool
// refused every event (no space left), for good. Records of three times
// the disk's size, spooled in outages each drained after, must all be
// taken.
func TestSpoolOnADiskSmallerThanASegment(t *testing.T) {
	const size = 4 << 20
	disk := metertest.SmallDisk(t, size)
	s, err := meter.OpenSpool(filepath.Join(disk, "spool"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := bytes.Repeat([]byte("x"), 8<<10)
	var spooled, sent int64
	for outage := 0; spooled < 3*size; outage++ {
		for range 64 { // NATS out of reach: 512 KiB spooled
			if err := s.AppendRecord(rec); err != nil {
				t.Fatalf("outage %d, after %d KiB spooled through a %d KiB disk and %d KiB sent on: %v",
					outage, spooled>>10, size>>10, sent>>10, err)
			}
			spooled += int64(len(rec))
		}
		// NATS is back: everything is sent on.
		n, err := s.Drain(context.Background(), func(context.Context, []byte) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		sent += int64(n * len(rec))
	}
	if sent != spooled {
		t.Fatalf("sent %d bytes of the %d spooled", sent, spooled)
	}
}
