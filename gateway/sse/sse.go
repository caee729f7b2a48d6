// Package sse reads and writes server-sent event streams (text/event-stream),
// the framing of every streamed LLM response the gateway relays and meters.
//
// Parsing follows the WHATWG HTML Living Standard, section 9.2.6 "Interpreting
// an event stream"
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation),
// with these deliberate differences, all made so that a relay loses nothing:
//
//   - At the end of the input, a pending event that has any field is returned
//     instead of being discarded, and a last line without a line end still
//     counts as a line. Upstreams that close the connection without a final
//     blank line must not lose their last frame.
//   - Events are returned whatever fields they carry: an event with no data
//     (only comments, say) is returned rather than dropped, because the
//     gateway forwards keep-alive comments.
//   - Comments and lines with an unknown field name are kept (Event.Comment,
//     Event.Other) instead of ignored. Gemini and Vertex put a raw JSON error
//     body in the middle of a stream; its lines arrive in Other.
//   - Values are raw: an id containing NUL and a retry that is not all digits
//     are reported as they are; the spec's consumer would ignore them.
//
// The package is pure: io.Reader in, events out; events in, bytes out. It does
// no network I/O and holds no state between streams.
package sse

import "errors"

// ErrEventTooLarge is returned by Reader.Next when the lines of one event
// (line ends excluded) add up to more than the Reader's maximum event size.
// It is sticky: every later call returns it again.
var ErrEventTooLarge = errors.New("sse: event too large")

// DefaultMaxEvent is the maximum event size of a Reader made by NewReader.
const DefaultMaxEvent = 8 << 20

// Event is one server-sent event: the fields of the lines between two blank
// lines. Byte slices returned by Reader.Next are valid only until the next
// call to Next (or Reset); copy what must outlive it.
type Event struct {
	// Type is the value of the last `event` field; empty means the default
	// type, "message".
	Type []byte
	// Data is the values of the `data` fields joined with "\n", without a
	// trailing newline.
	Data []byte
	// ID is the value of the last `id` field, verbatim (even if it holds NUL).
	ID []byte
	// HasID reports that an `id` field was present (ID may still be empty,
	// which resets the last event ID).
	HasID bool
	// Retry is the raw value of the last `retry` field, not validated.
	Retry []byte
	// Comment is the comment lines (lines starting with ':'), after the ':'
	// and one optional space, joined with "\n".
	Comment []byte
	// Other is the lines whose field name is not event, data, id or retry and
	// that are not comments, verbatim, joined with "\n". A raw, non-SSE body
	// inside a stream (a JSON error from Gemini or Vertex) stays recoverable
	// here.
	Other []byte
	// HasData reports that at least one `data` field was present, which
	// distinguishes an empty `data:` from no data at all.
	HasData bool
	// HasComment reports that at least one comment line was present, which
	// distinguishes a bare ":" keep-alive from no comment at all.
	HasComment bool
	// Unended reports that the end of the input, not a blank line, ended
	// the event (Reader.Next returns it; the spec would drop it): its last
	// line may be cut short, as a body broken off mid-line leaves it.
	Unended bool
}
