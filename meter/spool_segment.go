package meter

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
)

// tailKind is what the bytes at the end of a segment that hold no whole
// record are (see classifyTail).
type tailKind int

const (
	tailZeros   tailKind = iota // none, or zeros only: no record
	tailTorn                    // the start of one record, never whole: a write no Append returned for
	tailDamaged                 // anything else: records damaged on disk, acknowledged
)

// classifyTail says what b, the bytes at the end of a segment from the
// first that is not an intact record (with none intact after it), are.
//
// The spool writes a batch of records with one write, fsyncs it, and only
// then acknowledges its appends; it neither preallocates nor pads (the
// file grows by its writes alone), and a failed write is cut back. So a
// process killed mid-write (kill -9) leaves, after its last whole record,
// the start of one record, the file ending inside it; a power loss before
// the fsync may leave that start followed by zeros (blocks the file grew
// by and its data never reached), or zeros alone. Neither was
// acknowledged: the event's request is still open in the crash journal,
// which bills it at the next start, so these bytes are not data. The
// rule: the tail is torn when its non-zero bytes all lie inside the first
// record its header announces and do not reach that record's last byte
// (a record is a JSON object, whose last byte, '}', is never zero), or it
// is too short to hold a header; zeros alone are no record. Any other
// tail is damaged: a record whose length or crc is wrong though its bytes
// are all there, or bytes past the first record's end; a write once whole
// (fsync'd and acknowledged) that the disk damaged since, to be set aside
// with its bytes like a damaged record between intact ones. A damaged
// length that still announces a record longer than the tail reads as
// torn: the one case the rule gets wrong, and the warning says so.
func classifyTail(b []byte) tailKind {
	last := len(b) - 1
	for last >= 0 && b[last] == 0 {
		last--
	}
	switch {
	case last < 0:
		return tailZeros
	case len(b) < 8:
		return tailTorn
	}
	n := int64(binary.BigEndian.Uint32(b))
	if n == 0 || n > maxRecord {
		return tailDamaged
	}
	if int64(last) < 8+n-1 {
		return tailTorn
	}
	return tailDamaged
}

// readTail returns the bytes of f from off to its end.
func readTail(f *os.File, off int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	if st.Size() <= off {
		return nil, nil
	}
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
		return nil, fmt.Errorf("spool: %w", err)
	}
	return b, nil
}

// badTail handles the bytes at the end of the segment at path, from off,
// that hold no whole record (see classifyTail): a torn write or zeros are
// logged and left (they go with the segment); damaged records are given
// to skipped, when not nil, as bytes damaged between intact records are,
// and logged otherwise. A crash review saw the last record of a segment
// damaged on disk go without a trace; a later one saw it only logged,
// then deleted with its segment, where the same damage a record earlier
// went to the dead-letter stream.
func badTail(f *os.File, path string, off int64, skipped func(raw []byte, where string, next int64) error) error {
	tail, err := readTail(f, off)
	if err != nil || len(tail) == 0 {
		return err
	}
	switch classifyTail(tail) {
	case tailZeros:
		slog.Warn("spool: the end of a segment holds no whole record and is not sent: zeros, as a power loss leaves "+
			"where the file grew and its data never reached the disk (no record)",
			"segment", path, "offset", off, "bytes", len(tail))
	case tailTorn:
		slog.Warn("spool: the end of a segment holds no whole record and is not sent: the start of a record whose write "+
			"a crash cut short, never acknowledged (its request is billed from the crash journal); or, if the disk "+
			"damaged its length, an event lost",
			"segment", path, "offset", off, "bytes", len(tail))
	default:
		if skipped != nil {
			where := fmt.Sprintf("%s, bytes %d to %d, the segment's end", filepath.Base(path), off, off+int64(len(tail)))
			return skipped(tail, where, off+int64(len(tail)))
		}
		slog.Warn("spool: the end of a segment holds damaged records, not sent: events acknowledged and damaged on disk",
			"segment", path, "offset", off, "bytes", len(tail))
	}
	return nil
}

// scanSegment calls fn for each complete, intact record of the segment at
// or after offset from (and ending at or before limit, when limit >= 0),
// with the offset just past the record. A torn or corrupt tail ends the
// scan. A bad record with intact records after it (bytes damaged on disk:
// a crash tears only the tail) is skipped, with a warning, and the scan
// resumes at the next intact record: those were acknowledged. skipped,
// when not nil, is given the bytes skipped, where they were and the
// offset past them first; an error from it ends the scan before them.
// Without limit, bytes at the end that hold no whole record and are
// damaged records, not a torn write or zeros (see classifyTail), are
// given to skipped too, as the last bytes skipped.
func scanSegment(path string, from, limit int64, fn func(data []byte, next int64) error, skipped func(raw []byte, where string, next int64) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	off := from
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil // end, or a torn header
		}
		n := binary.BigEndian.Uint32(hdr[:])
		var data []byte
		ok := n > 0 && n <= maxRecord // zeros (a power loss's unwritten block) are no record
		if ok {
			data = make([]byte, n)
			_, err := io.ReadFull(r, data)
			ok = err == nil && crc32.Checksum(data, crcTable) == binary.BigEndian.Uint32(hdr[4:])
		}
		if !ok {
			next, err := resync(f, off, limit)
			if err != nil || next < 0 {
				if err == nil && limit < 0 {
					return badTail(f, path, off, skipped)
				}
				return err // a torn or corrupt tail
			}
			slog.Warn("spool: a corrupt record skipped; the records after it are kept",
				"segment", path, "offset", off, "skipped_bytes", next-off)
			if skipped != nil {
				raw := make([]byte, next-off)
				if _, err := f.ReadAt(raw, off); err != nil {
					return fmt.Errorf("spool: %w", err)
				}
				if err := skipped(raw, fmt.Sprintf("%s, bytes %d to %d", filepath.Base(path), off, next), next); err != nil {
					return err
				}
			}
			if _, err := f.Seek(next, io.SeekStart); err != nil {
				return fmt.Errorf("spool: %w", err)
			}
			r.Reset(f)
			off = next
			continue
		}
		if limit >= 0 && off+8+int64(n) > limit {
			return nil // not committed (yet, or ever: a failed write being cut back)
		}
		off += 8 + int64(n)
		if err := fn(data, off); err != nil {
			return err
		}
	}
}

// resync returns the offset of the first intact, non-empty record of f
// after the bad one at off (within limit, when limit >= 0), or -1 when
// there is none: the bad record is the segment's tail. Only a JSON object
// is taken for a record (see AppendRecord).
func resync(f *os.File, off, limit int64) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return -1, fmt.Errorf("spool: %w", err)
	}
	end := st.Size()
	if limit >= 0 && limit < end {
		end = limit
	}
	if end <= off+1 {
		return -1, nil
	}
	rest := make([]byte, end-off)
	if _, err := f.ReadAt(rest, off); err != nil && err != io.EOF {
		return -1, fmt.Errorf("spool: %w", err)
	}
	for i := 1; i+8 <= len(rest); i++ {
		n := int(binary.BigEndian.Uint32(rest[i:]))
		if n == 0 || n > maxRecord || i+8+n > len(rest) {
			continue
		}
		if rest[i+8] != '{' || rest[i+8+n-1] != '}' {
			// Not a JSON object, as every record is: no crc of megabytes
			// at each offset of random bytes whose length fits (a 250th of
			// them), which held a start for minutes over a damaged segment.
			continue
		}
		if crc32.Checksum(rest[i+8:i+8+n], crcTable) == binary.BigEndian.Uint32(rest[i+4:]) {
			return off + int64(i), nil
		}
	}
	return -1, nil
}
