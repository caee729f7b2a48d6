package journal

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/uuid"
)

// A segment with damaged bytes (a record whose crc fails, bytes a search
// for the next record passed over, a tail that holds no whole record) is
// kept aside by Release, renamed <segment>.damaged beside the journal,
// instead of deleted: its damaged records may hold the ids and output of
// requests in flight at a crash, usage no one bills unless an operator
// does by hand (docs/operations.md, "Durability"). No start reads it as a
// segment (its name does not end .journal). Damaged bytes that are all
// zeros (blocks a power loss left unwritten) hold nothing: their segment
// is deleted as any other.
//
// Kept-aside segments are bounded: Release keeps the newest maxDamaged of
// them, and no more than maxDamagedBytes in all (bytes), always keeping
// those it sets aside itself; older ones are deleted, with a warning
// naming each. A segment is compacted at 8 MiB, so this is some 64 MiB at
// most in the usual case, and a failing disk that damages a segment at
// every start cannot fill itself with them.
const (
	damagedSuffix         = ".damaged"
	maxDamaged            = 8
	maxDamagedBytes int64 = 64 << 20
)

// maxLegibleIDs bounds the request ids logged for one damaged segment.
const maxLegibleIDs = 1000

// noteDamage notes in damaged that the segment at path has the span of f
// from from to to unread, unless the span is all zeros, and logs at WARN
// the request ids legible in it (see legibleIDs).
func noteDamage(damaged map[string]bool, path string, f io.ReaderAt, from, to int64) error {
	if to <= from {
		return nil
	}
	b := make([]byte, to-from)
	if _, err := f.ReadAt(b, from); err != nil && err != io.EOF {
		return fmt.Errorf("journal: %w", err)
	}
	if !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
		return nil // zeros: no record, nothing to keep
	}
	damaged[path] = true
	ids := legibleIDs(b, time.Now())
	if len(ids) == 0 {
		slog.Warn("journal: no request id is legible in a segment's damaged bytes; the segment is kept aside once recovered",
			"segment", path, "offset", from, "bytes", to-from)
		return nil
	}
	more := max(len(ids)-maxLegibleIDs, 0)
	slog.Warn("journal: damaged records of a segment name these requests (ids read from their headers, not crc-checked); "+
		"one the ledger lacks, and the gateway's log shows served, was in flight at a crash and is not billed: bill it by hand. "+
		"The segment is kept aside once recovered",
		"segment", path, "offset", from, "bytes", to-from, "request_ids", ids[:len(ids)-more], "more_ids", more)
	return nil
}

// legibleIDs returns the request ids, each once, in the order found, of
// the record headers legible in b, bytes of a segment that recovery could
// not read: a header whose length a record can have, whose kind is one of
// a request's, whose id is a UUID (RFC 9562 variant) and whose time lies
// between 2020 and a day after now. A header found, the search goes on
// past its record (when b holds it whole), not inside it: a record's
// bytes are partly a client's and an upstream's. Where no header is
// legible it searches byte by byte; a forgery inside a damaged length's
// span may then be taken, which is why the ids are to be checked against
// the gateway's log before anything is billed.
func legibleIDs(b []byte, now time.Time) []string {
	lo := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	hi := now.Add(24 * time.Hour).UnixNano()
	var out []string
	seen := map[uuid.UUID]bool{}
	for p := 0; p+headerLen <= len(b); {
		n := binary.BigEndian.Uint32(b[p:])
		kind := b[p+8]
		var id uuid.UUID
		copy(id[:], b[p+9:p+25])
		t := int64(binary.BigEndian.Uint64(b[p+25:]))
		ok := soundLength(n) && t >= lo && t <= hi && id.Variant() == uuid.RFC4122 &&
			id.Version() >= 1 && id.Version() <= 8 &&
			(kind == kindBegin || kind == kindCheckpoint || kind == kindEnd || kind == kindFail || kind == kindReasoning)
		if !ok {
			p++
			continue
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id.String())
		}
		if p+8+int(n) <= len(b) {
			p += 8 + int(n)
		} else {
			p += headerLen // the file ends inside it
		}
	}
	return out
}

// keepAside renames the damaged segment at path <path>.damaged (or, when
// that is taken, <path>.<unix nanoseconds>.damaged), and returns the new
// path.
func keepAside(path string) (string, error) {
	aside := path + damagedSuffix
	if _, err := os.Lstat(aside); err == nil {
		aside = fmt.Sprintf("%s.%d%s", path, time.Now().UnixNano(), damagedSuffix)
	}
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("journal: %w", err)
	}
	return aside, nil
}

// pruneDamaged deletes the segments kept aside in dir beyond the newest
// maxDamaged, or beyond maxDamagedBytes in all, oldest (by modification
// time) first; those in keep (just set aside) are kept whatever their
// size.
func pruneDamaged(dir string, keep map[string]bool) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+damagedSuffix))
	if err != nil {
		return
	}
	type file struct {
		path string
		size int64
		mod  time.Time
	}
	var files []file
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			files = append(files, file{p, st.Size(), st.ModTime()})
		}
	}
	slices.SortFunc(files, func(a, b file) int {
		if keep[a.path] != keep[b.path] {
			if keep[a.path] {
				return -1
			}
			return 1
		}
		return b.mod.Compare(a.mod)
	})
	var total int64
	for i, f := range files {
		total += f.size
		if keep[f.path] || (i < maxDamaged && total <= maxDamagedBytes) {
			continue
		}
		if err := os.Remove(f.path); err == nil {
			slog.Warn("journal: an older damaged segment kept aside is deleted: more are kept than the bound",
				"file", f.path, "bound_files", maxDamaged, "bound_bytes", maxDamagedBytes)
		}
	}
}
