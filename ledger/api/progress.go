package api

import (
	"fmt"
	"io"
	"time"
)

// Progress is an io.Writer that counts the bytes and CSV records of a
// download written through it (tee the download into it) and reports them
// with the rate on out: redrawn in place on a terminal, a line a second
// otherwise.
type Progress struct {
	out     io.Writer
	tty     bool
	now     func() time.Time
	start   time.Time
	last    time.Time
	bytes   int64
	records int64
	// inQuote tracks CSV quoting, so that a newline inside a quoted field
	// does not count as a record. An escaped quote ("") toggles twice.
	inQuote bool
	// partial is whether bytes follow the last complete record.
	partial bool
}

// NewProgress returns a Progress that reports on out (nil: it only
// counts), redrawing one line in place when tty, with the clock now.
func NewProgress(out io.Writer, tty bool, now func() time.Time) *Progress {
	t := now()
	return &Progress{out: out, tty: tty, now: now, start: t, last: t}
}

// Write counts b; it never fails.
func (p *Progress) Write(b []byte) (int, error) {
	for _, ch := range b {
		switch {
		case ch == '"':
			p.inQuote = !p.inQuote
		case ch == '\n' && !p.inQuote:
			p.records++
		}
	}
	if len(b) > 0 {
		p.partial = b[len(b)-1] != '\n'
	}
	p.bytes += int64(len(b))
	every := time.Second
	if p.tty {
		every = 200 * time.Millisecond
	}
	if now := p.now(); p.out != nil && now.Sub(p.last) >= every {
		p.last = now
		p.report("")
	}
	return len(b), nil
}

// Rows is the CSV records counted so far, less the header row.
func (p *Progress) Rows() int64 {
	n := p.records
	if p.partial {
		n++
	}
	return max(n-1, 0)
}

// Summary is what was counted, for people: "2 rows (50 B)".
func (p *Progress) Summary() string {
	return plural(p.Rows(), "row") + " (" + byteSize(p.bytes) + ")"
}

// Size is the bytes counted so far, for people: "512 B", "1.5 kB".
func (p *Progress) Size() string { return byteSize(p.bytes) }

// Finish writes the final report, ending the line.
func (p *Progress) Finish() {
	if p.out != nil {
		p.report("\n")
	}
}

func (p *Progress) report(end string) {
	elapsed := p.now().Sub(p.start)
	var rate int64 // bytes per second
	if ms := elapsed.Milliseconds(); ms > 0 {
		rate = p.bytes * 1000 / ms
	}
	line := fmt.Sprintf("%s, %s in %s (%s/s)", byteSize(p.bytes), plural(p.Rows(), "row"),
		elapsed.Round(100*time.Millisecond), byteSize(rate))
	if p.tty {
		fmt.Fprintf(p.out, "\r\033[K%s%s", line, end)
	} else {
		fmt.Fprintln(p.out, line)
	}
}

// byteSize renders a byte count for people: 512 B, 1.5 kB, 12.3 MB.
func byteSize(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for n/div >= unit && exp < 4 {
		div *= unit
		exp++
	}
	tenths := (n/div)*10 + (n%div*10+div/2)/div // n/div to one decimal, rounded half up
	return fmt.Sprintf("%d.%d %cB", tenths/10, tenths%10, "kMGTP"[exp])
}

// plural renders "1 row", "2 rows".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
