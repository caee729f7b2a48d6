package sse

import (
	"bufio"
	"bytes"
	"io"
	"sync"
)

// bufSize is the size of the bufio.Reader a Reader starts reading through.
// Lines longer than it are accumulated, so it bounds no line length. A
// stream holds it for its whole life, idle or not: 1 KiB holds a few chat
// chunks (about 200 bytes each); 4 KiB for every stream cost 30 MiB more at
// 10,000 idle streams, and a 1 KiB buffer for every stream cost a third of
// the chunks per second at 100 unpaced streams (more flushes: see
// Buffered). A Reader whose source had more at hand than the small buffer
// holds (events arriving faster than they are relayed) moves to a buffer
// of bigBufSize from a pool until Reset: a relay then takes more events per
// read and sends them in one write. 32 KiB, the bare proxy's copy buffer,
// took 15% less of the gateway's CPU per chunk than 8 KiB at 100 unpaced
// streams, its writes to the client up to 28 KiB instead of 4 KiB
// (BENCHMARKS.md, "Stop 34").
const (
	bufSize    = 1 << 10
	bigBufSize = 32 << 10
)

// prefixed reads pre, then src.
type prefixed struct {
	pre []byte
	src io.Reader
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.src.Read(b)
}

// source is a Reader's source, read through it so that the Reader knows
// whether the source has ended (see SourceEnded).
type source struct {
	r      io.Reader
	ended  bool // the source returned io.EOF
	filled bool // its last read filled all the room it was given (see Cut)
}

func (s *source) Read(b []byte) (int, error) {
	n, err := s.r.Read(b)
	s.filled = n == len(b) && n > 0
	if err == io.EOF { //nolint:errorlint // io.Reader's contract: EOF itself
		s.ended = true
	}
	return n, err
}

// bigReaders holds bufio.Readers of bigBufSize between streams.
var bigReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bigBufSize) }}

// bom is the UTF-8 byte order mark, skipped at the start of a stream.
const bom = "\xEF\xBB\xBF"

// Reader parses a server-sent event stream into Events. It reuses its
// buffers from one event to the next, so reading a stream allocates only
// while those buffers grow to the size of its largest event. A Reader is not
// safe for concurrent use.
type Reader struct {
	br    *bufio.Reader // small, or a big one from bigReaders
	small *bufio.Reader
	src   source   // what the buffers read
	full  bool     // the source filled small: move to a big buffer
	pre   prefixed // what a big buffer reads: small's unread bytes, then src
	max   int

	rest    []byte // unparsed part of the last ReadSlice chunk, in br's buffer
	partial bool   // rest does not end in '\n' (buffer full, end of input or error)
	err     error  // read error (io.EOF included), reported once rest is used up
	fatal   error  // ErrEventTooLarge, sticky
	skipLF  bool   // the last line ended in a '\r' that ended a chunk: drop a leading '\n'
	started bool   // the first chunk was read (and a BOM stripped)
	long    []byte // a line longer than br's buffer, being accumulated

	size                                 int // bytes in the pending event's lines
	pending                              bool
	typ, data, id, retry, comment, other []byte
	hasID, hasData, hasComment           bool
}

// NewReader returns a Reader that reads events from src, with a maximum event
// size of DefaultMaxEvent (8 MiB).
func NewReader(src io.Reader) *Reader {
	return newReader(src, DefaultMaxEvent, bufSize)
}

// NewReaderSize returns a Reader that reads events from src and returns
// ErrEventTooLarge for an event whose lines (line ends excluded) add up to
// more than maxEvent bytes. A maxEvent of zero or less means DefaultMaxEvent.
func NewReaderSize(src io.Reader, maxEvent int) *Reader {
	return newReader(src, maxEvent, bufSize)
}

func newReader(src io.Reader, maxEvent, size int) *Reader {
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEvent
	}
	r := &Reader{src: source{r: src}, max: maxEvent}
	r.small = bufio.NewReaderSize(&r.src, size)
	r.br = r.small
	return r
}

// Reset discards the Reader's state and makes it read a new stream from src,
// keeping its buffers and maximum event size.
func (r *Reader) Reset(src io.Reader) {
	if r.br != r.small {
		r.br.Reset(nil)
		bigReaders.Put(r.br)
		r.br = r.small
	}
	r.src = source{r: src}
	r.br.Reset(&r.src)
	r.full, r.pre = false, prefixed{}
	r.rest, r.partial, r.err, r.fatal = nil, false, nil, nil
	r.skipLF, r.started, r.long = false, false, r.long[:0]
	r.clear()
}

// Next returns the next event of the stream: the fields of the lines up to the
// next blank line. Blank lines with no field before them are skipped, and an
// event that has only comments or unknown fields is returned too.
//
// Next returns io.EOF at the end of the input, after returning any pending
// event that has a field even if no blank line ended it (the spec would drop
// it; the event is then Unended). It returns ErrEventTooLarge when an event exceeds the maximum size, and
// a read error of the underlying reader as it is (the pending event is then
// discarded). Errors are sticky. The returned Event's slices are valid only
// until the next call.
func (r *Reader) Next() (Event, error) {
	r.clear()
	if r.fatal != nil {
		return Event{}, r.fatal
	}
	for {
		line, err := r.line()
		if err != nil {
			if err == io.EOF && r.pending {
				return r.event(true), nil
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if r.pending {
				return r.event(false), nil
			}
			continue
		}
		if r.size += len(line); r.size > r.max {
			r.fatal = ErrEventTooLarge
			return Event{}, r.fatal
		}
		r.field(line)
	}
}

// clear empties the pending event, keeping its buffers.
func (r *Reader) clear() {
	r.size, r.pending = 0, false
	r.typ, r.data, r.id = r.typ[:0], r.data[:0], r.id[:0]
	r.retry, r.comment, r.other = r.retry[:0], r.comment[:0], r.other[:0]
	r.hasID, r.hasData, r.hasComment = false, false, false
}

// event is the pending event, unended when the input's end ended it
// (made in Next's result: a copy in Next's frame took a stream's stack
// past 8 KiB, TestStreamStack).
func (r *Reader) event(unended bool) Event {
	return Event{
		Type: r.typ, Data: r.data, ID: r.id, HasID: r.hasID, Retry: r.retry,
		Comment: r.comment, Other: r.other, HasData: r.hasData, HasComment: r.hasComment, Unended: unended,
	}
}

// field adds one non-blank line to the pending event.
func (r *Reader) field(line []byte) {
	r.pending = true
	if line[0] == ':' {
		if r.hasComment {
			r.comment = append(r.comment, '\n')
		}
		r.comment = append(r.comment, trimSpace(line[1:])...)
		r.hasComment = true
		return
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], trimSpace(line[i+1:])
	}
	switch string(name) {
	case "data":
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
		r.hasData = true
	case "event":
		r.typ = append(r.typ[:0], value...)
	case "id":
		r.id = append(r.id[:0], value...)
		r.hasID = true
	case "retry":
		r.retry = append(r.retry[:0], value...)
	default:
		if len(r.other) > 0 {
			r.other = append(r.other, '\n')
		}
		r.other = append(r.other, line...)
	}
}

// trimSpace removes one leading space, as the spec does for field values.
func trimSpace(v []byte) []byte {
	if len(v) > 0 && v[0] == ' ' {
		return v[1:]
	}
	return v
}

// line returns the next line without its line end ("\r\n", "\n" or "\r"). At
// the end of the input, a last line without a line end is returned before the
// error. The line is valid until the next call.
func (r *Reader) line() ([]byte, error) {
	for {
		if len(r.rest) == 0 {
			if r.err != nil {
				if len(r.long) > 0 { // unterminated last line, longer than the buffer
					return r.finish(nil), nil
				}
				return nil, r.err
			}
			r.read()
			continue
		}
		rest := r.rest
		if i := bytes.IndexByte(rest, '\r'); i >= 0 {
			n := i + 1
			if n == len(rest) {
				r.skipLF = true // a '\n' may follow in the next chunk
			} else if rest[n] == '\n' {
				n++
			}
			r.rest = rest[n:]
			return r.finish(rest[:i]), nil
		}
		r.rest = nil
		if !r.partial {
			return r.finish(rest[:len(rest)-1]), nil
		}
		if r.err != nil { // unterminated last line
			return r.finish(rest), nil
		}
		// The line goes on past the buffer: keep it and read on.
		if r.size+len(r.long)+len(rest) > r.max {
			r.fatal = ErrEventTooLarge
			return nil, r.fatal
		}
		r.long = append(r.long, rest...)
	}
}

// read fills r.rest with the next chunk of input, up to and including '\n'.
func (r *Reader) read() {
	if r.full && r.br == r.small && r.small.Size() == bufSize {
		// small's unread bytes stay in its buffer, untouched until Reset.
		rest, _ := r.small.Peek(r.small.Buffered())
		r.pre = prefixed{pre: rest, src: &r.src}
		r.br = bigReaders.Get().(*bufio.Reader)
		r.br.Reset(&r.pre)
	}
	chunk, err := r.br.ReadSlice('\n')
	if len(chunk)+r.br.Buffered() >= r.br.Size() {
		r.full = true
	}
	if r.skipLF {
		r.skipLF = false
		if len(chunk) > 0 && chunk[0] == '\n' {
			chunk = chunk[1:]
		}
	}
	if !r.started {
		r.started = true
		if len(chunk) >= len(bom) && string(chunk[:len(bom)]) == bom {
			chunk = chunk[len(bom):]
		}
	}
	r.rest, r.partial = chunk, err != nil
	if err != nil && err != bufio.ErrBufferFull {
		r.err = err
	}
}

// finish returns line, prefixed by the accumulated long line if any.
func (r *Reader) finish(line []byte) []byte {
	if len(r.long) == 0 {
		return line
	}
	r.long = append(r.long, line...)
	line, r.long = r.long, r.long[:0]
	return line
}

// Rest returns a reader of the input read from the source and not yet
// returned in an event, then of the rest of the source: for a relay that
// finds the stream is no SSE after all, and reads it whole. The Reader
// must not be used again before Reset, nor Reset before the returned
// reader is done with.
func (r *Reader) Rest() io.Reader {
	held := append(bytes.Clone(r.long), r.rest...)
	return io.MultiReader(bytes.NewReader(held), r.br)
}

// Pending is the number of bytes read from the source and not yet
// returned in an event: a relay that counts the bytes it hands the Reader
// forwards, after each event, all but the last Pending of them, and so
// forwards the stream event by event, byte for byte.
func (r *Reader) Pending() int { return r.br.Buffered() + len(r.rest) + len(r.long) }

// Cut reports whether the source's last read filled the Reader's buffer to
// its end and stopped in the middle of a line: the source had more at hand
// than the buffer held (an upstream writes an event whole, so the rest of a
// line it began was sent with it), and a Next reads it once the events
// buffered (see Buffered) are returned. A relay skips its flush then, as
// when Buffered, so that what the upstream sent together goes to the
// client together: a short stream's first 1 KiB (the small buffer's worth)
// went out in a write of its own, and the rest in another (BENCHMARKS.md,
// "Issue 16, stop 62"). Unlike Buffered it promises no event without a
// read, and that read waits if the source sent a line's start at exactly a
// buffer's end and then paused; a buffer that ends at a line's end is not
// Cut.
func (r *Reader) Cut() bool {
	if !r.src.filled || r.src.ended || r.err != nil || r.fatal != nil {
		return false // nothing more comes after the source's end
	}
	// The last byte read and not yet returned: small's unread bytes wait
	// in pre after a move to a big buffer, and come after what br holds.
	if n := len(r.pre.pre); n > 0 {
		return r.pre.pre[n-1] != '\n'
	}
	if n := r.br.Buffered(); n > 0 {
		b, _ := r.br.Peek(n) // never reads: the bytes are buffered
		return b[n-1] != '\n'
	}
	return len(r.rest) > 0 && r.rest[len(r.rest)-1] != '\n'
}

// SourceEnded reports whether the source has returned io.EOF: every byte
// of the stream is read, though events of it may still be buffered. An
// HTTP/1.1 body returns it with its last bytes when the body's end came in
// the same read.
func (r *Reader) SourceEnded() bool { return r.src.ended }

// Buffered reports whether the input already read from the source holds a
// complete event, so that the next call to Next returns it without reading
// again: a line with a field followed by a blank line. It is conservative
// (false when unsure) and never reads, so a relay can skip flushing while
// more events are at hand and flush when Next would wait on the source.
func (r *Reader) Buffered() bool {
	if r.fatal != nil {
		return true
	}
	var s eventScan
	if s.scan(r.rest) {
		return true
	}
	more, _ := r.br.Peek(r.br.Buffered()) // never reads: the bytes are buffered
	return s.scan(more)
}

// eventScan finds the end of an event in input given piece by piece: a
// byte other than a line end (a field or comment line), then a '\n'
// followed by an empty line, "\n" or "\r\n". The Reader takes input a line
// at a time up to a '\n', so an event is at hand only once that '\n' is.
// Events ended by lone '\r' line ends are not found: Buffered then says
// false, which only costs a flush.
type eventScan struct {
	field     bool // a byte of a non-blank line was seen
	lineStart bool // the last byte seen was a '\n' after a field
	cr        bool // and then a '\r'
}

func (s *eventScan) scan(b []byte) bool {
	i := 0
	if !s.field {
		for i < len(b) && (b[i] == '\n' || b[i] == '\r') {
			i++
		}
		if i == len(b) {
			return false
		}
		s.field = true
	}
	for i < len(b) {
		switch c := b[i]; {
		case s.cr:
			if c == '\n' {
				return true
			}
			s.lineStart, s.cr = false, false
		case s.lineStart && c == '\n':
			return true
		case s.lineStart && c == '\r':
			s.cr = true
			i++
			continue
		}
		s.lineStart = false
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return false
		}
		i += j + 1
		s.lineStart = true
	}
	return false
}
