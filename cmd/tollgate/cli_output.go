package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"
)

// show prints what a command got: v as JSON with --json, else render's
// rendering of it; or returns err, when the API answered one.
func (c *cli) show(v any, err error, render func()) error {
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(v)
	}
	render()
	return nil
}

// printJSON prints v as indented JSON: what the API answered, as it
// answered it (the same types, encoded the same way), with the runes a
// terminal acts on that encoding/json leaves raw written as \u escapes
// (escapeTerminalRunes).
func (c *cli) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = c.stdout.Write(append(escapeTerminalRunes(b), '\n'))
	return err
}

// escapeTerminalRunes returns JSON text b with the runes a table escapes
// (unprintable) that encoding/json leaves raw written as \u escapes: the
// C1 controls (U+0080 to U+009F; U+009B is a terminal's CSI where C1 is
// honoured) and the bidirectional marks, embeddings, overrides and
// isolates (which show text reordered). encoding/json escapes the C0
// controls; outside strings JSON holds only ASCII, so each is in a
// string, and its escape decodes to the same rune. b itself when it holds
// none.
func escapeTerminalRunes(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if unprintable(r) {
			out = append(out, b[last:i]...)
			out = fmt.Appendf(out, `\u%04x`, r)
			last = i + size
		}
		i += size
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// data is a list as the API answers it: {"data": [...]}, never null.
func data[T any](rows []T) any {
	if rows == nil {
		rows = []T{}
	}
	return struct {
		Data []T `json:"data"`
	}{rows}
}

// table prints rows under a header, in aligned columns two spaces apart
// (the last not padded), each cell shown by printable. A column is as
// wide as its widest cell on a terminal (displayWidth), not in runes as
// tabwriter counts: a name in CJK script takes two columns a character.
func (c *cli) table(header []string, rows [][]string) {
	lines := make([][]string, 0, len(rows)+1)
	lines = append(lines, header)
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, v := range r {
			cells[i] = printable(v)
		}
		lines = append(lines, cells)
	}
	var widths []int
	for _, cells := range lines {
		for i, v := range cells[:max(len(cells)-1, 0)] {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], displayWidth(v))
		}
	}
	var b strings.Builder
	for _, cells := range lines {
		for i, v := range cells {
			b.WriteString(v)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-displayWidth(v)+2))
			}
		}
		b.WriteByte('\n')
	}
	io.WriteString(c.stdout, b.String())
}

// displayWidth is how many columns a terminal gives s: two for an East
// Asian wide or fullwidth rune, none for a combining mark or a
// zero-width space or joiner, one for any other.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		switch k := width.LookupRune(r).Kind(); {
		case unicode.In(r, unicode.Mn, unicode.Me) || r == '\u200b' || r == '\u200c' || r == '\u200d' || r == '\ufeff':
		case k == width.EastAsianWide || k == width.EastAsianFullwidth:
			n += 2
		default:
			n++
		}
	}
	return n
}

// fields prints name, value pairs as two aligned columns, each value
// shown by printable.
func (c *cli) fields(pairs ...string) {
	w := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(w, "%s:\t%s\n", pairs[i], printable(pairs[i+1]))
	}
	w.Flush()
}

// printable is s with every control character (C0, DEL, C1: a line break,
// a tab, an escape sequence's ESC or CSI) and every bidirectional
// formatting character (U+200E, U+200F, U+202A to U+202E, U+2066 to
// U+2069) written as its Go escape (\n, \x1b, \u202e), and invalid UTF-8
// as \x escapes: the ledger holds text no operator chose (end users and
// tags sent by customers' clients, errors and model names sent by
// upstreams), and a table cell must neither drive the terminal nor break
// into rows of its own. Other text is unchanged.
func printable(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, unprintable) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case unprintable(r):
			q := strconv.QuoteRune(r) // '\n', '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unprintable reports whether printable escapes r.
func unprintable(r rune) bool {
	return unicode.IsControl(r) || r == '\u200e' || r == '\u200f' ||
		(r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069')
}

// opt shows an optional value, "-" for none.
func opt(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

// dash shows "-" for an empty string.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ts shows a time in UTC, "-" for none.
func ts(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// requireFlags returns a usage error naming the first empty flag of the
// name, value pairs.
func requireFlags(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.TrimSpace(pairs[i+1]) == "" {
			return usagef("--%s is required", pairs[i])
		}
	}
	return nil
}

// nonEmptyIfGiven returns a usage error when the command line gave the
// flag name a blank value: --name "$NAME" with NAME unset was taken as
// --name left out, and the command went on without it.
func nonEmptyIfGiven(fs *flag.FlagSet, name, value string) error {
	if flagGiven(fs, name) && strings.TrimSpace(value) == "" {
		return usagef("--%s is empty: give a value, or leave --%s out", name, name)
	}
	return nil
}

// parseWhen parses a time flag: RFC 3339 or a date (UTC midnight). An
// empty value is the zero time.
func parseWhen(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, usagef("--%s: %q is neither RFC 3339 (2026-01-31T00:00:00Z) nor a date (2026-01-31)", name, s)
}

// parseRange is parseWhen for --from and --to.
func parseRange(from, to string) (start, end time.Time, err error) {
	if start, err = parseWhen("from", from); err != nil {
		return
	}
	end, err = parseWhen("to", to)
	return
}

// optionalWhen is parseWhen for an optional end: nil when empty.
func optionalWhen(name, s string) (*time.Time, error) {
	t, err := parseWhen(name, s)
	if err != nil || t.IsZero() {
		return nil, err
	}
	return &t, nil
}

// optional is nil for an empty flag value, else a pointer to it.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
