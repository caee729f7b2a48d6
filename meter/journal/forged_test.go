package journal

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// forgedOutput is model output that holds whole journal records, crc and
// all: the begin and checkpoint of a request that never was, billed to
// another customer with a billion prompt tokens reported. An upstream
// controls its output's bytes (JSON's \u0000 escapes included), and the
// journal keeps them in a stream's checkpoints. The forger knows the
// record format, not the journal's key: its crcs are plain ones (seed 0),
// what every journal wrote before it had a key.
func forgedOutput() []byte {
	forged := testEvent(666)
	forged.CustomerID = forgedCustomer
	huge := usage.Tokens{PromptTokens: 1_000_000_000}
	recs := appendRequest(nil, &Request{Event: *forged, Began: time.Now(), Last: time.Now(),
		Checkpoints: 1, Reported: &huge}, 0)
	return append(append([]byte("tok "), recs...), "tok tok tok"...)
}

const forgedCustomer = "0197a3c2-eeee-7eee-8eee-eeeeeeeeeeee"

// segmentWith journals a request whose stream checkpointed output, then
// another request begun after it, and returns the segment's path, its
// bytes and where output is in them.
func segmentWith(t *testing.T, output []byte) (dir, path string, b []byte, at int) {
	t.Helper()
	dir = t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"model":"sim-pro"}`)
	j.Begin(testEvent(1), body)
	j.Checkpoint(testEvent(1).ID, string(output), "", nil, false)
	j.Begin(testEvent(2), body)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.journal"))
	path = segs[len(segs)-1]
	if b, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if at = bytes.Index(b, output); at < 0 {
		t.Fatal("the output is not in the segment")
	}
	return dir, path, b, at
}

// TestJournalRecordsForgedInOutputAreNotRecovered: a torn or damaged
// record was searched byte by byte for the next intact one, its own bytes
// first, so records an upstream forged inside a stream's output were
// recovered after a power loss tore the journal there: a request that
// never was, billed to whichever customer the forger named. A record the
// file ends inside is now the tail, and one whose crc is bad is skipped to
// where its length says it ends.
func TestJournalRecordsForgedInOutputAreNotRecovered(t *testing.T) {
	output := forgedOutput()

	t.Run("torn tail", func(t *testing.T) {
		dir, path, b, at := segmentWith(t, output)
		// Torn just after the forged records: request 1's checkpoint is
		// the tail, and request 2's begin was never written.
		rewrite(t, path, b[:at+len(output)-3])
		reqs := recovered(t, dir)
		if len(reqs) != 1 || reqs[0].Event.ID != testEvent(1).ID {
			t.Fatalf("recovered %v, want request 1 alone", ids(reqs))
		}
	})

	t.Run("damaged record", func(t *testing.T) {
		dir, path, b, at := segmentWith(t, output)
		b[at+len(output)-1] ^= 0xff // request 1's checkpoint fails its crc; request 2's begin follows intact
		rewrite(t, path, b)
		reqs := recovered(t, dir)
		if len(reqs) != 2 || reqs[0].Event.ID != testEvent(1).ID || reqs[1].Event.ID != testEvent(2).ID {
			t.Fatalf("recovered %v, want requests 1 and 2", ids(reqs))
		}
	})

	t.Run("damaged length", func(t *testing.T) {
		// Request 1's checkpoint loses its length (a block a power loss
		// did not write reads as zeros): the next record is searched for
		// byte by byte from inside it, where the forged records are.
		dir, path, b, at := segmentWith(t, output)
		copy(b[at-headerLen-1:], []byte{0, 0, 0, 0})
		rewrite(t, path, b)
		reqs := recovered(t, dir)
		if len(reqs) != 2 || reqs[0].Event.ID != testEvent(1).ID || reqs[1].Event.ID != testEvent(2).ID {
			t.Fatalf("recovered %v, want requests 1 and 2", ids(reqs))
		}
		if reqs[0].Checkpoints != 0 {
			t.Fatalf("request 1 kept %d checkpoints of a record whose length was lost", reqs[0].Checkpoints)
		}
	})

	t.Run("undamaged", func(t *testing.T) {
		dir, _, _, _ := segmentWith(t, output)
		reqs := recovered(t, dir)
		if len(reqs) != 2 || string(reqs[0].Output) != string(output) {
			t.Fatalf("recovered %v, want requests 1 (with the output as written) and 2", ids(reqs))
		}
	})
}

// rewrite replaces the segment at path with b: a crash's or a disk's
// damage done to it.
func rewrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// recovered opens dir's journal and returns what it recovered, failing if
// the forged request is among it.
func recovered(t *testing.T, dir string) []Request {
	t.Helper()
	j, reqs, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, r := range reqs {
		if r.Event.ID == testEvent(666).ID || r.Event.CustomerID == forgedCustomer {
			t.Fatalf("recovered the request forged in the output: %+v", r.Event)
		}
	}
	return reqs
}

func ids(reqs []Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Event.ID)
	}
	return out
}

// TestJournalRecordsForgedInOutputAreNotRecoveredAfterTwoBadRecords: a
// record skipped whole (its length sound, its crc not) handed the search
// for the next intact record to resync, which searched byte by byte from
// where the record after it begins: when that record was bad too (one
// damaged block across the end of one record and the start of the next,
// or a block a power loss did not write before a torn tail), records
// forged in its output were recovered. Each record is judged alike.
func TestJournalRecordsForgedInOutputAreNotRecoveredAfterTwoBadRecords(t *testing.T) {
	output := forgedOutput()
	// checkpointAt is where request 1's checkpoint starts: its header
	// and its flags (no counts) come before the output.
	checkpointAt := func(at int) int { return at - headerLen - 1 }

	t.Run("damaged then damaged", func(t *testing.T) {
		dir, path, b, at := segmentWith(t, output)
		b[checkpointAt(at)-1] ^= 0xff // request 1's begin fails its crc
		b[at+len(output)-1] ^= 0xff   // and so does its checkpoint; request 2's begin follows intact
		rewrite(t, path, b)
		reqs := recovered(t, dir)
		if len(reqs) != 1 || reqs[0].Event.ID != testEvent(2).ID {
			t.Fatalf("recovered %v, want request 2 alone", ids(reqs))
		}
	})

	t.Run("damaged then torn", func(t *testing.T) {
		dir, path, b, at := segmentWith(t, output)
		b[checkpointAt(at)-1] ^= 0xff          // request 1's begin fails its crc
		rewrite(t, path, b[:at+len(output)-3]) // torn inside request 1's checkpoint, after the forged records
		if reqs := recovered(t, dir); len(reqs) != 0 {
			t.Fatalf("recovered %v, want none", ids(reqs))
		}
	})
}

// TestJournalWarnsOfACorruptRecordOnce: Open read every segment twice,
// once whole only to learn whether its first record named a segment it
// replaces, so each corrupt record was warned of twice. The first record
// alone is read for that now.
func TestJournalWarnsOfACorruptRecordOnce(t *testing.T) {
	dir, path, b, at := segmentWith(t, []byte("tok tok tok"))
	b[at] ^= 0xff // request 1's checkpoint fails its crc
	rewrite(t, path, b)
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	reqs := recovered(t, dir)
	if len(reqs) != 2 {
		t.Fatalf("recovered %v, want requests 1 and 2", ids(reqs))
	}
	if n := strings.Count(logs.String(), "corrupt record skipped"); n != 1 {
		t.Fatalf("warned %d times of the corrupt record, want once:\n%s", n, logs.String())
	}
}
