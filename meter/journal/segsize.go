package journal

import (
	"errors"

	"github.com/tollgate-dev/tollgate/meter/dirlock"
)

// minSegment is the least size in bytes at which a journal compacts,
// however small its disk (see segmentLimit).
const minSegment = 512 << 10

// segmentLimit is the size in bytes at which the journal in dir compacts
// into a new segment: maxSegment, or an eighth of its disk's size where
// that is less (down to minSegment). On a disk smaller than a segment
// (a 4 MiB tmpfs), compacting at maxSegment never happened: the records
// of requests long ended filled the disk, every write then failed, and
// the gateway refused every request until it restarted (a crash review).
// An eighth leaves room for the segment's reserve, a compaction's new
// segment beside the old, and the spool.
func segmentLimit(dir string) int64 {
	limit := maxSegment
	if size := dirlock.DiskSize(dir); size > 0 {
		limit = min(limit, max(minSegment, size/8))
	}
	return limit
}

// segmentBound is the size in bytes past which the journal's segment in
// dir does not grow until it is compacted: half its disk, and at least
// twice limit (0, no bound, when the disk's size is unknown). Begins
// written faster than the writer compacted (16 KiB bodies in a loop) grew
// a segment to fill a 4 MiB disk whole, leaving no room for the
// compaction that would have emptied it: its writes failed for good.
// Past the bound, a write fails (the gateway refuses the request, 503)
// and the writer compacts at once.
func segmentBound(dir string, limit int64) int64 {
	size := dirlock.DiskSize(dir)
	if size <= 0 {
		return 0
	}
	return max(2*limit, size/2)
}

// errSegmentBound is the error of a write that would take the segment
// past its bound (segmentBound).
var errSegmentBound = errors.New("the segment is at its bound on a small disk, until it is compacted")

// writeBounded is writeSegment, refusing a write that takes a segment
// written to since it was opened or compacted into past segBound
// (errSegmentBound): the first write after a compaction goes through
// whatever its size, as a compaction cannot make room for it. Call it
// under fmu.
func (j *Journal) writeBounded(b []byte) error {
	if j.segBound > 0 && j.segSize > j.segStart && j.segSize+int64(len(b)) > j.segBound {
		return errSegmentBound
	}
	return j.writeSegment(b)
}

// segmentReserve is the room in bytes a segment's disk blocks are
// reserved for past its records (reserve), up to the size at which it is
// compacted and a quarter more: a disk the spool (or anything else) fills
// does not stop the journal's begins and checkpoints, which a crash's
// recovery bills from (a crash review: with its disk full, a killed
// gateway billed 9 tokens of a stream the client had 364 of).
func (j *Journal) segmentReserve() int64 { return j.segLimit + j.segLimit/4 }
