package journal

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// journalWith writes a journal in a new directory with the request of
// testEvent(i) begun and not ended, compacted first into a second segment
// when compacted is set, and returns the directory.
func journalWith(t *testing.T, i int, compacted bool) string {
	t.Helper()
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	j.Begin(testEvent(i), []byte(`{"model":"sim-pro"}`))
	j.Checkpoint(testEvent(i).ID, "tok tok", "", nil, false)
	j.written(t)
	if compacted {
		if _, err := j.compact(); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil { // a kill -9: nothing ends
		t.Fatal(err)
	}
	return dir
}

// moveSegments moves the journal segments of from into to, and returns
// their names.
func moveSegments(t *testing.T, from, to string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(from, "*.journal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments of %s: %v (%v)", from, segs, err)
	}
	var names []string
	for _, p := range segs {
		if err := os.Rename(p, filepath.Join(to, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Base(p))
	}
	return names
}

// TestJournalMergedJournalsAreBothRead: two gateways' journals moved into
// one directory (a data directory restored over another, a volume
// merge) hold segments numbered alike, sealed with different seeds.
// Segments were known by number alone: of two numbered alike one was
// read, the other never read and never deleted, without a word, its
// requests in flight never billed; and a segment one journal's compaction
// made replaced the other's segment of the number it names, which was
// deleted unread. Each segment is its own now, read and released, and
// segments numbered alike are warned of, naming both.
func TestJournalMergedJournalsAreBothRead(t *testing.T) {
	for _, tc := range []struct {
		name               string
		compactA, compactB bool
		alike              bool // a number both journals have
	}{
		{"both at segment 1", false, false, true},
		{"both compacted into segment 2", true, true, true},
		{"one compacted into segment 2, naming the other's segment 1", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := journalWith(t, 1, tc.compactA)
			b := journalWith(t, 2, tc.compactB)
			namesA, _ := filepath.Glob(filepath.Join(a, "*.journal"))
			namesB := moveSegments(t, b, a)
			var logs bytes.Buffer
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
			t.Cleanup(func() { slog.SetDefault(prev) })

			j, reqs, err := Open(a)
			if err != nil {
				t.Fatal(err)
			}
			got := ids(reqs)
			slices.Sort(got)
			if want := []string{testEvent(1).ID, testEvent(2).ID}; !slices.Equal(got, want) {
				t.Errorf("recovered %v, want both journals' requests %v", got, want)
			}
			if tc.alike {
				warned := false
				for _, line := range strings.Split(logs.String(), "\n") {
					if strings.Contains(line, "level=WARN") && strings.Contains(line, filepath.Base(namesA[0])) &&
						strings.Contains(line, namesB[0]) {
						warned = true
					}
				}
				if !warned {
					t.Errorf("no WARN names both segments numbered alike (%s, %s):\n%s", filepath.Base(namesA[0]), namesB[0], logs.String())
				}
			}
			if err := j.Release(); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			left, _ := filepath.Glob(filepath.Join(a, "*.journal"))
			if len(left) != 1 {
				t.Fatalf("after Release the directory holds segments %v, want the new one alone", left)
			}
		})
	}
}
