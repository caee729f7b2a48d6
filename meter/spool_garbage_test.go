package meter_test

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestSpoolGarbageDoesNotStallTheStart: bytes a damaged disk left in a
// segment (not zeros: another file's blocks, random data) are searched
// byte by byte for the next intact record, and that search checked the
// crc of every length it found that fit what was left of the segment: with
// records up to 16 MiB, about a 250th of random offsets, each over
// megabytes. 16 MiB of random bytes at a segment's end kept OpenSpool
// 13 s in the search on the review's VM (and the drain as long again), a
// 64 MiB segment about ten minutes, the gateway not listening meanwhile
// (a crash review). Every record a spool holds is a JSON object, so the
// search checks a crc only where one begins and ends; records after the
// damage are still found.
func TestSpoolGarbageDoesNotStallTheStart(t *testing.T) {
	dir := t.TempDir()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Append(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	// The first record whole: its 8-byte header (length, crc) and the
	// length it gives. (A third of the segment was not one: an event's
	// time is as long as its digits, RFC 3339 dropping trailing zeros, so
	// the three differ in size now and then, and the test failed.)
	first := b[:8+binary.BigEndian.Uint32(b)]
	garbage := make([]byte, 16<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(r.Uint32())
	}
	// Three records, the garbage, and one of them again (found past it).
	b = append(append(b, garbage...), first...)
	if err := os.WriteFile(segs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s2, err := meter.OpenSpool(dir, 0)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if n, _, _ := s2.Stats(); n != 4 {
		t.Errorf("%d events waiting, want 4 (three, and one past the damaged bytes)", n)
	}
	if took > 3*time.Second {
		t.Errorf("OpenSpool took %v over 16 MiB of damaged bytes, want well under 3 s", took)
	}
}
