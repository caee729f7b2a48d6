package gemini

import (
	"bytes"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// Every chunk of a stream is a whole GenerateContentResponse, usage
// included, and encoding/json spends about fourteen allocations on each. A
// scanner reads the common shape of a chunk into the same response value
// without them: the fields of response, candidate, part, functionCall,
// usageMetadata and promptFeedback, each at most once, keys spelled
// exactly as Gemini spells them, anything else skipped. It gives up, and
// the chunk goes to encoding/json (decode), on anything it does not read
// exactly as encoding/json would:
//
//   - invalid JSON, or nesting deeper than jsonscan.MaxDepth;
//   - in an object whose fields it reads, a key with an escape or a
//     non-ASCII byte, a key that equals one of the object's field names
//     except for case (encoding/json matches keys case-insensitively), or
//     a field name twice;
//   - a value of the wrong type, or a string with invalid UTF-8
//     (encoding/json replaces it); a count of any kind is read, by tap.CountOf
//     when it is not a plain integer;
//   - an "error" member: errors are rare and go to encoding/json whole.
//
// FuzzScan checks that whenever the scanner reads a chunk, decode reads
// the same response; TestScanFixtures that it reads every recorded chunk.

// scanner reads chunks into responses, reusing its memory from chunk to
// chunk: a response it fills shares the scanner's slices and usageMetadata,
// so it is valid only until the next scan. Its strings are fresh copies
// (or constants), never views of the input, so they may be kept.
type scanner struct {
	l        jsonscan.Lexer
	data     []byte // the chunk being read
	cands    []candidate
	parts    []part
	calls    []functionCall
	usage    usageMetadata
	feedback struct {
		BlockReason string `json:"blockReason"`
	}
	model string // the last modelVersion read, reused while it repeats
	buf   []byte // for unescaping
}

// Field names of the objects the scanner reads, as the struct tags of
// response and its parts spell them; the index in each list is the field's.
var (
	responseFields     = []string{"candidates", "promptFeedback", "usageMetadata", "modelVersion", "error"}
	candidateFields    = []string{"content", "finishReason", "index"}
	contentFields      = []string{"parts"}
	partFields         = []string{"text", "thought", "functionCall", "executableCode", "codeExecutionResult"}
	codeFields         = []string{"code", "output"}
	functionCallFields = []string{"name", "args"}
	feedbackFields     = []string{"blockReason"}
	usageFields        = []string{"promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount",
		"toolUsePromptTokenCount", "thoughtsTokenCount", "totalTokenCount"}
)

// response reads data, one JSON object with no surrounding whitespace, into
// resp, which must be zero, and reports whether it could; when it could
// not, resp holds garbage and data must go to decode.
func (s *scanner) response(data []byte, resp *response) bool {
	s.l, s.data = jsonscan.New(data), data
	s.cands, s.parts, s.calls = s.cands[:0], s.parts[:0], s.calls[:0]
	ok := s.object(responseFields, func(field int) bool {
		switch field {
		case 0:
			return s.candidates(&resp.Candidates)
		case 1:
			if s.l.Lit("null") {
				resp.PromptFeedback = nil
				return true
			}
			s.feedback.BlockReason = ""
			resp.PromptFeedback = &s.feedback
			return s.object(feedbackFields, func(int) bool { return s.str(&s.feedback.BlockReason) })
		case 2:
			if s.l.Lit("null") {
				resp.UsageMetadata = nil
				return true
			}
			s.usage = usageMetadata{}
			resp.UsageMetadata = &s.usage
			return s.object(usageFields, func(field int) bool {
				u := &s.usage
				return s.count([...]*tap.Count{&u.PromptTokenCount, &u.CachedContentTokenCount, &u.CandidatesTokenCount,
					&u.ToolUsePromptTokenCount, &u.ThoughtsTokenCount, &u.TotalTokenCount}[field])
			})
		case 3:
			return s.modelVersion(&resp.ModelVersion)
		}
		return false // "error"
	})
	return ok && s.l.End()
}

// release drops the scanner's references to the strings of the last
// chunk, so that an idle stream does not keep them.
func (s *scanner) release() {
	clear(s.cands[:cap(s.cands)])
	clear(s.parts[:cap(s.parts)])
	clear(s.calls[:cap(s.calls)])
	s.feedback.BlockReason, s.data = "", nil
}

// candidates reads the "candidates" array, or null.
func (s *scanner) candidates(dst *[]candidate) bool {
	if s.l.Lit("null") {
		*dst = nil
		return true
	}
	from := len(s.cands)
	ok := s.l.Array(func() bool {
		var c candidate
		if !s.l.Lit("null") && !s.candidate(&c) {
			return false
		}
		s.cands = append(s.cands, c)
		return true
	})
	*dst = s.cands[from:len(s.cands):len(s.cands)]
	if *dst == nil {
		*dst = []candidate{} // encoding/json's empty slice is not nil
	}
	return ok
}

// candidate reads one element of "candidates".
func (s *scanner) candidate(c *candidate) bool {
	return s.object(candidateFields, func(field int) bool {
		switch field {
		case 0:
			if s.l.Lit("null") {
				return true
			}
			return s.object(contentFields, func(int) bool { return s.partList(&c.Content.Parts) })
		case 1:
			return s.finishReason(&c.FinishReason)
		}
		if s.l.Lit("null") {
			return true
		}
		n, ok := s.l.Int()
		c.Index = int(n)
		return ok && int64(c.Index) == n // encoding/json fails on an int overflow
	})
}

// partList reads a content's "parts" array, or null.
func (s *scanner) partList(dst *[]part) bool {
	if s.l.Lit("null") {
		*dst = nil
		return true
	}
	from := len(s.parts)
	ok := s.l.Array(func() bool {
		var p part
		if !s.l.Lit("null") && !s.part(&p) {
			return false
		}
		s.parts = append(s.parts, p)
		return true
	})
	*dst = s.parts[from:len(s.parts):len(s.parts)]
	if *dst == nil {
		*dst = []part{}
	}
	return ok
}

// part reads one element of "parts".
func (s *scanner) part(p *part) bool {
	return s.object(partFields, func(field int) bool {
		switch field {
		case 0:
			return s.str(&p.Text)
		case 1:
			switch {
			case s.l.Lit("true"):
				p.Thought = true
			case s.l.Lit("false"):
				p.Thought = false
			default:
				return s.l.Lit("null")
			}
			return true
		case 3:
			return s.code(&p.ExecutableCode)
		case 4:
			return s.code(&p.CodeExecutionResult)
		}
		if s.l.Lit("null") {
			p.FunctionCall = nil
			return true
		}
		s.calls = append(s.calls, functionCall{})
		fc := &s.calls[len(s.calls)-1] // earlier calls keep the array they point into
		p.FunctionCall = fc
		return s.object(functionCallFields, func(field int) bool {
			if field == 0 {
				return s.str(&fc.Name)
			}
			s.l.WS()
			start := s.l.Pos()
			if !s.l.Skip() {
				return false
			}
			fc.Args = bytes.Clone(s.data[start:s.l.Pos()])
			return true
		})
	})
}

// code reads an executableCode or codeExecutionResult part's object (or
// null) into *dst.
func (s *scanner) code(dst **codePart) bool {
	if s.l.Lit("null") {
		*dst = nil
		return true
	}
	c := new(codePart) // rare: the code execution tool's parts
	*dst = c
	return s.object(codeFields, func(field int) bool {
		if field == 0 {
			return s.str(&c.Code)
		}
		return s.str(&c.Output)
	})
}

// object reads a JSON object whose fields are named by fields: member reads
// the value of field i, other keys' values are skipped. It fails on a key
// it cannot compare as encoding/json would, on a field key that is not
// spelled exactly, and on a field given twice.
func (s *scanner) object(fields []string, member func(field int) bool) bool {
	l := &s.l
	if !l.Lit("{") {
		return false
	}
	if l.Lit("}") {
		return true
	}
	var seen uint64
	for {
		key, escaped, ok := l.Span()
		if !ok || escaped || !l.Lit(":") {
			return false
		}
		field := -1
		for i, f := range fields {
			if string(key) == f {
				field = i
				break
			}
		}
		switch {
		case field >= 0:
			if seen&(1<<field) != 0 || !member(field) {
				return false
			}
			seen |= 1 << field
		case !plainKey(key, fields) || !l.Skip():
			return false
		}
		if l.Lit("}") {
			return true
		}
		if !l.Lit(",") {
			return false
		}
	}
}

// plainKey reports whether key, which is none of fields, is ASCII and
// matches none of them case-insensitively either.
func plainKey(key []byte, fields []string) bool {
	for _, c := range key {
		if c >= 0x80 {
			return false
		}
	}
	for _, f := range fields {
		if len(f) == len(key) && foldEqual(key, f) {
			return false
		}
	}
	return true
}

// foldEqual compares ASCII a and b of equal length, ignoring case.
func foldEqual(a []byte, b string) bool {
	for i := range a {
		x, y := a[i], b[i]
		if x >= 'A' && x <= 'Z' {
			x += 'a' - 'A'
		}
		if y >= 'A' && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// str reads a string into dst, or null (which leaves dst as it is).
func (s *scanner) str(dst *string) bool {
	if s.l.Lit("null") {
		return true
	}
	raw, ok := s.value()
	if ok {
		*dst = string(raw)
	}
	return ok
}

// value reads a string and returns its value, valid until the next read.
func (s *scanner) value() ([]byte, bool) {
	raw, escaped, ok := s.l.Span()
	if ok && escaped {
		s.buf = jsonscan.Unquote(s.buf[:0], raw)
		raw = s.buf
	}
	return raw, ok
}

// modelVersion reads "modelVersion" like str, reusing the string of the
// last chunk when it is the same.
func (s *scanner) modelVersion(dst *string) bool {
	if s.l.Lit("null") {
		return true
	}
	raw, ok := s.value()
	if ok {
		if string(raw) != s.model {
			s.model = string(raw)
		}
		*dst = s.model
	}
	return ok
}

// finishReason reads "finishReason" like str, without allocating for the
// reasons finishReason knows.
func (s *scanner) finishReason(dst *string) bool {
	if s.l.Lit("null") {
		return true
	}
	raw, ok := s.value()
	if !ok {
		return false
	}
	for _, r := range knownReasons {
		if string(raw) == r {
			*dst = r
			return true
		}
	}
	*dst = string(raw)
	return true
}

var knownReasons = []string{"STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT",
	"SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "OTHER", "LANGUAGE",
	"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "FINISH_REASON_UNSPECIFIED"}

// count reads a token count into dst, or null (which leaves dst as it
// is). The common case, a plain integer, is read in place; any other value
// goes to tap.CountOf, as encoding/json's decoding of a count does.
func (s *scanner) count(dst *tap.Count) bool {
	if s.l.Lit("null") {
		return true
	}
	start := s.l.Pos()
	if n, ok := s.l.Int(); ok && n >= 0 {
		*dst = tap.Count(n)
		return true
	}
	s.l = jsonscan.NewAt(s.data, start)
	if !s.l.Skip() {
		return false
	}
	*dst = tap.CountOf(s.data[start:s.l.Pos()])
	return true
}
