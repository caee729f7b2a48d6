package sse

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func data(s string) tev    { return tev{Data: s, HasData: true} }
func comment(s string) tev { return tev{Comment: s, HasComment: true} }

var readerCases = []struct {
	name string
	in   string
	want []tev
}{
	{"empty", "", nil},
	{"one event", "data: hello\n\n", []tev{data("hello")}},
	{"two events", "data: a\n\ndata: b\n\n", []tev{data("a"), data("b")}},
	{"crlf", "data: a\r\ndata: b\r\n\r\n", []tev{data("a\nb")}},
	{"lone cr", "data: a\rdata: b\r\r", []tev{data("a\nb")}},
	{"mixed line ends", "event: x\r\ndata: 1\rid: 7\n\n", []tev{{Type: "x", Data: "1", HasData: true, ID: "7", HasID: true}}},
	{"cr then crlf", "data: a\r\r\ndata: b\n\n", []tev{data("a"), data("b")}},
	{"crlf then lf", "data: a\r\n\ndata: b\n\n", []tev{data("a"), data("b")}},
	{"cr lf cr lf", "data: a\r\n\r\ndata: b\r\n\r\n", []tev{data("a"), data("b")}},
	{"multi-line data", "data: a\ndata: b\ndata: c\n\n", []tev{data("a\nb\nc")}},
	{"no space after colon", "data:x\n\n", []tev{data("x")}},
	{"only one space stripped", "data:  x \n\n", []tev{data(" x ")}},
	{"colons in value", "data: a:b: c\n\n", []tev{data("a:b: c")}},
	{"data without colon", "data\n\n", []tev{data("")}},
	{"two data without colon", "data\ndata\n\n", []tev{data("\n")}},
	{"empty data", "data:\n\n", []tev{data("")}},
	{"empty data lines", "data:\ndata: x\ndata:\n\n", []tev{data("\nx\n")}},
	{"comment", ": keep-alive\n\n", []tev{comment("keep-alive")}},
	{"bare comment", ":\n\n", []tev{comment("")}},
	{"comments", ":a\n: b\n:  c\n\n", []tev{comment("a\nb\n c")}},
	{"comment and data", ": x\ndata: 1\n\n", []tev{{Comment: "x", HasComment: true, Data: "1", HasData: true}}},
	{"all fields", "event: ping\nid: 42\nretry: 1000\ndata: {}\n\n",
		[]tev{{Type: "ping", ID: "42", HasID: true, Retry: "1000", Data: "{}", HasData: true}}},
	{"last event and id win", "event: a\nevent: b\nid: 1\nid: 2\ndata: x\n\n",
		[]tev{{Type: "b", ID: "2", HasID: true, Data: "x", HasData: true}}},
	{"empty id", "id\n\n", []tev{{HasID: true}}},
	{"id with NUL kept", "id: a\x00b\n\n", []tev{{ID: "a\x00b", HasID: true}}},
	{"raw retry", "retry: soon\n\n", []tev{{Retry: "soon"}}},
	{"type only", "event: x\n\n", []tev{{Type: "x"}}},
	{"empty type", "event:\n\n", []tev{{}}},
	{"unknown field", "foo: bar\n\n", []tev{{Other: "foo: bar"}}},
	// A line of spaces is no blank line: a hostile upstream's " " between
	// two data lines must not cut one chunk into two events.
	{"a line of spaces is a field", "data: a\n \ndata: b\n\n", []tev{{Data: "a\nb", HasData: true, Other: " "}}},
	{"field names are case sensitive", "Data: x\n data: y\n\n", []tev{{Other: "Data: x\n data: y"}}},
	{"raw json body", "data: 1\n\n{\n  \"error\": {\n    \"code\": 499\n  }\n}\n",
		[]tev{data("1"), {Other: "{\n  \"error\": {\n    \"code\": 499\n  }\n}"}}},
	{"bom", "\xEF\xBB\xBFdata: x\n\n", []tev{data("x")}},
	{"bom only once", "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n", []tev{{Other: "\xEF\xBB\xBFdata: x"}}},
	{"bom after a blank line", "\n\xEF\xBB\xBFdata: x\n\n", []tev{{Other: "\xEF\xBB\xBFdata: x"}}},
	{"bom alone", "\xEF\xBB\xBF", nil},
	{"partial bom", "\xEF\xBBdata: x\n\n", []tev{{Other: "\xEF\xBBdata: x"}}},
	{"eof after line", "data: a\n", []tev{data("a")}},
	{"eof in line", "data: a", []tev{data("a")}},
	{"eof after cr", "data: a\r", []tev{data("a")}},
	{"eof after event", "data: a\n\ndata: b", []tev{data("a"), data("b")}},
	{"eof after comment", ": x", []tev{comment("x")}},
	{"blank lines only", "\n\n\r\n\r\r\n", nil},
	{"leading blank lines", "\n\r\n\rdata: x\n\n\n\n", []tev{data("x")}},
	{"done", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []tev{data(`{"a":1}`), data("[DONE]")}},
}

func TestReader(t *testing.T) {
	for _, tc := range readerCases {
		for _, c := range chunkings {
			got, err := parse([]byte(tc.in), c, 0)
			if err != nil || !equal(got, tc.want) {
				t.Errorf("%s/%s: %q\n got %+v, %v\nwant %+v", tc.name, c.name, tc.in, got, err, tc.want)
			}
			if ref := refParse([]byte(tc.in)); !equal(ref, tc.want) {
				t.Errorf("%s: refParse(%q) = %+v", tc.name, tc.in, ref)
			}
		}
	}
}

// TestReaderShifted runs every case behind a comment event of every length up
// to twice the smallest buffer, ended by lone "\r"s so that it shares the
// case's first ReadSlice chunk: each byte of that chunk lands on a buffer
// boundary in turn.
func TestReaderShifted(t *testing.T) {
	for _, tc := range readerCases {
		if strings.HasPrefix(tc.in, "\xEF") {
			continue // a BOM counts only at the very start
		}
		for pad := range 34 {
			in := ":" + strings.Repeat("p", pad) + "\r\r" + tc.in
			want := append([]tev{comment(strings.Repeat("p", pad))}, tc.want...)
			for _, c := range chunkings {
				if got, err := parse([]byte(in), c, 0); err != nil || !equal(got, want) {
					t.Fatalf("%s/%s/pad %d: got %+v, %v\nwant %+v", tc.name, c.name, pad, got, err, want)
				}
			}
		}
	}
}

// TestReaderLineEndAtBoundary puts each line end of a two-line event at every
// offset of a 16-byte buffer, "\r\n" split across two chunks included.
func TestReaderLineEndAtBoundary(t *testing.T) {
	for n := range 48 {
		x := strings.Repeat("x", n)
		for _, end := range []string{"\n", "\r\n", "\r"} {
			in := "data: " + x + end + "data: " + x + end + end + ": " + x + end + ":" + end + end
			want := []tev{data(x + "\n" + x), comment(x + "\n")}
			for _, c := range chunkings {
				if got, err := parse([]byte(in), c, 0); err != nil || !equal(got, want) {
					t.Fatalf("%d %q/%s: got %+v, %v\nwant %+v", n, end, c.name, got, err, want)
				}
			}
		}
	}
}

func TestReaderHugeLines(t *testing.T) {
	big := strings.Repeat("0123456789", 10_000) // 100 kB, beyond any buffer
	for _, end := range []string{"\n", "\r\n", "\r"} {
		in := ": " + big + end + "data: " + big + end + "data: x" + end + end + "data: " + big
		want := []tev{{Comment: big, HasComment: true, Data: big + "\nx", HasData: true}, data(big)}
		for _, c := range chunkings {
			if got, err := parse([]byte(in), c, 0); err != nil || !equal(got, want) {
				t.Errorf("%q/%s: got %d events, %v", end, c.name, len(got), err)
			}
		}
	}
}

func TestReaderTooLarge(t *testing.T) {
	for _, c := range chunkings {
		// "data: 0123456789" is 16 bytes: the limit counts line bytes, line ends excluded.
		got, err := parse([]byte("data: 0123456789\n\ndata: 0123456789\ndata: x\n\n"), c, 16)
		if want := []tev{data("0123456789")}; !equal(got, want) || !errors.Is(err, ErrEventTooLarge) {
			t.Errorf("%s: got %+v, %v; want %+v, ErrEventTooLarge", c.name, got, err, want)
		}
		long := "data: " + strings.Repeat("x", 1000) + "\n\n"
		if _, err := parse([]byte(long), c, 100); !errors.Is(err, ErrEventTooLarge) {
			t.Errorf("%s: long line: got %v, want ErrEventTooLarge", c.name, err)
		}
		if _, err := parse([]byte(long), c, 1006); err != nil {
			t.Errorf("%s: line at the limit: %v", c.name, err)
		}
	}
	// An endless line is refused once past the limit, not buffered whole.
	src := &endless{}
	if _, err := NewReaderSize(io.LimitReader(src, 10<<20), 1000).Next(); !errors.Is(err, ErrEventTooLarge) || src.n > 2*bufSize+1000 {
		t.Errorf("endless line: got %v after reading %d bytes", err, src.n)
	}
	r := NewReaderSize(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\ndata: y\n\n"), 50)
	for range 3 {
		if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("got %v, want a sticky ErrEventTooLarge", err)
		}
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	src := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom))
	r := NewReader(src)
	if ev, err := r.Next(); err != nil || string(ev.Data) != "a" {
		t.Fatalf("first event: %+v, %v", ev, err)
	}
	for range 2 {
		if _, err := r.Next(); err != boom {
			t.Fatalf("got %v, want the read error (pending event dropped)", err)
		}
	}
}

func TestReaderReset(t *testing.T) {
	r := NewReader(strings.NewReader("\xEF\xBB\xBFdata: a\r"))
	got, err := readAll(r)
	r.Reset(strings.NewReader("\xEF\xBB\xBFdata: b\n\n"))
	got2, err2 := readAll(r)
	if err != nil || err2 != nil || !equal(got, []tev{data("a")}) || !equal(got2, []tev{data("b")}) {
		t.Fatalf("got %+v, %v then %+v, %v", got, err, got2, err2)
	}
	// A *bufio.Reader source is read through the Reader's own buffer (which
	// tells SourceEnded), Reset included.
	br := bufio.NewReaderSize(strings.NewReader("data: c\n\n"), bufSize)
	r = NewReader(br)
	r.Reset(br)
	if got, err := readAll(r); err != nil || !equal(got, []tev{data("c")}) || !r.SourceEnded() {
		t.Fatalf("bufio source: got %+v, %v", got, err)
	}
}

// endless reads as an endless line of 'x', counting what it gave.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.n += len(p)
	return len(p), nil
}

func equal(a, b []tev) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
