package journal

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Request is a request an earlier process began and did not end, as the
// journal holds it: what the gateway needs to record it as crashed.
type Request struct {
	// Event is its usage event as it was when the request began (ids,
	// time, model, endpoint). Usage.PromptTokens holds the rough prompt
	// estimate made then, and Usage.ReasoningTokens the reasoning the
	// model was expected to spend without showing it.
	Event usage.Event
	// Body is the request body, at most MaxBody bytes of BodyLen.
	Body    []byte
	BodyLen int
	// Output is the text the request streamed up to its last checkpoint,
	// at most MaxOutput bytes of OutputLen.
	Output    []byte
	OutputLen int
	// Reported is the provider's last usage report, if any.
	Reported *usage.Tokens
	// ReasoningShown says the stream showed reasoning as text.
	ReasoningShown bool
	// Reasoning is the reasoning text the request streamed (a part of
	// Output, journaled apart so that recovery counts it as reasoning),
	// at most MaxOutput bytes of ReasoningLen.
	Reasoning    []byte
	ReasoningLen int
	// Checkpoints counts its checkpoints: the gateway checkpoints a
	// request first when its upstream answers, so none means the upstream
	// had not answered yet.
	Checkpoints int
	// Began and Last are the times of its first and last records.
	Began, Last time.Time
	// Final is its final event, when it was made but could not be made
	// durable (see Journal.Fail): it is to be recorded as it is.
	Final *usage.Event
}

// Record kinds.
const (
	kindBegin      uint8 = 1
	kindCheckpoint uint8 = 2
	kindEnd        uint8 = 3
	kindFail       uint8 = 4
	kindHidden     uint8 = 5 // the hidden reasoning averages, by model (JSON)
	// kindCompacted opens a segment compaction wrote: its payload is the
	// number of the segment it replaces (uint64), which recovery skips.
	kindCompacted uint8 = 6
	// kindReasoning follows a checkpoint whose output holds reasoning
	// shown as text: its payload is that reasoning (see appendReasoning).
	// A record of its own, not a part of the checkpoint's: a release
	// before it ignores the kind, and so reads the output once.
	kindReasoning uint8 = 7
	// kindSpend holds the gateway's spend charges since its keys' and
	// customers' last states (JSON the journal does not read: see
	// Journal.SpendCharges), or a part of them (appendSpend). A release
	// before it ignores the kind.
	kindSpend uint8 = 8
)

// A record is [length uint32][crc32c uint32][data]: data is [kind uint8]
// [request id, 16 bytes][time, Unix nanoseconds int64][payload]; length
// and crc cover data, the crc seeded with the journal's secret (see seals).
//
//   - begin: [event JSON length uint32][event JSON][body length uint32][body]
//   - checkpoint: [flags uint8][6 int64 counts if flags&1][skipped uint64
//     if flags&4][output]
//   - reasoning (after a checkpoint): [reasoning not kept uint64][reasoning]
//   - end: nothing
//   - fail: [event JSON]
//   - hidden: [the averages JSON], request id all zeros
//   - spend: [the gateway's spend charges JSON], request id all zeros; or
//     [a part of it], request id [index u32][parts u32] and zeros (appendSpend)
const headerLen = 8 + 1 + 16 + 8

// Checkpoint flags. flagSkipped is followed, after the counts, by the
// length of output not kept, as a uint64.
const (
	flagReported  = 1
	flagReasoning = 2
	flagSkipped   = 4
)

// appendReasoning appends to b the payload of a reasoning record: at most
// MaxOutput bytes of the reasoning kept, of total bytes in all (the rest
// not kept, its length is).
func appendReasoning(b []byte, reasoning string, total int) []byte {
	kept := reasoning[:min(len(reasoning), MaxOutput)]
	b = binary.BigEndian.AppendUint64(b, uint64(max(total-len(kept), 0)))
	return append(b, kept...)
}

// countsLen is the length of the counts appendProgress writes for reported.
func countsLen(reported *usage.Tokens) int {
	if reported == nil {
		return 0
	}
	return 48
}

// startRecord appends a record's header with a placeholder length and crc,
// and returns where it starts; endRecord fills them in.
func (j *Journal) startRecord(kind uint8, id [16]byte, t time.Time) int {
	start := len(j.buf)
	j.buf = appendHeader(j.buf, kind, id, t)
	return start
}

// appendHeader appends a record's header to b, with a placeholder length
// and crc that finishRecord fills in.
func appendHeader(b []byte, kind uint8, id [16]byte, t time.Time) []byte {
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, kind)
	b = append(b, id[:]...)
	return binary.BigEndian.AppendUint64(b, uint64(t.UnixNano()))
}

func (j *Journal) endRecord(start int) {
	finishRecord(j.buf[start:], j.seed)
	j.signal()
}

// finishRecord fills in the length and crc of the record at the start of
// rec, the crc under seed (see seals).
func finishRecord(rec []byte, seed uint32) {
	data := rec[8:]
	binary.BigEndian.PutUint32(rec, uint32(len(data)))
	binary.BigEndian.PutUint32(rec[4:], checksum(seed, data))
}

func appendProgress(b []byte, reported *usage.Tokens, reasoningShown bool) []byte {
	var flags uint8
	if reported != nil {
		flags |= flagReported
	}
	if reasoningShown {
		flags |= flagReasoning
	}
	b = append(b, flags)
	if reported != nil {
		for _, c := range counts(reported) {
			b = binary.BigEndian.AppendUint64(b, uint64(*c))
		}
	}
	return b
}

func counts(u *usage.Tokens) [6]*int64 {
	return [6]*int64{&u.PromptTokens, &u.CachedTokens, &u.CacheWriteTokens, &u.CompletionTokens, &u.ReasoningTokens, &u.WebSearchRequests}
}

func encodeEvent(e *usage.Event) []byte {
	return appendEvent(make([]byte, 0, eventCap), e)
}

// eventCap is the capacity in bytes to encode an event into: a gateway's
// event is about 630 bytes as JSON, and the 512 this was grew once for
// every event (5% of the gateway's allocated bytes under short streams).
const eventCap = 1024

// appendEvent appends e as JSON to b.
func appendEvent(b []byte, e *usage.Event) []byte {
	b2, err := e.AppendJSON(b)
	if err != nil { // a time json cannot hold: keep the id at least
		b2, _ = (&usage.Event{ID: e.ID}).AppendJSON(b)
	}
	return b2
}

// appendRequest appends r as records sealed with seed: a begin, one
// checkpoint with all its progress, and its failed final event if any (how
// compaction keeps it).
func appendRequest(b []byte, r *Request, seed uint32) []byte {
	id, _ := parseID(r.Event.ID)
	rec := func(kind uint8, t time.Time, payload func([]byte) []byte) {
		start := len(b)
		b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, kind)
		b = append(b, id[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(t.UnixNano()))
		b = payload(b)
		finishRecord(b[start:], seed)
	}
	ev := encodeEvent(&r.Event)
	rec(kindBegin, r.Began, func(b []byte) []byte {
		b = binary.BigEndian.AppendUint32(b, uint32(len(ev)))
		b = append(b, ev...)
		b = binary.BigEndian.AppendUint32(b, uint32(r.BodyLen))
		return append(b, r.Body...)
	})
	if r.Checkpoints > 0 { // none: its upstream had not answered
		rec(kindCheckpoint, r.Last, func(b []byte) []byte {
			b = appendProgress(b, r.Reported, r.ReasoningShown)
			if skipped := r.OutputLen - len(r.Output); skipped > 0 {
				// The output beyond MaxOutput is not kept, its length is.
				b[len(b)-1-countsLen(r.Reported)] |= flagSkipped
				b = binary.BigEndian.AppendUint64(b, uint64(skipped))
			}
			return append(b, r.Output...)
		})
		if r.ReasoningLen > 0 {
			rec(kindReasoning, r.Last, func(b []byte) []byte {
				return appendReasoning(b, string(r.Reasoning), r.ReasoningLen)
			})
		}
	}
	if r.Final != nil {
		f := encodeEvent(r.Final)
		rec(kindFail, r.Last, func(b []byte) []byte { return append(b, f...) })
	}
	return b
}

// appendCompacted appends the record that opens a segment compaction made
// from segment old, sealed with seed.
func appendCompacted(b []byte, old uint64, seed uint32) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, kindCompacted)
	b = append(b, make([]byte, 16)...)
	b = binary.BigEndian.AppendUint64(b, uint64(time.Now().UnixNano()))
	b = binary.BigEndian.AppendUint64(b, old)
	finishRecord(b[start:], seed)
	return b
}

// replaced returns the segments of segs that a later segment of segs
// replaces: a segment compaction made opens with a kindCompacted record
// naming the one it was made from, and is complete (it is renamed into
// place only once written and fsync'd), so a crash before that one was
// removed leaves both, and only the later one counts.
//
// A compaction's segment is sealed with the seed of the one it replaces
// (one process made both), so it replaces only the segment of that number
// and seed: in a directory that holds two journals (see segmentFiles),
// the other's segment of that number is its own, and was deleted unread.
func replaced(dir string, segs []segFile) (map[segKey]bool, error) {
	out := map[segKey]bool{}
	for _, f := range segs {
		kind, payload, err := firstRecord(filepath.Join(dir, f.name), f.seed)
		if err != nil {
			return nil, err
		}
		if kind == kindCompacted && len(payload) == 8 {
			out[segKey{binary.BigEndian.Uint64(payload), f.seed}] = true
		}
	}
	return out, nil
}

// firstRecord returns the kind and payload of the first record of the
// file at path, or kind 0 when it has none intact there. It reads that
// record alone: recovery reads (and warns of) the rest. Its crc is
// checked under seed.
func firstRecord(path string, seed uint32) (kind uint8, payload []byte, err error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	if st, _, data := readRecord(bufio.NewReader(f), nil, seed); st == recordIntact {
		return data[0], data[payloadAt:], nil
	}
	return 0, nil, nil
}

// recordState is what readRecord found.
type recordState int

const (
	recordEnd       recordState = iota // the file's end, or a record the file ends inside: the torn tail
	recordIntact                       // its length sound and its crc right (under the segment's seed)
	recordBadCRC                       // its length sound, its crc wrong
	recordBadLength                    // a length no record has
)

// payloadAt is where a record's payload begins in its data (after the
// kind, the id and the time).
const payloadAt = headerLen - 8

// soundLength reports whether n is a length a record's data can have.
func soundLength(n uint32) bool { return n >= payloadAt && n <= maxRecord }

// readRecord reads the record at r's position, its data into data's
// storage (returned, grown as needed), and its length, checking its crc
// under seed.
func readRecord(r io.Reader, data []byte, seed uint32) (recordState, uint32, []byte) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return recordEnd, 0, data
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if !soundLength(n) {
		return recordBadLength, n, data
	}
	data = append(data[:0], make([]byte, n)...)
	if _, err := io.ReadFull(r, data); err != nil {
		return recordEnd, n, data
	}
	if checksum(seed, data) != binary.BigEndian.Uint32(hdr[4:]) {
		return recordBadCRC, n, data
	}
	return recordIntact, n, data
}

// recoverSegments reads the segments in order and returns the requests
// begun and not ended, in the order they began. A torn record ends its
// segment's reading (a crash mid-write leaves one at the end); a damaged
// one is skipped (see scan).
// With only not nil, it reads the records of those requests alone (and
// no hidden reasoning averages), skipping the others before decoding
// them: compaction knows which requests are open, and in a full segment
// nearly all of them have ended. Each segment's crcs are checked under
// its seed in s.
func recoverSegments(dir string, segs []uint64, only map[[16]byte]bool, s seals) ([]Request, states, error) {
	return recoverSegmentsUpTo(dir, segs, only, -1, s)
}

// recoverSegmentsUpTo is recoverSegments reading the last segment only up
// to its first upTo bytes (all of it when upTo < 0): compaction reads the
// records written before it began, while others are appended.
func recoverSegmentsUpTo(dir string, segs []uint64, only map[[16]byte]bool, upTo int64, s seals) ([]Request, states, error) {
	files := make([]segFile, len(segs))
	for i, n := range segs {
		files[i] = segFile{segKey{n, s.seedOf(n)}, filepath.Base(segPath(dir, n, s.seedOf(n)))}
	}
	return recoverNoting(dir, files, only, upTo, nil)
}

// recoverNoting is recoverSegmentsUpTo of the segment files segs, noting
// in damaged, when not nil, the paths of segments whose bytes it could not
// all read (see noteDamage).
func recoverNoting(dir string, segs []segFile, only map[[16]byte]bool, upTo int64, damaged map[string]bool) ([]Request, states, error) {
	var last states
	var spend spendParts
	byID := map[[16]byte]*Request{}
	var order [][16]byte
	for i, sf := range segs {
		limit := int64(-1)
		if i == len(segs)-1 {
			limit = upTo
		}
		path := filepath.Join(dir, sf.name)
		var bad func(io.ReaderAt, int64, int64) error
		if damaged != nil {
			bad = func(f io.ReaderAt, from, to int64) error { return noteDamage(damaged, path, f, from, to) }
		}
		err := scanNoting(path, sf.n, limit, sf.seed, bad, func(kind uint8, id [16]byte, t time.Time, payload []byte) {
			if only != nil && !only[id] {
				return
			}
			r := byID[id]
			switch kind {
			case kindBegin:
				if len(payload) < 4 {
					return
				}
				evLen := int(binary.BigEndian.Uint32(payload))
				if len(payload) < 4+evLen+4 {
					return
				}
				var e usage.Event
				if json.Unmarshal(payload[4:4+evLen], &e) != nil {
					return
				}
				rest := payload[4+evLen:]
				switch {
				case r == nil:
					r = &Request{}
					byID[id] = r
					order = append(order, id)
				default:
					// Begun again without an end between: compaction's copy of
					// the request, in the segment after this one, beside which
					// a crash left the segment it was made from. The copy's
					// checkpoint holds all the output the request had, so
					// what came before it is dropped, not added twice.
					*r = Request{}
				}
				r.Event, r.BodyLen, r.Body = e, int(binary.BigEndian.Uint32(rest)), append([]byte(nil), rest[4:]...)
				r.Began, r.Last = t, t
			case kindCheckpoint:
				if r == nil || len(payload) < 1 {
					return
				}
				flags, rest := payload[0], payload[1:]
				if flags&flagReported != 0 {
					if len(rest) < 48 {
						return
					}
					var u usage.Tokens
					for i, c := range counts(&u) {
						*c = int64(binary.BigEndian.Uint64(rest[8*i:]))
					}
					r.Reported, rest = &u, rest[48:]
				}
				if flags&flagSkipped != 0 {
					if len(rest) < 8 {
						return
					}
					r.OutputLen += int(binary.BigEndian.Uint64(rest))
					rest = rest[8:]
				}
				r.ReasoningShown = r.ReasoningShown || flags&flagReasoning != 0
				room := MaxOutput - len(r.Output)
				r.Output = append(r.Output, rest[:min(len(rest), max(room, 0))]...)
				r.OutputLen += len(rest)
				r.Last = t
				r.Checkpoints++
			case kindReasoning:
				if r == nil || len(payload) < 8 {
					return
				}
				text := payload[8:]
				room := MaxOutput - len(r.Reasoning)
				r.Reasoning = append(r.Reasoning, text[:min(len(text), max(room, 0))]...)
				r.ReasoningLen += len(text) + int(binary.BigEndian.Uint64(payload))
			case kindFail:
				if r == nil {
					return
				}
				var e usage.Event
				if json.Unmarshal(payload, &e) == nil {
					r.Final, r.Last = &e, t
				}
			case kindEnd:
				delete(byID, id)
			case kindHidden:
				if m, ok := decodeHidden(payload); ok {
					last.hidden = m
				}
			case kindSpend:
				if b := spend.add(id, payload); b != nil {
					last.spend = b
				}
			}
		})
		if err != nil {
			return nil, states{}, err
		}
	}
	var out []Request
	for _, id := range order {
		if r, ok := byID[id]; ok {
			out = append(out, *r)
			delete(byID, id) // an id begun twice is returned once
		}
	}
	return out, last, nil
}

// scan calls fn for each intact record of the file at path. A torn or
// corrupt tail ends it; a bad record with intact records after it (bytes
// damaged on disk, or a block a power loss did not write: a crash of the
// process tears only the tail) is skipped, with a warning, and the scan
// resumes at the next intact record.
//
// A record's bytes are partly a client's and an upstream's (the request
// body, the model's output), so they can hold what looks like a whole
// record, crc and all. None inside a bad record is taken for one while its
// length is sound: a record the file ends inside is the torn tail,
// whatever it holds, and a record whose length is sound but whose crc is
// not is skipped whole, to where its length says it ends, where the next
// record is read as any other (torn, damaged or intact). Only past a
// record whose length itself is damaged is the search made byte by byte
// from its second byte; a length that is damaged and still sound loses
// the records it spans, or, when shorter, reads on from inside the
// record. There a forged record is found only if its crc is right under
// seed, the segment's secret seed (see seals): one forgery in 2^32.
//
// With limit ≥ 0 it reads only the file's first limit bytes, as if the
// file ended there.
func scan(path string, seg uint64, limit int64, seed uint32, fn func(kind uint8, id [16]byte, t time.Time, payload []byte)) error {
	return scanNoting(path, seg, limit, seed, nil, fn)
}

// scanNoting is scan giving bad, when not nil, each span of the file it
// does not read (from, to: a record skipped, the bytes a search for the
// next record passed over, the tail), with the file to read it from; an
// error from bad ends the scan.
func scanNoting(path string, seg uint64, limit int64, seed uint32, bad func(f io.ReaderAt, from, to int64) error,
	fn func(kind uint8, id [16]byte, t time.Time, payload []byte)) error {
	if bad == nil {
		bad = func(io.ReaderAt, int64, int64) error { return nil }
	}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	size := st.Size()
	if limit >= 0 && limit < size {
		size = limit
	}
	sr := io.NewSectionReader(f, 0, size)
	r := bufio.NewReaderSize(sr, 64<<10)
	var data []byte
	off := int64(0)
	for {
		var st recordState
		var n uint32
		st, n, data = readRecord(r, data, seed)
		switch st {
		case recordEnd:
			if limit < 0 {
				damagedTail(path, seg, off, size)
				if off < size {
					return bad(sr, off, size)
				}
			}
			return nil // the end, or the torn tail
		case recordBadCRC:
			// Skipped whole: the next record begins where its length says,
			// and is read (and judged, torn, damaged or intact) as any other.
			// A search from there would look inside it, were it bad too.
			slog.Warn("journal: a corrupt record skipped", "dir", filepath.Dir(path), "segment", seg, "offset", off, "skipped_bytes", 8+int64(n))
			if err := bad(sr, off, off+8+int64(n)); err != nil {
				return err
			}
			off += 8 + int64(n)
			continue
		case recordBadLength:
			// The next record may be anywhere.
			next, err := resync(sr, size, off+1, seed)
			if err != nil {
				return err
			}
			if next < 0 {
				if limit < 0 {
					damagedTail(path, seg, off, size)
					return bad(sr, off, size)
				}
				return nil // a torn or corrupt tail
			}
			slog.Warn("journal: a corrupt record skipped; the records after it are kept",
				"dir", filepath.Dir(path), "segment", seg, "offset", off, "skipped_bytes", next-off)
			if err := bad(sr, off, next); err != nil {
				return err
			}
			if _, err := sr.Seek(next, io.SeekStart); err != nil {
				return fmt.Errorf("journal: %w", err)
			}
			r.Reset(sr)
			off = next
			continue
		}
		off += 8 + int64(n)
		var id [16]byte
		copy(id[:], data[1:17])
		t := time.Unix(0, int64(binary.BigEndian.Uint64(data[17:payloadAt]))).UTC()
		fn(data[0], id, t, data[payloadAt:])
	}
}

// damagedTail warns of the bytes of the segment at path from off to its
// size, which hold no whole record: a write a power loss cut short, or,
// on a disk that damaged them (zeros where blocks were never written, a
// damaged length with nothing intact after it), records of requests that
// are then lost to recovery. A kill -9 leaves none (the kernel keeps whole
// writes), and a clean stop none: a crash review saw a zeroed segment's
// requests in flight go unbilled without a trace.
func damagedTail(path string, seg uint64, off, size int64) {
	if size > off {
		slog.Warn("journal: the end of a segment holds no whole record and is not read: a write a power loss cut short, "+
			"or, if the disk damaged it, requests in flight lost to recovery (their usage is not billed)",
			"dir", filepath.Dir(path), "segment", seg, "offset", off, "bytes", size-off)
	}
}

// maxRecord bounds a record's length: a longer one is corrupt.
const maxRecord = MaxBody + 2*MaxOutput + 64<<10

// resync returns the offset of the first intact record of f (size bytes)
// at or after from, its crc right under seed, or -1 when there is none:
// the bad record is the file's tail.
func resync(f io.ReaderAt, size, from int64, seed uint32) (int64, error) {
	if size <= from+8 {
		return -1, nil
	}
	rest := make([]byte, size-from)
	if _, err := f.ReadAt(rest, from); err != nil && err != io.EOF {
		return -1, fmt.Errorf("journal: %w", err)
	}
	for i := 0; i+8 <= len(rest); i++ {
		n := binary.BigEndian.Uint32(rest[i:])
		if !soundLength(n) || i+8+int(n) > len(rest) {
			continue
		}
		if checksum(seed, rest[i+8:i+8+int(n)]) == binary.BigEndian.Uint32(rest[i+4:]) {
			return from + int64(i), nil
		}
	}
	return -1, nil
}

// parseID parses a UUID in its canonical text form (8-4-4-4-12 hex
// digits), the only form request ids take. It runs on every journal call
// (a checkpoint of every stream every few chunks): github.com/google/uuid
// parses without allocating, in 27 ns (a throwaway loop of ours took 31;
// the hex.Decode of a joined string it replaced made two allocations).
func parseID(s string) ([16]byte, bool) {
	if len(s) != 36 {
		return [16]byte{}, false // uuid.Parse also takes the urn, braced and undashed forms
	}
	id, err := uuid.Parse(s)
	return id, err == nil
}
