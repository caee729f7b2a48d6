// Package journal is the gateway's crash journal: a local record of every
// upstream request in flight, so that a gateway killed mid-request (kill
// -9, a crash, the OOM killer) loses none of its billable usage. Each
// request is journaled when it starts (its usage event as known then, and
// its body, from which its prompt is estimated), checkpointed while it
// streams (the output streamed since the last checkpoint, and the
// provider's usage report so far), and ended once its final usage event is
// durable. At the next start, Open returns every request begun and not
// ended, for the gateway to record as crashed with its usage estimated
// from what the journal holds.
//
// Writes cost no fsync per request: a request's begin is written by Begin
// itself, and every other record is appended to an in-memory buffer and
// written by one goroutine in group writes; both survive the death of the
// process (the kernel holds them). The segment is fsync'd every second,
// which bounds what a power loss can take. Segments are
// compacted as they fill: the requests still open are rewritten, merged,
// into the next segment, and the older segments removed. Every record's
// crc is sealed with a secret seed, kept in its segment's file name (see
// seals), so that records forged inside a request's body or output are not
// taken for the journal's own when damage makes recovery search for one.
//
// It imports only the standard library, the usage contract and
// github.com/google/uuid.
package journal

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/meter/dirlock"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Limits on what one request keeps in the journal, in bytes. Beyond them
// the journal keeps the lengths, and recovery scales its estimate.
const (
	// MaxBody is the most of a request body journaled.
	MaxBody = 256 << 10
	// MaxOutput is the most of a request's output journaled.
	MaxOutput = 1 << 20
)

// maxSegment is the size at which the journal compacts into a new segment,
// on a disk of 8 times that or more (see segmentLimit).
var maxSegment int64 = 8 << 20

// syncInterval is how often the journal's segment is fsync'd while it is
// written to.
const syncInterval = time.Second

// CheckpointDelay is the longest a checkpoint waits in memory before the
// writer writes it (with whatever else is buffered by then). A begin, an
// end or a failed event wakes the writer at once; a checkpoint does not:
// streams checkpoint every few chunks, and a wake-up of the writer and a
// write per checkpoint were the most frequent work the gateway did beside
// the relay itself at 100 paced streams (BENCHMARKS.md, "Stop 27").
const CheckpointDelay = 10 * time.Millisecond

// Journal is the crash journal of one gateway process. Its methods are
// safe for concurrent use and never wait for an fsync of their own; only
// Begin waits, for its record's write (see Begin).
type Journal struct {
	dir  string
	lock *dirlock.Lock // dir's, held from Open to Close
	// seed seals every record this process writes, in segments named
	// with it (see seals).
	seed uint32

	// fmu guards the segment (seg, segNum, segSize, compactAt, dirty,
	// torn) and out:
	// writes to it and its compaction (its periodic fsync runs outside,
	// on the writer goroutine). It is never taken under mu.
	// Records leave buf only under it, so that they reach the segment in
	// the order they were made.
	fmu   sync.Mutex
	dirty bool   // written since the last fsync
	torn  bool   // a failed write's bytes could not be cut off yet
	out   []byte // the records being written (buf's spare)

	mu     sync.Mutex
	buf    []byte             // records not yet written
	open   map[[16]byte]uint8 // requests begun and not ended: their kind (begun or failed)
	closed bool

	closeOnce sync.Once // Close's work, which a second Close waits for
	closeErr  error
	// failing is the error of the last write or fsync while it failed,
	// nil once one succeeds after it (see Failing); isFailing says whether
	// it is set, read without mu on every request.
	failing   error
	isFailing atomic.Bool
	// lost is what no later write can give back, reported by Close: the
	// bytes of records dropped past maxRetained, and an fsync that failed
	// (the kernel may have dropped the pages it could not write).
	lostBytes int64
	syncErr   error
	// compactErr is the last compaction's error (it is tried again).
	compactErr error
	wake       chan struct{}
	done       chan struct{}
	// lazy fires CheckpointDelay after the first checkpoint buffered since
	// the last write (lazyArmed), to wake the writer for it.
	lazy      *time.Timer
	lazyArmed bool
	seg       *os.File
	segNum    uint64
	segSize   int64
	// segLimit is the size at which the segment is compacted, in bytes
	// (segmentLimit), and segBound the size past which it does not grow
	// until compacted (segmentBound), both set by Open; segStart is its
	// size when it was opened or compacted into.
	segLimit, segBound, segStart int64
	// compactAt is the size at which the writer compacts the segment next,
	// past segLimit: twice what the last compaction kept of the open
	// requests (when they alone fill a segment, each compaction would
	// otherwise start the next at once), or, after a failure, another
	// quarter of segLimit. Only the writer sets it.
	compactAt int64
	// older holds the segments of earlier processes, kept until Release.
	older []segFile
	// damaged are the paths of older segments with damaged bytes, which
	// Release keeps aside (see keepAside).
	damaged map[string]bool
	// hidden is the last hidden reasoning averages journaled (or
	// recovered), kept through compaction.
	hidden []byte
	// recovered are the averages an earlier process left.
	recovered map[string]int64
	// spend is the last spend charges journaled (or recovered), kept
	// through compaction; recoveredSpend those an earlier process left.
	spend, recoveredSpend []byte
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Open opens the journal in dir (creating it if needed) and returns the
// requests an earlier process began and did not end, oldest first. They
// stay in the journal until Release is called: call it once their events
// are durable, so that a crash during recovery loses nothing either.
func Open(dir string) (j *Journal, reqs []Request, err error) {
	// One process at a time: a second gateway on this journal (reached
	// through a link or a mount of another data directory's, which the
	// data directory's own lock does not see) took the first's requests in
	// flight for a crashed process's, billed them as estimates, and its
	// Release deleted the segment the first still wrote (a crash review).
	lock, err := dirlock.Acquire(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	defer func() {
		if err != nil {
			_ = lock.Release()
		}
	}()
	segs, err := segmentFiles(dir)
	if err != nil {
		return nil, nil, unreadable(dir, err)
	}
	warnAlike(dir, segs)
	seed, err := newSeed()
	if err != nil {
		return nil, nil, err
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "*"+compactingSuffix)); len(tmps) > 0 {
		for _, t := range tmps { // a compaction a crash cut short: its segment stands
			_ = os.Remove(t)
		}
	}
	next := uint64(1)
	if len(segs) > 0 {
		next = segs[len(segs)-1].n + 1
	}
	gone, err := replaced(dir, segs)
	if err != nil {
		return nil, nil, unreadable(dir, err)
	}
	live := slices.DeleteFunc(slices.Clone(segs), func(f segFile) bool { return gone[f.segKey] })
	damaged := map[string]bool{}
	reqs, last, err := recoverNoting(dir, live, nil, -1, damaged)
	if err != nil {
		return nil, nil, unreadable(dir, err)
	}
	j = &Journal{dir: dir, lock: lock, seed: seed, open: map[[16]byte]uint8{}, wake: make(chan struct{}, 1), done: make(chan struct{}),
		older: segs, damaged: damaged, recovered: last.hidden, spend: last.spend, recoveredSpend: last.spend, lazy: time.NewTimer(time.Hour)}
	j.segLimit = segmentLimit(dir)
	j.segBound = segmentBound(dir, j.segLimit)
	j.lazy.Stop()
	if last.hidden != nil {
		j.hidden, _ = json.Marshal(last.hidden)
	}
	if err := j.openSegment(next); err != nil {
		return nil, nil, unreadable(dir, err)
	}
	if err := j.carryStates(); err != nil {
		return nil, nil, unreadable(dir, err)
	}
	go j.writer()
	return j, reqs, nil
}

// carryStates writes the states an earlier process left (the hidden
// reasoning averages, the spend charges) at the start of the new segment,
// as compaction keeps them: Release deletes the older segments that hold
// them, and a process that stopped before it journaled its own (a
// gateway killed within seconds of its start, a crash loop) left the next
// none of them. Call it from Open, before the writer starts.
func (j *Journal) carryStates() error {
	var b []byte
	if j.hidden != nil {
		b = appendHidden(b, j.hidden, j.seed)
	}
	if j.spend != nil {
		b = appendSpend(b, j.spend, j.seed)
	}
	if b == nil {
		return nil
	}
	j.fmu.Lock()
	defer j.fmu.Unlock()
	return j.writeSegment(b)
}

// unreadable is Open's error err when the journal in dir cannot be read
// or written (a restore that changed its owner or mode, a failing disk),
// saying what to do: a start that refused with the file system's error
// alone left an operator to guess, and deleting the segment, the obvious
// guess, loses the requests in flight it holds, unbilled.
func unreadable(dir string, err error) error {
	return fmt.Errorf("%w: make the journal directory %s and its segments readable and writable by the gateway's user; "+
		"do not delete the segments: they hold the requests in flight at the last stop, which are billed from them", err, dir)
}

// Release removes what earlier processes left in the journal: call it
// once the requests Open returned are durably recorded. A segment with
// damaged bytes is kept aside instead, renamed <segment>.damaged, and the
// oldest of those kept aside before are deleted past a bound (see
// keepAside and damagedSuffix). It returns the file system's error when a
// segment can be neither removed nor kept aside.
func (j *Journal) Release() error {
	j.mu.Lock()
	older, damaged := j.older, j.damaged
	j.older = nil
	j.mu.Unlock()
	kept := map[string]bool{}
	for _, f := range older {
		path := filepath.Join(j.dir, f.name)
		if damaged[path] {
			aside, err := keepAside(path)
			if err != nil {
				return err
			}
			kept[aside] = true
			slog.Warn("journal: a segment with damaged records is kept aside, not deleted: it is never read again; "+
				"bill by hand the requests its warnings named, then delete it (docs/operations.md, \"Durability\")",
				"file", aside)
			continue
		}
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("journal: %w", err)
		}
	}
	if len(kept) > 0 {
		pruneDamaged(j.dir, kept)
		if err := dirlock.SyncDir(j.dir); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
	}
	return nil
}

// Begin journals the start of a request: e is its usage event as known
// when it starts (ids, time, model, endpoint), and body its request body
// (at most MaxBody of it is kept). The event's Usage may carry a rough
// prompt estimate, and its ReasoningTokens the reasoning the model is
// expected to spend without showing it (see Request).
//
// It returns once the record is written (handed to the kernel, where it
// survives the death of the process; not fsync'd), or its write failed
// (the writer then retries it): a request goes upstream right after, and
// one the upstream serves while its begin is still in this process's
// buffer is lost to a kill -9, its usage never billed. It writes the
// record itself, on the caller's goroutine: handed to the writer
// goroutine, at 100 paced streams a begin waited 2 to 30 ms for that
// goroutine to be scheduled, twice (BENCHMARKS.md, "Stop 34"). It may
// wait behind another write, or the moment a compaction switches segments,
// never for an fsync.
func (j *Journal) Begin(e *usage.Event, body []byte) {
	id, ok := parseID(e.ID)
	if !ok {
		return // not a request of ours: its event is refused downstream
	}
	kept := body[:min(len(body), MaxBody)]
	bp := beginRecords.Get().(*[]byte)
	defer putBeginRecord(bp)
	rec := appendHeader(slices.Grow((*bp)[:0], headerLen+8+eventCap+len(kept)), kindBegin, id, time.Now())
	at := len(rec)
	rec = appendEvent(append(rec, 0, 0, 0, 0), e) // encoded in place, after its length
	binary.BigEndian.PutUint32(rec[at:], uint32(len(rec)-at-4))
	rec = binary.BigEndian.AppendUint32(rec, uint32(len(body)))
	rec = append(rec, kept...)
	finishRecord(rec, j.seed)
	*bp = rec // copied into the segment's write below, then free
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	// Open before written: a compaction that notes where the segment ends
	// in between finds no record of it before that point, and copies the
	// record to the new segment from after it (see compact).
	j.open[id] = kindBegin
	j.mu.Unlock()
	// What is buffered goes first, in one write with the begin: a retried
	// attempt's begin reuses its request's id, whose end (of the attempt
	// before) may be buffered still, and must not land after it.
	j.fmu.Lock()
	j.mu.Lock()
	j.out, j.buf = j.buf, j.out[:0]
	j.mu.Unlock()
	j.out = append(j.out, rec...)
	err := j.writeBounded(j.out)
	if err != nil {
		j.fail(err)
		j.mu.Lock()
		if len(j.out)+len(j.buf) <= maxRetained { // kept whole and in order: the writer tries again
			j.buf = append(j.out, j.buf...)
		} else {
			j.lostBytes += int64(len(j.out))
		}
		j.mu.Unlock()
		j.out = nil
	} else {
		j.wrote()
	}
	full := j.segSize >= j.segLimit
	j.fmu.Unlock()
	if full || err != nil {
		j.signal() // the writer compacts, or retries
	}
}

// beginRecords holds Begin's record buffers between calls: a begin record
// (its event and the request's body) is copied into the segment's write as
// soon as it is made, and a new buffer for each was 4% of the bytes the
// process allocated under cmd/loadgen's short streams (BENCHMARKS.md,
// "Issue 16, stop 40").
var beginRecords = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledRecord is the largest begin record buffer kept for reuse
// (bytes): one of a request with a body of several MiB is let go.
const maxPooledRecord = 64 << 10

func putBeginRecord(bp *[]byte) {
	if cap(*bp) <= maxPooledRecord {
		*bp = (*bp)[:0]
		beginRecords.Put(bp)
	}
}

// writeSegment appends records to the segment; a failed write is cut off
// again (the reader stops at the first bad record, which would hide every
// later one). Call it under fmu.
func (j *Journal) writeSegment(b []byte) error {
	if j.seg == nil {
		return os.ErrClosed
	}
	if j.torn {
		if err := j.seg.Truncate(j.segSize); err != nil {
			return err
		}
		j.torn = false
	}
	if _, err := j.seg.Write(b); err != nil {
		j.torn = j.seg.Truncate(j.segSize) != nil // cut again before the next write
		return err
	}
	j.segSize += int64(len(b))
	j.dirty = true
	return nil
}

// Checkpoint journals a request's progress: output is the text it
// streamed since its last checkpoint, and reasoning the part of it that is
// reasoning shown as text (journaled apart, so that recovery counts it as
// reasoning tokens); reported, when not nil, is the provider's latest usage
// report; reasoningShown says the stream showed its reasoning as text (so
// none of it is hidden). The record is written within CheckpointDelay, or
// sooner with the next begin, end or failure.
func (j *Journal) Checkpoint(id string, output, reasoning string, reported *usage.Tokens, reasoningShown bool) {
	key, ok := parseID(id)
	if !ok {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return
	}
	if _, open := j.open[key]; !open {
		return
	}
	start := j.startRecord(kindCheckpoint, key, time.Now())
	j.buf = appendProgress(j.buf, reported, reasoningShown)
	if skipped := len(output) - MaxOutput; skipped > 0 {
		// One checkpoint keeps at most MaxOutput of the output (and the
		// length of the rest), as compaction does: a record beyond the
		// reader's bound would end its segment there, hiding the records
		// after it (one large upstream event can be 8 MiB).
		j.buf[len(j.buf)-1-countsLen(reported)] |= flagSkipped
		j.buf = binary.BigEndian.AppendUint64(j.buf, uint64(skipped))
		output = output[:MaxOutput]
	}
	j.buf = append(j.buf, output...)
	finishRecord(j.buf[start:], j.seed)
	if reasoning != "" {
		// A record of its own (see kindReasoning).
		start = j.startRecord(kindReasoning, key, time.Now())
		j.buf = appendReasoning(j.buf, reasoning, len(reasoning))
		finishRecord(j.buf[start:], j.seed)
	}
	if !j.lazyArmed {
		j.lazyArmed = true
		j.lazy.Reset(CheckpointDelay)
	}
}

// End journals that a request's final event is durable: it is no longer
// in flight.
func (j *Journal) End(id string) {
	key, ok := parseID(id)
	if !ok {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return
	}
	delete(j.open, key)
	j.endRecord(j.startRecord(kindEnd, key, time.Now()))
}

// Fail journals a request's final event that could not be made durable
// (the spool refused it): the next start returns it as it is.
func (j *Journal) Fail(e *usage.Event) {
	key, ok := parseID(e.ID)
	if !ok {
		return
	}
	ev := encodeEvent(e)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return
	}
	j.open[key] = kindFail
	start := j.startRecord(kindFail, key, time.Now())
	j.buf = append(j.buf, ev...)
	j.endRecord(start)
}

// HiddenReasoning journals the gateway's averages of the reasoning each
// model spends without showing it (tokens, by model), so that a process
// that restarts, and crashes again before it has learnt them anew, still
// estimates it. It replaces the averages journaled before.
func (j *Journal) HiddenReasoning(avg map[string]int64) {
	b, err := json.Marshal(avg)
	if err != nil {
		return
	}
	j.state(&j.hidden, b, appendHidden)
}

// state journals a state of the gateway's, payload, in the records add
// makes of it (appendHidden, appendSpend), and keeps payload in *last
// (j.hidden or j.spend), which compaction and the next Open copy forward.
func (j *Journal) state(last *[]byte, payload []byte, add func(b, payload []byte, seed uint32) []byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return
	}
	*last = payload
	j.buf = add(j.buf, payload, j.seed)
	j.signal()
}

// RecoveredHiddenReasoning is the last hidden reasoning averages an
// earlier process journaled (nil when none).
func (j *Journal) RecoveredHiddenReasoning() map[string]int64 { return j.recovered }

// SpendCharges journals the gateway's spend charges since its keys' and
// customers' last states (snapshot, JSON the journal keeps as it is), so
// that a gateway that restarts while the meter cannot write (and so no
// newer state comes) still counts what it admitted since. It replaces the
// snapshot journaled before; data that is not JSON is not journaled.
func (j *Journal) SpendCharges(snapshot []byte) {
	if !json.Valid(snapshot) {
		return
	}
	j.state(&j.spend, bytes.Clone(snapshot), appendSpend)
}

// RecoveredSpendCharges is the last spend charges an earlier process
// journaled (nil when none): JSON, as SpendCharges was given it.
func (j *Journal) RecoveredSpendCharges() []byte { return j.recoveredSpend }

// Open reports the requests in flight.
func (j *Journal) Open() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.open)
}

// closeRetry is how long Close goes on trying to write what is buffered
// while the writes fail (a full disk an operator may be freeing), and
// closeRetryEvery how often.
const (
	closeRetry      = 4 * time.Second
	closeRetryEvery = 100 * time.Millisecond
)

// Close writes and fsyncs what is buffered and stops the writer; later
// calls journal nothing. While the writes fail, it tries again for up to
// closeRetry. It returns an error when records could not be written, at
// Close or before (dropped past maxRetained): the requests they began or
// ended are then lost to the next start (the error says how many bytes;
// the gateway logged each failed event). It returns one too when an fsync
// failed. A failed write that a later one got past is not reported. It is
// idempotent: a Close called while another runs returns once that one has
// (its last records written, its directory released), with its error.
func (j *Journal) Close() error {
	j.closeOnce.Do(func() { j.closeErr = j.close() })
	return j.closeErr
}

func (j *Journal) close() error {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	j.signal()
	<-j.done
	j.fmu.Lock()
	defer j.fmu.Unlock()
	var err error
	for deadline := time.Now().Add(closeRetry); ; {
		j.mu.Lock()
		unwritten := len(j.buf)
		j.mu.Unlock()
		if unwritten == 0 {
			break
		}
		if time.Now().After(deadline) || j.seg == nil {
			j.mu.Lock()
			j.lostBytes += int64(unwritten)
			j.mu.Unlock()
			break
		}
		time.Sleep(closeRetryEvery)
		j.mu.Lock()
		out := j.buf
		j.buf = nil
		j.mu.Unlock()
		if werr := j.writeSegment(out); werr != nil {
			j.fail(werr)
			j.mu.Lock()
			j.buf = append(out, j.buf...)
			j.mu.Unlock()
		}
	}
	j.mu.Lock()
	switch {
	case j.lostBytes > 0:
		err = fmt.Errorf("journal: %d bytes of records could not be written (%v): the requests they begin or end are lost to the next start", j.lostBytes, j.failing)
	case j.syncErr != nil:
		err = fmt.Errorf("%w: what it wrote before may not be on disk", j.syncErr)
	}
	j.mu.Unlock()
	if j.seg != nil {
		if serr := j.seg.Sync(); err == nil {
			err = serr
		}
		if cerr := j.seg.Close(); err == nil {
			err = cerr
		}
		j.seg = nil
	}
	if lerr := j.lock.Release(); err == nil {
		err = lerr
	}
	return err
}

func (j *Journal) openSegment(n uint64) error {
	f, err := os.OpenFile(segPath(j.dir, n, j.seed), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if j.seg != nil {
		j.seg.Close()
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	reserve(f, st.Size()+j.segmentReserve())
	j.seg, j.segNum, j.segSize, j.segStart = f, n, st.Size(), st.Size()
	return dirlock.SyncDir(j.dir)
}

// segKey names a segment: its number and its seed.
type segKey struct {
	n    uint64
	seed uint32
}

// segFile is a segment file of the journal's directory.
type segFile struct {
	segKey
	name string // its file name, in the journal's directory
}

// segmentFiles lists the segment files in dir, by number, then seed, then
// name. One journal never numbers two segments alike (a process numbers
// its first after the last it finds, and a compaction's after the one it
// replaces), but a directory can hold two journals' segments (one
// gateway's data directory copied or restored over another's): each is
// its own, numbered alike or not, and all are read (see warnAlike). Known
// by number alone, of two numbered alike one was read and the other never
// read or deleted.
func segmentFiles(dir string) ([]segFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var out []segFile
	for _, e := range ents {
		if n, seed, ok := parseSegment(e.Name()); ok {
			out = append(out, segFile{segKey{n, seed}, e.Name()})
		}
	}
	slices.SortFunc(out, func(a, b segFile) int {
		if c := cmp.Compare(a.n, b.n); c != 0 {
			return c
		}
		if c := cmp.Compare(a.seed, b.seed); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return out, nil
}

// warnAlike warns of the segments of segs numbered alike, naming them:
// two journals in one directory. Each is read, its requests recovered,
// and released (each journal's records name requests of its own, and
// each is read in its own order), so nothing is lost, but a gateway
// whose journal is another's has its requests in flight recovered by the
// wrong process.
func warnAlike(dir string, segs []segFile) {
	for i := 0; i < len(segs); {
		k := i + 1
		for k < len(segs) && segs[k].n == segs[i].n {
			k++
		}
		if k-i > 1 {
			var names []string
			for _, f := range segs[i:k] {
				names = append(names, f.name)
			}
			slog.Warn("journal: segments numbered alike: two journals' segments in one directory (a data directory copied or restored over another). "+
				"Both are read, their requests in flight recovered, and released as usual; keep each gateway's data directory its own",
				"dir", dir, "number", segs[i].n, "files", names)
		}
		i = k
	}
}
