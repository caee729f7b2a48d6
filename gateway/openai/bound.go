package openai

import (
	"encoding/json"
	"errors"

	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// ErrTooComplex is returned by ParseChunk and ParseChunkLenient for a
// chunk they will not decode: decoding allocates per element, far more
// than the element's bytes ("choices":[{},{},…] made 7 MB of upstream
// bytes 1.6 GB of heap), so an upstream's bytes must not choose how many.
var ErrTooComplex = errors.New("openai: chunk has more choices, tool calls or JSON values than the gateway decodes")

const (
	// maxChoices bounds a chunk's choices (OpenAI's n is at most 128) and
	// maxCalls the tool calls of all of them.
	maxChoices = 1024
	maxCalls   = 4096
	// maxLenientValues bounds the JSON values ParseChunkLenient decodes
	// into maps and slices (tens of bytes of heap each).
	maxLenientValues = 1 << 16
)

// shapeProbe counts a chunk's choices and their tool calls without
// decoding them.
type shapeProbe struct {
	Choices choiceCount `json:"choices"`
}

type choiceCount struct{ n, calls int }

func (c *choiceCount) UnmarshalJSON(b []byte) error {
	l := jsonscan.New(b)
	if l.Peek() != '[' {
		return nil // another type: the decode reports it
	}
	l.Array(func() bool {
		start := l.Pos()
		if !l.Skip() {
			return false
		}
		if c.n++; c.n > maxChoices {
			return false
		}
		var e struct {
			Delta struct {
				ToolCalls elemCount `json:"tool_calls"`
			} `json:"delta"`
			Message struct {
				ToolCalls elemCount `json:"tool_calls"`
			} `json:"message"`
		}
		_ = json.Unmarshal(b[start:l.Pos()], &e)
		c.calls += int(e.Delta.ToolCalls) + int(e.Message.ToolCalls)
		return c.calls <= maxCalls
	})
	return nil
}

type elemCount int

func (n *elemCount) UnmarshalJSON(b []byte) error {
	l := jsonscan.New(b)
	if l.Peek() != '[' {
		return nil
	}
	l.Array(func() bool {
		*n++
		return *n <= maxCalls && l.Skip()
	})
	return nil
}

// tooComplex reports whether ParseChunk's decode of data would allocate
// beyond its bounds.
func tooComplex(data []byte) bool {
	var p shapeProbe
	_ = json.Unmarshal(data, &p) // a field of another type elsewhere still leaves choices counted
	return p.Choices.n > maxChoices || p.Choices.calls > maxCalls
}

// values counts the JSON values of data, roughly (objects, arrays and the
// commas between elements and members, outside strings), stopping past
// limit.
func values(data []byte, limit int) int {
	n, in, esc := 0, false, false
	for _, c := range data {
		switch {
		case esc:
			esc = false
		case in:
			switch c {
			case '\\':
				esc = true
			case '"':
				in = false
			}
		case c == '"':
			in = true
		case c == '{' || c == '[' || c == ',':
			if n++; n > limit {
				return n
			}
		}
	}
	return n
}
