package sse

import (
	"bytes"
	"io"
	"strings"
	"testing/iotest"

	gosse "github.com/tmaxmax/go-sse"
)

// tev is an Event with strings, comparable with ==, for tables and diffs.
type tev struct {
	Type, Data, ID, Retry, Comment, Other string
	HasID, HasData, HasComment            bool
}

func toTev(ev Event) tev {
	return tev{
		Type: string(ev.Type), Data: string(ev.Data), ID: string(ev.ID), Retry: string(ev.Retry),
		Comment: string(ev.Comment), Other: string(ev.Other),
		HasID: ev.HasID, HasData: ev.HasData, HasComment: ev.HasComment,
	}
}

func (e tev) event() Event {
	return Event{
		Type: []byte(e.Type), Data: []byte(e.Data), ID: []byte(e.ID), Retry: []byte(e.Retry),
		Comment: []byte(e.Comment), Other: []byte(e.Other),
		HasID: e.HasID, HasData: e.HasData, HasComment: e.HasComment,
	}
}

// readAll reads every event of r until an error; the error is nil at io.EOF.
func readAll(r *Reader) ([]tev, error) {
	var out []tev
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, toTev(ev))
	}
}

// chunking is one way of feeding input to a Reader: through an io.Reader
// wrapper and with a bufio buffer size (16 is bufio's minimum and forces the
// long-line and split-"\r\n" paths).
type chunking struct {
	name string
	wrap func(io.Reader) io.Reader
	buf  int
}

var chunkings = []chunking{
	{"plain", func(r io.Reader) io.Reader { return r }, bufSize},
	{"onebyte", iotest.OneByteReader, bufSize},
	{"half", iotest.HalfReader, bufSize},
	{"dataerr", iotest.DataErrReader, bufSize},
	{"plain/buf16", func(r io.Reader) io.Reader { return r }, 16},
	{"onebyte/buf16", iotest.OneByteReader, 16},
	{"half/buf16", iotest.HalfReader, 16},
}

func parse(in []byte, c chunking, maxEvent int) ([]tev, error) {
	return readAll(newReader(c.wrap(bytes.NewReader(in)), maxEvent, c.buf))
}

// refParse is a deliberately naive reading of the spec, with this package's
// documented choices (keep everything, flush at EOF), to check Reader against.
func refParse(in []byte) []tev {
	s := strings.TrimPrefix(string(in), "\xEF\xBB\xBF")
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	lines := strings.Split(s, "\n")
	if lines[len(lines)-1] == "" { // the input ended with a line end (or was empty)
		lines = lines[:len(lines)-1]
	}
	var out []tev
	var cur tev
	pending := false
	join := func(dst string, has bool, v string) string {
		if has {
			return dst + "\n" + v
		}
		return v
	}
	for _, l := range lines {
		if l == "" {
			if pending {
				out = append(out, cur)
			}
			cur, pending = tev{}, false
			continue
		}
		pending = true
		name, value, found := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case name == "" && found:
			cur.Comment, cur.HasComment = join(cur.Comment, cur.HasComment, value), true
		case name == "data":
			cur.Data, cur.HasData = join(cur.Data, cur.HasData, value), true
		case name == "event":
			cur.Type = value
		case name == "id":
			cur.ID, cur.HasID = value, true
		case name == "retry":
			cur.Retry = value
		default:
			cur.Other = join(cur.Other, cur.Other != "", l)
		}
	}
	if pending {
		out = append(out, cur)
	}
	return out
}

// typeData is what go-sse's sse.Read reports of an event.
type typeData struct{ Type, Data string }

// keep reports whether an event takes part in the go-sse comparison. go-sse
// yields an event only when it had a data, event or valid (NUL-free) id field,
// and then also when its type and data are both empty; this package returns
// every event with a field. Events with an empty type and empty data are left
// out on both sides; for every other event both yield it.
func keep(td typeData) bool { return td.Type != "" || td.Data != "" }

// ourTypeData reads in with a Reader and keeps what go-sse would report.
func ourTypeData(in []byte) ([]typeData, error) {
	evs, err := parse(in, chunkings[0], DefaultMaxEvent)
	var out []typeData
	for _, ev := range evs {
		if td := (typeData{ev.Type, ev.Data}); keep(td) {
			out = append(out, td)
		}
	}
	return out, err
}

// goSSETypeData reads in with go-sse's standalone parser, sse.Read, after two
// rewrites that remove go-sse's departures from the spec where ours agree:
//   - go-sse treats a last line without a line end as an error
//     (parser.ErrUnexpectedEOF) and drops the pending event; we count the line,
//     so go-sse is given the input with a "\n" added.
//   - go-sse strips a BOM from its first event block, which starts after any
//     leading blank lines, not only at the very start of the stream; giving it
//     a BOM at the start (which the spec strips) makes it strip only that one.
func goSSETypeData(in []byte) ([]typeData, error) {
	src := make([]byte, 0, len(in)+4)
	if !bytes.HasPrefix(in, []byte(bom)) {
		src = append(src, bom...)
	}
	src = append(src, in...)
	if n := len(src); src[n-1] != '\n' && src[n-1] != '\r' {
		src = append(src, '\n')
	}
	var out []typeData
	cfg := &gosse.ReadConfig{MaxEventSize: 2*len(src) + 4096}
	for ev, err := range gosse.Read(bytes.NewReader(src), cfg) {
		if err != nil {
			return out, err
		}
		if td := (typeData{ev.Type, ev.Data}); keep(td) {
			out = append(out, td)
		}
	}
	return out, nil
}
