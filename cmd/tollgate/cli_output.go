package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

// call sends a request, decodes the answer into out and shows it: the
// API's JSON with --json, else show's rendering of out.
func (c *cli) call(method, path string, in, out any, show func()) error {
	b, err := c.api.raw(c.ctx, method, path, in)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	if c.json {
		return c.printJSON(b)
	}
	show()
	return nil
}

// printJSON prints a JSON document indented, as the API sent it otherwise.
func (c *cli) printJSON(b []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(b), "", "  "); err != nil {
		_, err = c.stdout.Write(b)
		return err
	}
	buf.WriteByte('\n')
	_, err := c.stdout.Write(buf.Bytes())
	return err
}

// table prints rows under a header, in aligned columns.
func (c *cli) table(header []string, rows [][]string) {
	w := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	w.Flush()
}

// fields prints name, value pairs as two aligned columns.
func (c *cli) fields(pairs ...string) {
	w := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(w, "%s:\t%s\n", pairs[i], pairs[i+1])
	}
	w.Flush()
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

// query encodes the non-empty name, value pairs as "?a=b&c=d" ("" for none).
func query(pairs ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// seg escapes a path segment (an id given on the command line).
func seg(s string) string { return url.PathEscape(s) }
