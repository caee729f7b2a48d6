package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"
)

func (j *Journal) signal() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// writer writes the buffer whenever records arrive, and checkpoints
// within CheckpointDelay (group writes: what arrives during one write goes
// in the next), fsyncs the segment every syncInterval while it changes,
// and compacts as segments fill.
func (j *Journal) writer() {
	defer close(j.done)
	defer j.lazy.Stop()
	tick := time.NewTicker(syncInterval)
	defer tick.Stop()
	retrying := false // a write failed: its records wait in buf, retried every tick
	// triedFull is when a write that found the disk full (or the segment
	// at its bound) last had it compacted: at most once a syncInterval,
	// as the retries (each reads the segment whole, and fails again while
	// something else fills the disk).
	var triedFull time.Time
	for {
		select {
		case <-j.wake:
		case <-j.lazy.C:
		case <-tick.C:
			// The fsync runs outside fmu, so that begins go on writing
			// while the disk syncs (5 to 9 ms on the VM of BENCHMARKS.md's
			// "Issue 16, stop 38"). Only this goroutine replaces or closes
			// the segment (compaction; Close waits for it to stop), so seg
			// stays open.
			j.fmu.Lock()
			seg, dirty := j.seg, j.dirty
			j.dirty = false
			j.fmu.Unlock()
			if dirty {
				if err := seg.Sync(); err != nil {
					j.fail(err)
					j.mu.Lock()
					j.syncErr = fmt.Errorf("journal: fsync: %w", err)
					j.mu.Unlock()
				} else if !retrying {
					j.wrote()
				}
			}
			if !retrying && j.isFailing.Load() {
				// Failing with nothing left to retry (an fsync failed, or
				// what failed was dropped): the gateway takes no request
				// meanwhile, so no write would ever clear it. A record of
				// the averages journaled last (harmless: each replaces the
				// one before) tries the disk.
				j.probe()
			}
			if !retrying {
				continue
			}
		}
		j.fmu.Lock()
		j.mu.Lock()
		j.out, j.buf = j.buf, j.out[:0]
		out := j.out
		if j.lazyArmed {
			j.lazyArmed = false
			j.lazy.Stop() // what it was armed for is written now
		}
		closed := j.closed
		j.mu.Unlock()
		noSpace := false
		if len(out) > 0 {
			if err := j.writeBounded(out); err != nil {
				noSpace = errors.Is(err, syscall.ENOSPC) || errors.Is(err, errSegmentBound)
				j.fail(err)
				j.mu.Lock()
				if len(out)+len(j.buf) <= maxRetained { // kept whole and in order, for the next try
					j.buf = append(out, j.buf...)
				} else {
					j.lostBytes += int64(len(out))
				}
				j.mu.Unlock()
				j.out, retrying = nil, true
			} else {
				retrying = false
				j.wrote()
			}
		}
		full := j.segSize >= max(j.segLimit, j.compactAt)
		if noSpace && time.Since(triedFull) >= syncInterval {
			// The disk is full, or the segment at its bound: compaction
			// leaves the records of ended requests behind, which may be
			// what fills it (when another file, or the spool, fills it,
			// its room comes back once they are removed, and the retried
			// write succeeds).
			full, triedFull = true, time.Now()
		}
		j.fmu.Unlock()
		if full {
			// A compaction that fails leaves the current segment whole and
			// in use: the journal is not failing (its writes say so when
			// they fail), and compaction is tried again later.
			if kept, err := j.compact(); err != nil {
				j.mu.Lock()
				j.compactErr = err
				j.mu.Unlock()
				j.fmu.Lock()
				j.compactAt = j.segSize + j.segLimit/4
				j.fmu.Unlock()
			} else {
				j.fmu.Lock()
				j.compactAt = 2 * kept
				j.fmu.Unlock()
				if noSpace {
					j.signal() // what failed is retried now, in the new segment
				}
			}
		}
		if closed {
			return
		}
	}
}

// maxRetained bounds the records a journal keeps in memory while its
// writes fail (a full disk), in bytes; past it, what failed is dropped
// (and the error kept for Close), rather than the process's memory.
const maxRetained = 256 << 20

func (j *Journal) fail(err error) {
	j.mu.Lock()
	j.failing = fmt.Errorf("journal: %w", err)
	was := j.isFailing.Swap(true)
	j.mu.Unlock()
	if !was { // once a failure, not each retry: the operator's log said nothing of it
		slog.Error("crash journal: writes fail; a gateway refuses new requests (503 metering_unavailable) until one succeeds",
			"dir", j.dir, "err", err)
	}
}

// probe writes a record of the last hidden reasoning averages (or an
// empty set) and notes whether the write succeeded. Call it from the
// writer goroutine, without fmu or mu.
func (j *Journal) probe() {
	j.mu.Lock()
	payload := j.hidden
	j.mu.Unlock()
	if payload == nil {
		payload = []byte("{}")
	}
	rec := appendHidden(nil, payload, j.seed)
	j.fmu.Lock()
	err := j.writeSegment(rec)
	j.fmu.Unlock()
	if err != nil {
		j.fail(err)
		return
	}
	j.wrote()
}

// wrote notes that a write or an fsync succeeded: the journal is not
// failing.
func (j *Journal) wrote() {
	if !j.isFailing.Load() {
		return
	}
	j.mu.Lock()
	j.failing = nil
	was := j.isFailing.Swap(false)
	j.mu.Unlock()
	if was {
		slog.Warn("crash journal: writes succeed again; new requests are served", "dir", j.dir)
	}
}

// Failing returns the error of the journal's last write or fsync while
// they fail (a full disk), nil once one succeeds again. While it fails,
// what is buffered waits in memory (up to maxRetained) and is retried
// every syncInterval; a request begun meanwhile would go upstream with no
// record that survives the process's death, so the gateway takes no new
// request until it is nil.
func (j *Journal) Failing() error {
	if !j.isFailing.Load() {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failing
}
