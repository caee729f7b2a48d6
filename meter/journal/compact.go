package journal

import (
	"io"
	"os"

	"github.com/tollgate-dev/tollgate/meter/dirlock"
)

// compactingSuffix names a segment compaction is writing, until it is
// complete and renamed into place.
const compactingSuffix = ".compacting"

// compact starts a new segment holding the open requests of the current
// one, merged (a begin, one checkpoint, a failed event), and removes the
// current segment. The new segment is written under another name, and
// fsync'd, while the journal goes on writing to the current one: begins do
// not wait for it. Then, under fmu, what was written to the current
// segment meanwhile is copied after the merged records, as it is (whole
// records), and the new segment is renamed into place and used from then
// on. It opens with a record that names the segment it replaces: a crash
// or a full disk mid-way leaves the current segment whole and in use, and
// a crash after the rename leaves a segment recovery knows replaces the
// old one (see replaced). When it fails, the journal carries on in the
// current segment, and compaction is tried again once that has grown by
// another quarter of its limit (segLimit), or at once when a write finds
// the disk full. The writer compacts a segment once it holds segLimit,
// and twice what the last compaction kept of the open requests.
//
// Call it from the writer goroutine, without fmu. A begin whose request is
// open when compaction notes where the segment ends has its record either
// before that point (merged) or after it (copied).
//
// It returns the size in bytes of the merged records it kept.
func (j *Journal) compact() (kept int64, err error) {
	j.fmu.Lock()
	old, upTo := j.segNum, j.segSize
	j.mu.Lock()
	open := make(map[[16]byte]bool, len(j.open))
	for id := range j.open {
		open[id] = true
	}
	hidden, spend := j.hidden, j.spend
	j.mu.Unlock()
	j.fmu.Unlock()
	reqs, _, err := recoverSegmentsUpTo(j.dir, []uint64{old}, open, upTo, seals{old: j.seed})
	if err != nil {
		return 0, err
	}
	keep := appendCompacted(nil, old, j.seed)
	if hidden != nil {
		keep = appendHidden(keep, hidden, j.seed)
	}
	if spend != nil {
		keep = appendSpend(keep, spend, j.seed)
	}
	for i := range reqs {
		if id, ok := parseID(reqs[i].Event.ID); ok && open[id] {
			keep = appendRequest(keep, &reqs[i], j.seed)
		}
	}
	next := segPath(j.dir, old+1, j.seed)
	f, err := os.OpenFile(next+compactingSuffix, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	abandon := func(err error) error {
		f.Close()
		_ = os.Remove(next + compactingSuffix)
		return err
	}
	reserve(f, int64(len(keep))+j.segmentReserve()) // the new segment's room, as openSegment's
	if _, err := f.Write(keep); err != nil {
		return 0, abandon(err)
	}
	if err := f.Sync(); err != nil {
		return 0, abandon(err)
	}
	if compactHook != nil {
		compactHook()
	}
	// What was written to the segment since upTo follows, as it is: whole
	// records (written under fmu). Most of it is copied without fmu, the
	// last of it (less than maxHeldCopy) under fmu, with the switch.
	copied, size := upTo, int64(len(keep))
	for {
		j.fmu.Lock()
		end := j.segSize
		if end-copied < maxHeldCopy {
			break
		}
		j.fmu.Unlock()
		n, err := copySpan(f, segPath(j.dir, old, j.seed), copied, end)
		size += n
		if err != nil {
			return 0, abandon(err)
		}
		copied = end
	}
	n, err := copySpan(f, segPath(j.dir, old, j.seed), copied, j.segSize)
	size += n
	if err == nil {
		err = os.Rename(next+compactingSuffix, next)
	}
	if err != nil {
		j.fmu.Unlock()
		return 0, abandon(err)
	}
	// f's errors would name the file it was opened as, <next>.compacting,
	// gone now: they are an operator's only pointer to the segment (the
	// log, /readyz). Opened again under its name (f, on failure).
	if g, err := os.OpenFile(next, os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		f.Close()
		f = g
	}
	j.seg.Close()
	j.seg, j.segNum, j.segSize, j.segStart = f, old+1, size, size
	j.torn = false // a failed write's bytes, if any, are in the old segment, after what was copied
	j.dirty = true // the copied records are not fsync'd
	j.fmu.Unlock()
	if err := dirlock.SyncDir(j.dir); err != nil {
		return 0, err // the old segment stays: the new one replaces it in recovery
	}
	return int64(len(keep)), os.Remove(segPath(j.dir, old, j.seed))
}

// compactHook, when set (by tests), runs in compact once the new segment
// is written, before the records written meanwhile are copied to it.
var compactHook func()

// maxHeldCopy bounds, in bytes, what compaction copies while begins wait
// (under fmu): with the rename, fmu was held 60 to 150 µs a compaction in
// BenchmarkBegin, against 5 to 7 ms when compaction held it throughout.
const maxHeldCopy = 64 << 10

// copySpan appends to dst the bytes of the file at path from offset from
// up to offset to, and returns how many it appended.
func copySpan(dst *os.File, path string, from, to int64) (int64, error) {
	if to <= from {
		return 0, nil
	}
	src, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	return io.Copy(dst, io.NewSectionReader(src, from, to-from))
}
