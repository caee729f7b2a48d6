package journal

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strconv"
	"strings"
)

// seals gives each segment's seed, by segment number: the crc of every
// record in a segment starts from its seed instead of from zero. A
// process draws its seed at random when it opens the journal (newSeed),
// seals every record it writes with it, and names its segments with it
// (segPath); it is never sent or logged.
//
// The records hold bytes a client and an upstream chose (the request
// body, the model's output), so they can hold what looks like a whole
// record, crc and all. When a record's length is damaged (a block a power
// loss left unwritten, bit rot), recovery has to search byte by byte for
// the next intact record (see scan), and with plain crcs that search took
// a record forged inside the damaged one: a request that never was,
// billed to the customer the forger named. A forger who does not know the
// seed writes a crc that is right for one seed in 2^32.
//
// The seed is in the file's name rather than in the file, where a
// damaged block could take it with every record after it: a name changes
// only whole (by rename), and goes wherever the segment is copied. A
// segment named without a seed was written before records were sealed
// (by earlier releases), with plain crcs: its seed is 0.
type seals map[uint64]uint32

// seedOf returns the crc seed of segment n's records.
func (s seals) seedOf(n uint64) uint32 { return s[n] }

// newSeed returns a random seed, never 0 (the seed of unsealed segments).
func newSeed() (uint32, error) {
	for {
		var r [4]byte
		if _, err := rand.Read(r[:]); err != nil {
			return 0, fmt.Errorf("journal: a seed: %w", err)
		}
		if s := binary.BigEndian.Uint32(r[:]); s != 0 {
			return s, nil
		}
	}
}

// checksum is the crc of a record's data under seed.
func checksum(seed uint32, data []byte) uint32 {
	return crc32.Update(seed, crcTable, data)
}

// segPath is the path of segment n in dir, sealed with seed:
// <n, 20 digits>-<seed, 8 hex digits>.journal, or <n>.journal unsealed.
func segPath(dir string, n uint64, seed uint32) string {
	if seed == 0 {
		return filepath.Join(dir, fmt.Sprintf("%020d.journal", n))
	}
	return filepath.Join(dir, fmt.Sprintf("%020d-%08x.journal", n, seed))
}

// parseSegment reads a segment's number and seed from its file name, as
// segPath writes it.
func parseSegment(name string) (n uint64, seed uint32, ok bool) {
	base, ok := strings.CutSuffix(name, ".journal")
	if !ok {
		return 0, 0, false
	}
	num, hex, sealed := strings.Cut(base, "-")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if !sealed {
		return n, 0, true
	}
	s, err := strconv.ParseUint(hex, 16, 32)
	if err != nil || s == 0 {
		return 0, 0, false
	}
	return n, uint32(s), true
}
