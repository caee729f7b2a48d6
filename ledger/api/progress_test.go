package api

import (
	"strings"
	"testing"
	"time"
)

// TestProgress: rows are CSV records after the header, a newline inside a
// quoted field is not a row, and the report has bytes, rows and rate.
func TestProgress(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	clock := time.Unix(0, 0)
	p := NewProgress(&out, false, func() time.Time { return clock })
	p.Write([]byte("record,memo\nentry,\"two\nlines, \"\"quoted\"\"\"\nev"))
	clock = clock.Add(2 * time.Second)
	p.Write([]byte("ent,x\n"))
	p.Finish()
	if p.Rows() != 2 || p.Summary() != "2 rows (50 B)" {
		t.Fatalf("rows = %d, summary %q; want 2, 2 rows (50 B)", p.Rows(), p.Summary())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// One report a second when not a terminal (here after 2s), and the last.
	if len(lines) != 2 || lines[1] != "50 B, 2 rows in 2s (25 B/s)" {
		t.Fatalf("report %q", lines)
	}
	if got := byteSize(12_345_678); got != "12.3 MB" {
		t.Fatalf("byteSize = %q", got)
	}
}

// TestProgressCountsOnly: with nowhere to report, it counts and reports
// nothing; on a terminal it redraws one line in place.
func TestProgressCountsOnly(t *testing.T) {
	t.Parallel()
	p := NewProgress(nil, false, time.Now)
	p.Write([]byte("h\n1\n"))
	p.Finish()
	if p.Rows() != 1 {
		t.Fatalf("rows = %d, want 1", p.Rows())
	}
	var out strings.Builder
	clock := time.Unix(0, 0)
	p = NewProgress(&out, true, func() time.Time { return clock })
	p.Write([]byte("h\n"))
	clock = clock.Add(time.Second)
	p.Write([]byte("1\n"))
	p.Finish()
	if got := out.String(); strings.Count(got, "\r\033[K") != 2 || strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "1 row in 1s (4 B/s)\n") {
		t.Fatalf("terminal report %q", got)
	}
}
