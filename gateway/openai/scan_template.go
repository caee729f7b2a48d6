package openai

import (
	"bytes"

	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// template is the shape of a chunk that ScanChunk read in full and whose
// only text is one JSON string: one choice, one of the texts a string (the
// others absent or null), no tool calls and no usage object. The chunks of
// an OpenAI stream repeat one another byte for byte but for that string
// (the id, model, created, index and the rest are the stream's), so the
// next chunk is read by comparing its bytes before and after the string
// with the template's, and lexing the string alone.
//
// The shortcut is exact: a chunk that equals the template but for one
// valid JSON string (as Lexer.Span accepts it) in the text's place is read
// by the full scan along the same path, member by member, to the same
// fields at the same or shifted offsets, with that string as the text.
// FuzzScanChunkTemplate holds it to the full scan.
type template struct {
	ok bool
	// shape is the chunk without its text's string token: the bytes before
	// it (shape[:from]) and after it (shape[from:]).
	shape []byte
	// from and to delimit the string's token, quotes included, in the
	// template's chunk.
	from, to int
	text     int // which of ChunkScan.texts the string is
	// Where the full scan found these, in the template's chunk.
	id, model, finish field
	usageFrom         int
	usageTo           int
	created           int64
}

// maxTemplate bounds a template's shape, in bytes: a ChunkScan is pooled
// with its buffers, and a chunk's frame is a few hundred bytes.
const maxTemplate = 2048

// field is where a string's content lies in a chunk: data[at:at+n].
type field struct {
	at, n int
	set   bool // false: the field was nil
}

// fieldOf locates sub, a slice of data or nil, in data (a slice of data
// has data's capacity less its offset).
func fieldOf(data, sub []byte) field {
	if sub == nil {
		return field{}
	}
	return field{at: cap(data) - cap(sub), n: len(sub), set: true}
}

// in returns f's bytes in a chunk whose text's string ends shift bytes
// later than the template's, which ended at to.
func (f field) in(data []byte, to, shift int) []byte {
	if !f.set {
		return nil
	}
	at := f.at
	if at >= to {
		at += shift
	}
	return data[at : at+f.n]
}

// keep makes data, which s has just read in full, the template when its
// shape qualifies; otherwise the template stays as it was.
func (t *template) keep(data []byte, s *ChunkScan) {
	if s.Choices != 1 || s.hasUsage || len(s.deltaCalls) > 0 || len(s.messageCalls) > 0 {
		return
	}
	text := -1
	for i, sp := range s.texts {
		if sp.raw == nil {
			continue
		}
		if text >= 0 {
			return // two strings: the shape would have to match around both
		}
		text = i
	}
	if text < 0 {
		return
	}
	raw := s.texts[text].raw
	from := fieldOf(data, raw).at - 1 // the opening quote
	to := from + len(raw) + 2
	if len(data)-(to-from) > maxTemplate {
		return
	}
	*t = template{ok: true, shape: append(append(t.shape[:0], data[:from]...), data[to:]...), from: from, to: to,
		text: text, id: fieldOf(data, s.ID), model: fieldOf(data, s.Model), finish: fieldOf(data, s.FinishReason),
		usageFrom: s.usageFrom, usageTo: s.usageTo, created: s.Created}
}

// read reads data into s by the template, if data has its shape, and
// reports whether it did; otherwise s must read data in full.
func (t *template) read(data []byte, s *ChunkScan) bool {
	if !t.ok {
		return false
	}
	before, after := t.shape[:t.from], t.shape[t.from:]
	if len(data) < len(t.shape)+2 || data[t.from] != '"' || !bytes.Equal(data[:t.from], before) {
		return false
	}
	l := jsonscan.NewAt(data, t.from)
	raw, escaped, ok := l.Span()
	if !ok || !bytes.Equal(data[l.Pos():], after) {
		return false
	}
	shift := l.Pos() - t.to
	s.ID, s.Model, s.FinishReason = t.id.in(data, t.to, shift), t.model.in(data, t.to, shift), t.finish.in(data, t.to, shift)
	s.Created, s.Choices = t.created, 1
	s.Usage, s.total, s.hasUsage, s.ReasoningOutside = usage.Tokens{}, 0, false, false
	s.usageFrom, s.usageTo = t.usageFrom, t.usageTo
	if s.usageTo > 0 && s.usageFrom >= t.to {
		s.usageFrom, s.usageTo = s.usageFrom+shift, s.usageTo+shift
	}
	s.Output = s.Output[:0]
	s.add(span{raw: raw, escaped: escaped})
	s.Reasoning = len(raw) > 0 && (t.text == deltaReasoningContent || t.text == deltaReasoning || t.text == messageReasoningContent)
	s.ReasoningText = s.ReasoningText[:0]
	if s.Reasoning {
		s.ReasoningText = append(s.ReasoningText, s.Output...)
	}
	return true
}
