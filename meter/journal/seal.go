package journal

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// A seal makes the journal's crcs its own. Every record's crc starts from
// a random seed kept in the journal's directory (keyFile), never sent or
// shown anywhere, instead of from zero.
//
// The records hold bytes a client and an upstream chose (the request
// body, the model's output), so they can hold what looks like a whole
// record, crc and all. When a record's length is damaged (a block a power
// loss left unwritten, bit rot), recovery has to search byte by byte for
// the next intact record (see scan), and with plain crcs that search took
// a record forged inside the damaged one: a request that never was,
// billed to the customer the forger named. A forger who does not know the
// seed writes a crc that is right for one seed in 2^32.
type seal struct {
	// seed is the crc's initial value for the segments numbered since or
	// later. It is never 0.
	seed uint32
	// since is the first segment sealed. Segments before it were written
	// before the journal had a key (by earlier releases), with plain
	// crcs (seed 0), and are read as such.
	since uint64
}

// seedOf returns the crc seed of segment n's records.
func (s seal) seedOf(n uint64) uint32 {
	if n < s.since {
		return 0
	}
	return s.seed
}

// keyFile names the file in the journal's directory that holds its seal:
// [magic, 8 bytes][seed uint32][since uint64][crc32c of the 20 bytes
// before it], big-endian.
const keyFile = "journal.key"

var keyMagic = [8]byte{'t', 'g', 'j', 'k', 'e', 'y', '0', '1'}

const keyLen = 8 + 4 + 8 + 4

// loadSeal reads the journal's seal from dir, or, when dir has none, makes
// one for the segments numbered next and later (the segments before next
// are older, and unsealed) and writes it durably (written, fsync'd and
// renamed into place, then the directory fsync'd) before any record is
// sealed with it.
//
// It returns an error when the key file cannot be read or written, or is
// damaged: a journal whose key is lost cannot tell its records from
// forged ones, and the operator decides (see docs/operations.md).
func loadSeal(dir string, next uint64) (seal, error) {
	path := filepath.Join(dir, keyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		return decodeSeal(b, path)
	case !errors.Is(err, os.ErrNotExist):
		return seal{}, fmt.Errorf("journal: %w", err)
	}
	s := seal{since: next}
	for s.seed == 0 {
		var r [4]byte
		if _, err := rand.Read(r[:]); err != nil {
			return seal{}, fmt.Errorf("journal: a key: %w", err)
		}
		s.seed = binary.BigEndian.Uint32(r[:])
	}
	if err := writeKey(path, s); err != nil {
		return seal{}, fmt.Errorf("journal: writing its key: %w", err)
	}
	return s, syncDir(dir)
}

func decodeSeal(b []byte, path string) (seal, error) {
	if len(b) != keyLen || [8]byte(b[:8]) != keyMagic ||
		crc32.Checksum(b[:keyLen-4], crcTable) != binary.BigEndian.Uint32(b[keyLen-4:]) {
		return seal{}, fmt.Errorf("journal: its key %s is damaged (%d bytes): the records it sealed "+
			"cannot be told from forged ones; move the journal directory aside to start without recovering them", path, len(b))
	}
	s := seal{seed: binary.BigEndian.Uint32(b[8:]), since: binary.BigEndian.Uint64(b[12:])}
	if s.seed == 0 {
		return seal{}, fmt.Errorf("journal: its key %s holds no seed", path)
	}
	return s, nil
}

func writeKey(path string, s seal) error {
	b := append(keyMagic[:0:0], keyMagic[:]...)
	b = binary.BigEndian.AppendUint32(b, s.seed)
	b = binary.BigEndian.AppendUint64(b, s.since)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
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
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// checksum is the crc of a record's data under seed (see seal).
func checksum(seed uint32, data []byte) uint32 {
	return crc32.Update(seed, crcTable, data)
}
