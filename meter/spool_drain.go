package meter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/tollgate-dev/tollgate/meter/dirlock"
)

// spoolCursor is how far the spool has been sent on: everything before
// Offset in Segment, and every earlier segment.
type spoolCursor struct {
	Segment uint64 `json:"segment"`
	Offset  int64  `json:"offset"`
}

// readCursor reads the cursor file, which OpenSpool does once: Drain
// keeps it in memory from then on. No file is the start of the oldest
// segment. A file that does not parse (torn, emptied, overwritten: not by
// writeCursor, which replaces it whole) is renamed cursor.broken-<unix
// time>, kept for inspection, with a warning, and the spool is read again
// from its oldest segment: what was sent already is sent again with its
// own id, which JetStream and the ledger drop, and nothing is skipped. A
// file that cannot be read is an error that says what to do.
func (s *Spool) readCursor() (spoolCursor, error) {
	var c spoolCursor
	path := filepath.Join(s.dir, "cursor")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("spool cursor: %w: make it readable by the gateway's user, or remove it "+
			"(the spool is then sent again from its oldest segment, and JetStream and the ledger drop what was sent already)", err)
	}
	err = json.Unmarshal(b, &c)
	if err == nil && c.Offset < 0 {
		err = fmt.Errorf("a negative offset, %d", c.Offset)
	}
	if err == nil {
		return c, nil
	}
	s.setCursorAside("spool: the cursor does not parse; the spool is sent again from its oldest segment (JetStream and the ledger drop what was sent already)", err)
	return spoolCursor{}, nil
}

// setCursorAside renames the cursor file cursor.broken-<unix time>, kept
// for inspection, and warns with msg and why, naming both files.
func (s *Spool) setCursorAside(msg string, why error) {
	path := filepath.Join(s.dir, "cursor")
	aside := fmt.Sprintf("%s.broken-%d", path, time.Now().Unix())
	kept := aside
	if rerr := os.Rename(path, aside); rerr != nil {
		kept = "not kept: " + rerr.Error() // the next cursor written replaces it
	}
	slog.Warn(msg, "cursor", path, "err", why, "kept_as", kept)
}

// checkCursor returns cur when it fits the segments on disk (segs), and
// otherwise sets the cursor file aside (see setCursorAside) and returns
// the start of the oldest segment, from which everything on disk is sent
// again (with the same ids, which JetStream and the ledger drop). A cursor
// fits when no segment before its own holds a record (Drain removes each
// segment it finishes before its cursor moves past it) and, its own
// segment on disk, its offset is that segment's start or the end of a
// record or of bytes set aside there. A cursor that parses and does not
// fit (a flipped digit, a restore that brought back a cursor newer than
// the segments) had the segments before it, or its own past its offset,
// taken as sent and deleted unread, or the bytes from inside a record
// dead-lettered as a corrupt one.
func (s *Spool) checkCursor(segs []uint64, cur spoolCursor) (spoolCursor, error) {
	if cur == (spoolCursor{}) {
		return cur, nil
	}
	var why error
	for _, n := range segs {
		switch {
		case n < cur.Segment:
			held := false
			err := scanSegment(s.segPath(n), 0, -1, func([]byte, int64) error {
				held = true
				return errCursorChecked
			}, nil)
			if err != nil && !errors.Is(err, errCursorChecked) {
				return cur, err
			}
			if held {
				why = fmt.Errorf("segment %d, before the cursor's (%d), holds records", n, cur.Segment)
			}
		case n == cur.Segment && cur.Offset > 0:
			found := false
			at := func(next int64) error {
				if next == cur.Offset {
					found = true
					return errCursorChecked
				}
				if next > cur.Offset {
					return errCursorChecked
				}
				return nil
			}
			err := scanSegment(s.segPath(n), 0, -1, func(_ []byte, next int64) error { return at(next) },
				func(_ []byte, _ string, next int64) error { return at(next) })
			if err != nil && !errors.Is(err, errCursorChecked) {
				return cur, err
			}
			if !found {
				why = fmt.Errorf("offset %d of segment %d is not where a record of it ends", cur.Offset, n)
			}
		}
		if why != nil {
			break
		}
	}
	if why == nil {
		return cur, nil
	}
	s.setCursorAside("spool: the cursor does not fit the segments on disk; the spool is sent again from its oldest segment "+
		"(JetStream and the ledger drop what was sent already)", why)
	return spoolCursor{}, nil
}

// errCursorChecked ends checkCursor's scans early.
var errCursorChecked = errors.New("checked")

// writeCursor replaces the cursor atomically and durably.
func (s *Spool) writeCursor(c spoolCursor) error {
	b, _ := json.Marshal(c)
	tmp := filepath.Join(s.dir, "cursor.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	f.Close()
	if err := os.Rename(tmp, filepath.Join(s.dir, "cursor")); err != nil {
		return err
	}
	return dirlock.SyncDir(s.dir)
}

// Drain hands the records not yet sent on to send, in the order they were
// spooled, advancing the cursor as it goes (in memory at once; durably
// every 256 records and at the end) and deleting segments it has finished.
// It stops at the first record send returns an error for, and returns how
// many it sent. A cursor that cannot be saved (a disk the spool itself
// filled during an outage) does not stop it: it sends on, deletes the
// segments it finishes, which frees the disk, and returns the save's error
// once done. A record sent whose durable cursor advance was lost to a
// crash, or to a cursor write that failed, is sent again after a restart:
// for events, with the same id, which JetStream and the ledger drop. A
// drain stopping at every unsaved cursor sent the same 256 records for
// ever, the events behind them never reaching JetStream (a review). Bytes
// damaged on disk between intact records are skipped (see scanSegment,
// and DrainSkipping). Drains run one at a time.
func (s *Spool) Drain(ctx context.Context, send func(ctx context.Context, data []byte) error) (int, error) {
	return s.DrainSkipping(ctx, send, nil)
}

// DrainSkipping is Drain giving bytes damaged on disk between intact
// records, or at a segment's end (see scanSegment and classifyTail), to
// skipped, when not nil, with where they were, before the records after
// them are sent and before their segment is deleted; an error from it
// stops the drain there, to be tried again. Without skipped they are
// dropped.
func (s *Spool) DrainSkipping(ctx context.Context, send func(ctx context.Context, data []byte) error,
	skipped func(ctx context.Context, raw []byte, where string) error) (int, error) {
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	cur := s.cur
	segs, err := s.segments(false)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	active, committed := s.segNum, s.segSize // the active segment is read up to its fsync'd records only
	s.mu.Unlock()
	sent := 0
	// Sent since the last save point: counted off Stats there, saved or
	// not (this process sends them no more; a restart counts the spool
	// again from the cursor saved).
	var unsaved, unsavedBytes int64
	var saveErr error // the last save's, when it failed
	save := func(c spoolCursor) {
		s.cur = c // the next drain starts past them, whatever the error
		s.sentOn(unsaved, unsavedBytes)
		unsaved, unsavedBytes = 0, 0
		if err := s.writeCursor(c); err != nil {
			saveErr = fmt.Errorf("spool: the cursor could not be saved (sent on; after a restart what was sent since is sent again, "+
				"and JetStream and the ledger drop it): %w", err)
		} else {
			saveErr = nil
		}
	}
	for _, n := range segs {
		if n < cur.Segment {
			continue
		}
		from := int64(0)
		if n == cur.Segment {
			from = cur.Offset
		}
		sinceSave := 0
		limit := int64(-1)
		if n == active {
			limit = committed
		}
		err := scanSegment(s.segPath(n), from, limit, func(data []byte, next int64) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := send(ctx, data); err != nil {
				return err
			}
			sent++
			cur = spoolCursor{Segment: n, Offset: next}
			unsaved++
			unsavedBytes += 8 + int64(len(data))
			if sinceSave++; sinceSave == 256 {
				sinceSave = 0
				save(cur)
			}
			return nil
		}, func(raw []byte, where string, next int64) error {
			if skipped != nil {
				if err := skipped(ctx, raw, where); err != nil {
					return err
				}
			}
			// Set aside (or, without skipped, dropped): a later drain starts
			// past them, and their bytes are counted off as OpenSpool
			// counted them (no event).
			cur = spoolCursor{Segment: n, Offset: next}
			unsavedBytes += int64(len(raw))
			return nil
		})
		save(cur)
		if err != nil {
			return sent, err
		}
		if n < active {
			// Finished and no longer written to. Removed even when the
			// cursor in it was not saved: a restart then reads on from
			// the next segment, and what this one held was sent.
			if err := os.Remove(s.segPath(n)); err != nil {
				return sent, fmt.Errorf("spool: %w", err)
			}
			cur = spoolCursor{Segment: n + 1}
		}
	}
	save(cur)
	return sent, saveErr
}

// sentOn counts events records, of size bytes in all, off Stats: their
// cursor is durably past them.
func (s *Spool) sentOn(events, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count -= events
	s.size -= size
	s.ages.published(events)
}
