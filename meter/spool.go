package meter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/meter/dirlock"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Spool is a local, append-only, fsync'd queue of records (usage events
// that could not be published, or dead letters that could not reach the
// dead-letter stream), kept in segment files under a directory until a
// Republisher has sent them on. It survives process crashes (kill -9):
// an event Append has returned for is on disk.
//
// Appends are group-committed: concurrent appends share one write and one
// fsync, so a burst of failures costs one fsync per batch, never one per
// request.
//
// On disk: segment files NNNNNNNNNNNNNNNNNNNN.seg, each a sequence of
// records [length uint32 BE][crc32c uint32 BE][data], data being an
// event's JSON; a torn record at
// the end of the newest segment (a crash mid-write) is ignored, since its
// Append never returned. A file "cursor" holds the segment and offset up to
// which events were published (one that does not parse is set aside, and
// everything on disk sent again: see readCursor).
type Spool struct {
	dir     string
	lock    *dirlock.Lock // dir's, held from OpenSpool to Close
	maxSize int64         // bytes; 0 is unlimited

	closeOnce sync.Once // Close's work, which a second Close waits for
	closeErr  error

	mu      sync.Mutex
	pending []spoolWrite
	wake    chan struct{}
	closed  bool
	seg     *os.File
	segNum  uint64
	segSize int64
	// segLimit is the size in bytes at which a new segment starts
	// (spoolSegmentLimit), set by OpenSpool.
	segLimit int64
	// tornTail: a failed write's record could be neither cut nor left
	// behind for a new segment; the writer's next commit tries again
	// first, and fails until it can (see torn).
	tornTail bool
	// writeErr is the last commit's error, nil once one succeeds or the
	// disk takes a probe's write (see WriteError); probedAt is when
	// WriteError last tried the disk.
	writeErr error
	probedAt time.Time
	// size and count are the bytes and events not yet published; ages
	// time them (see noteAppend).
	size, count int64
	ages        spoolAges
	done        chan struct{}
	// drainMu makes Drain the spool's one drainer at a time, and guards
	// cur, the cursor as last saved: read from its file once, at open.
	drainMu sync.Mutex
	cur     spoolCursor
}

type spoolWrite struct {
	rec  []byte
	errc chan error
}

// ErrSpoolFull is returned by Append when the spool holds MaxBytes already.
var ErrSpoolFull = errors.New("usage spool is full")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// maxSegment is the size at which a new segment starts, on a disk of 8
// times that or more, and minSegment the least (see spoolSegmentLimit).
const (
	maxSegment = 64 << 20
	minSegment = 512 << 10
)

// spoolSegmentLimit is the size in bytes at which the spool in dir starts
// a new segment: maxSegment, or an eighth of its disk where that is less
// (down to minSegment). Drain deletes a segment once it has sent it and
// it is no longer written to: on a disk smaller than a segment (a 4 MiB
// tmpfs), the one segment kept every outage's records after they were
// sent, until they filled the disk and the spool refused every event (a
// crash review).
func spoolSegmentLimit(dir string) int64 {
	if size := dirlock.DiskSize(dir); size > 0 {
		return min(maxSegment, max(minSegment, size/8))
	}
	return maxSegment
}

// OpenSpool opens (creating it if needed) the spool in dir. maxBytes caps
// what it may hold (0: no cap). It counts what earlier processes left
// unpublished, and removes the segments that hold nothing left to send
// (see tidy).
func OpenSpool(dir string, maxBytes int64) (_ *Spool, err error) {
	// One process at a time, as the crash journal (journal.Open): two
	// would drain each other's segments away.
	lock, err := dirlock.Acquire(dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	defer func() {
		if err != nil {
			_ = lock.Release()
		}
	}()
	s := &Spool{dir: dir, lock: lock, maxSize: maxBytes, wake: make(chan struct{}, 1), done: make(chan struct{}),
		segLimit: spoolSegmentLimit(dir)}
	segs, err := s.segments(true)
	if err != nil {
		return nil, s.unreadable(err)
	}
	cur, err := s.readCursor()
	if err != nil {
		return nil, err
	}
	if cur, err = s.checkCursor(segs, cur); err != nil {
		return nil, s.unreadable(err)
	}
	s.cur = cur
	next, err := s.tidy(segs, cur)
	if err != nil {
		return nil, s.unreadable(err)
	}
	if err := s.openSegment(next); err != nil {
		return nil, s.unreadable(err)
	}
	go s.writer()
	return s, nil
}

// unreadable is OpenSpool's error err when the spool cannot be read or
// written (a restore that changed its owner or mode, a failing disk),
// saying what to do: a start that refused with the file system's error
// alone left an operator to guess, and deleting the segment, the obvious
// guess, loses records acknowledged and not yet sent on.
func (s *Spool) unreadable(err error) error {
	return fmt.Errorf("%w: make the spool directory %s and its segments readable and writable by the gateway's user; "+
		"do not delete the segments: they hold records not yet sent on (usage events acknowledged to their clients)", err, s.dir)
}

// spooledBy returns when the spooled record data was appended at the
// latest: a usage event's time (its request's start; its event is spooled
// once it ends), or now for another record or a time to come. A process
// times its appends as it makes them; a restart reads the times of the
// records left from the records (see tidy), with no decoding: the time
// is the third member of an event's JSON (Event.AppendJSON).
func spooledBy(data []byte, now time.Time) time.Time {
	const member = `,"time":"`
	head := data[:min(len(data), 256)]
	i := bytes.Index(head, []byte(member))
	if i < 0 {
		return now
	}
	v := head[i+len(member):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return now
	}
	t, err := time.Parse(time.RFC3339Nano, string(v[:j]))
	if err != nil || t.After(now) {
		return now
	}
	return t
}

// tidy counts the records of segs left to send after cur, timing them
// (see spooledBy), removes the
// segments that hold none (sent whole, empty, or only a torn record that
// no Append returned for, as Drain would once past them) and returns the
// number of the segment to append to: the last one when it is empty and
// read from its start, else a new one after every segment and the
// cursor's. Without it, every start added an empty segment, and a
// segment sent whole stayed, since only a drain removes segments and the
// republisher drains only a spool that counts events.
func (s *Spool) tidy(segs []uint64, cur spoolCursor) (next uint64, err error) {
	next = cur.Segment + 1 // the cursor's segment may be gone: new records go after it, or Drain would skip them
	now := time.Now()
	removed := false
	for i, n := range segs {
		from := int64(0)
		switch {
		case n < cur.Segment:
			from = -1 // sent
		case n == cur.Segment:
			from = cur.Offset
		}
		var records int64
		damaged := false
		end := from
		if from >= 0 {
			err := scanSegment(s.segPath(n), from, -1, func(data []byte, off int64) error {
				s.ages.appended(1, spooledBy(data, now))
				records++
				s.size += 8 + int64(len(data)) // as Drain counts it off; a torn tail is not waiting
				end = off
				return nil
			}, func(raw []byte, _ string, off int64) error {
				// Damaged records, between intact ones or at the end: bytes
				// waiting to be set aside (see DrainSkipping), though no
				// event, so that the republisher drains a spool that holds
				// nothing else, and the segment stays until it has.
				s.size += int64(len(raw))
				damaged = true
				end = off
				return nil
			})
			if err != nil {
				return 0, err
			}
		}
		if records > 0 || damaged {
			s.count += records
			next = max(next, n+1)
			continue
		}
		st, err := os.Stat(s.segPath(n))
		if err != nil {
			return 0, fmt.Errorf("spool: %w", err)
		}
		if i == len(segs)-1 && st.Size() == 0 && from == 0 {
			next = n // empty, and read from its start: appended to again
			continue
		}
		if from >= 0 && st.Size() > end {
			slog.Info("spool: a segment's torn last record removed with it (its append never returned)",
				"segment", s.segPath(n), "bytes", st.Size()-end)
		}
		if err := os.Remove(s.segPath(n)); err != nil {
			return 0, fmt.Errorf("spool: %w", err)
		}
		removed = true
		next = max(next, n+1)
	}
	if removed {
		if err := dirlock.SyncDir(s.dir); err != nil {
			return 0, fmt.Errorf("spool: %w", err)
		}
	}
	return next, nil
}

func (s *Spool) segPath(n uint64) string { return filepath.Join(s.dir, fmt.Sprintf("%020d.seg", n)) }

// segments lists the segment numbers on disk, ascending: the files named
// as segPath names them. Others whose names end .seg are left alone,
// and, when warn is set (at open), warned of: read from the front of
// any such name, a number made a copy ("00000000000000000001 (copy).seg")
// the same segment again, its events counted twice, and "7.seg" a segment
// whose file (00000000000000000007.seg) did not exist, which failed the
// start.
func (s *Spool) segments(warn bool) ([]uint64, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	var out []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".seg")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil || e.Name() != filepath.Base(s.segPath(n)) {
			if warn {
				slog.Warn("spool: a file named like a segment is not one (segments are named with 20 digits, as 00000000000000000001.seg): "+
					"left alone and not sent; if it holds records of this spool, give it the name of a segment after the last one",
					"dir", s.dir, "file", e.Name())
			}
			continue
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func (s *Spool) openSegment(n uint64) error {
	f, err := os.OpenFile(s.segPath(n), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if s.seg != nil {
		s.seg.Close()
	}
	st, _ := f.Stat()
	s.mu.Lock() // Drain reads segNum and segSize under it
	s.seg, s.segNum, s.segSize = f, n, st.Size()
	s.mu.Unlock()
	return dirlock.SyncDir(s.dir)
}

// Append writes e to the spool and returns once it is on disk (fsync'd).
// It returns ErrSpoolFull when the spool is at its cap.
func (s *Spool) Append(e *usage.Event) error {
	data, err := e.AppendJSON(nil)
	if err != nil {
		return fmt.Errorf("spool: encode event %s: %w", e.ID, err)
	}
	return s.AppendRecord(data)
}

// AppendOwed is Append for an event the gateway owes: that of a request
// it admitted (see DurablePublisher.Accepting) and served, or of one a
// crash left in flight. It is written past the cap: the cap stops new
// requests, never the metering of one already served, so the spool may
// pass its cap by the events of the requests in flight when it reached it.
func (s *Spool) AppendOwed(e *usage.Event) error {
	data, err := e.AppendJSON(nil)
	if err != nil {
		return fmt.Errorf("spool: encode event %s: %w", e.ID, err)
	}
	return s.appendRecord(data, false)
}

// AppendRecord writes one record (1 byte to 16 MiB) to the spool and
// returns once it is on disk (fsync'd). It returns ErrSpoolFull when the
// spool is at its cap. Records are JSON objects (a usage event, a dead
// letter): past bytes damaged on disk, the search for the next intact
// record looks only where one begins with '{' and ends with '}', so a
// record that is not one is set aside with the damaged bytes before it.
func (s *Spool) AppendRecord(data []byte) error { return s.appendRecord(data, true) }

// appendRecord is AppendRecord, held to the cap when capped is true.
func (s *Spool) appendRecord(data []byte, capped bool) error {
	if len(data) == 0 || len(data) > maxRecord {
		return fmt.Errorf("spool: a record of %d bytes: records are 1 byte to %d", len(data), maxRecord)
	}
	rec := make([]byte, 8+len(data))
	binary.BigEndian.PutUint32(rec, uint32(len(data)))
	binary.BigEndian.PutUint32(rec[4:], crc32.Checksum(data, crcTable))
	copy(rec[8:], data)
	w := spoolWrite{rec: rec, errc: make(chan error, 1)}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return errors.New("spool: closed")
	case capped && s.maxSize > 0 && s.size+int64(len(rec)) > s.maxSize:
		s.mu.Unlock()
		return ErrSpoolFull
	}
	s.pending = append(s.pending, w)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return <-w.errc
}

// maxRecord is the largest record a spool takes, in bytes.
const maxRecord = 16 << 20

// writer group-commits pending appends: one write and one fsync for all
// that arrived while the previous fsync ran.
func (s *Spool) writer() {
	defer close(s.done)
	for range s.wake {
		s.mu.Lock()
		batch := s.pending
		s.pending = nil
		closed := s.closed
		s.mu.Unlock()
		if len(batch) > 0 {
			err := s.commit(batch)
			s.mu.Lock()
			s.writeErr = err // nil again once a write succeeds
			s.mu.Unlock()
			for _, w := range batch {
				w.errc <- err
			}
		}
		if closed {
			return
		}
	}
}

// torn undoes a failed commit, whose records none was acknowledged: a
// write that failed part-way (a full disk) leaves a torn record, and the
// segment's reader stops at the first bad record, so a record appended
// after it, acknowledged, would never be read. The segment is cut back to
// its last whole record; when that fails too, later records go to a new
// segment (the reader stops at the torn tail, after every acknowledged
// record). It returns err.
func (s *Spool) torn(err error) error {
	if terr := s.seg.Truncate(s.segSize); terr == nil {
		if serr := s.seg.Sync(); serr == nil {
			return err
		}
	}
	if oerr := s.openSegment(s.segNum + 1); oerr != nil {
		s.tornTail = true // cut (or left) before the next commit, which fails until then
		return fmt.Errorf("%w; and a new segment: %v", err, oerr)
	}
	return err
}

func (s *Spool) commit(batch []spoolWrite) error {
	if s.tornTail {
		if err := s.seg.Truncate(s.segSize); err != nil {
			if oerr := s.openSegment(s.segNum + 1); oerr != nil {
				return fmt.Errorf("spool: a failed write's torn record is still in segment %d: %w", s.segNum, err)
			}
		}
		s.tornTail = false
	}
	if s.segSize >= s.segLimit {
		if err := s.openSegment(s.segNum + 1); err != nil {
			return err
		}
	}
	buf := make([]byte, 0, len(batch)*512)
	for _, w := range batch {
		buf = append(buf, w.rec...)
	}
	if _, err := s.seg.Write(buf); err != nil {
		return s.torn(fmt.Errorf("spool: write: %w", err))
	}
	if err := s.seg.Sync(); err != nil {
		return s.torn(fmt.Errorf("spool: fsync: %w", err))
	}
	s.mu.Lock()
	s.segSize += int64(len(buf))
	s.size += int64(len(buf))
	s.ages.appended(int64(len(batch)), time.Now())
	s.count += int64(len(batch))
	s.mu.Unlock()
	return nil
}

// WriteError returns the error of the spool's last write, while its
// writes fail (a full disk, say), and nil once one succeeds: the events
// that could not be spooled stay in the gateway's crash journal. A crash
// review saw /readyz say nothing of it while every append failed.
//
// While it is set, WriteError itself tries the disk, at most once every
// probeEvery: a probe file of probeBytes in the spool's directory,
// written, fsync'd and removed. Once that succeeds the error is cleared:
// the spool writes only while NATS is unreachable, and /readyz went on
// showing the error of a disk freed long since (a crash review).
func (s *Spool) WriteError() error {
	s.mu.Lock()
	err := s.writeErr
	if err == nil || time.Since(s.probedAt) < probeEvery {
		s.mu.Unlock()
		return err
	}
	s.probedAt = time.Now()
	s.mu.Unlock()
	if probeDir(s.dir) != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writeErr == err { // not a newer commit's
		s.writeErr = nil
	}
	return s.writeErr
}

// Stats returns the events and bytes not yet published, and the age of
// the oldest (0 when empty): since its append, or after a restart since
// its request was received (see spooledBy). The bytes include those of
// damaged records found at open, until a drain sets them aside (see
// DrainSkipping): bytes with no event.
func (s *Spool) Stats() (events, bytes int64, oldest time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count > 0 {
		oldest = time.Since(s.ages.oldest())
	}
	return s.count, s.size, oldest
}

// Close stops the writer after the pending appends are written, then
// closes the segment and releases the directory. A Close called while
// another runs returns once that one has, with its error: a lifecycle
// review saw the second return at once, the spool still open.
func (s *Spool) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Spool) close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.done
	err := s.seg.Close()
	if lerr := s.lock.Release(); err == nil {
		err = lerr
	}
	return err
}
