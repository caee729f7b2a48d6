package sse

import "bytes"

// AppendEvent appends the wire form of ev to dst and returns the extended
// buffer. Lines end in "\n", in this order: each comment line as ": line" (a
// bare ":" for an empty one), `event: Type`, `id: ID`, `retry: Retry`, each
// line of Data as `data: line`, the lines of Other verbatim, then a blank line
// that ends the event.
//
// A field is written when it is non-empty or its Has flag is set (HasComment,
// HasID, HasData; a Type or Retry only when non-empty). An Event with no field
// appends nothing, as a Reader would never return one.
//
// The output is always well framed, whatever ev holds: Data, Comment and Other
// are split into lines at "\r\n", "\r" and "\n" (so a Reader gives back Data
// and Comment with line ends normalized to "\n"); empty lines in Other are
// dropped; Type, ID and Retry are cut at their first '\r' or '\n', so that no
// value can inject a field or an event. Other is meant for lines a Reader
// collected; a line in it that reads as a field is read back as that field.
func AppendEvent(dst []byte, ev Event) []byte {
	start := len(dst)
	if ev.HasComment || len(ev.Comment) > 0 {
		dst = appendLines(dst, ":", ev.Comment)
	}
	if len(ev.Type) > 0 {
		dst = appendField(dst, "event", ev.Type)
	}
	if ev.HasID || len(ev.ID) > 0 {
		dst = appendField(dst, "id", ev.ID)
	}
	if len(ev.Retry) > 0 {
		dst = appendField(dst, "retry", ev.Retry)
	}
	if ev.HasData || len(ev.Data) > 0 {
		dst = appendLines(dst, "data:", ev.Data)
	}
	if len(ev.Other) > 0 {
		dst = appendLines(dst, "", ev.Other)
	}
	if len(dst) == start {
		return dst
	}
	return append(dst, '\n')
}

// appendField appends one single-line field, cutting v at its first line end.
func appendField(dst []byte, name string, v []byte) []byte {
	if i := lineEnd(v); i >= 0 {
		v = v[:i]
	}
	dst = append(dst, name...)
	dst = append(dst, ':')
	if len(v) > 0 {
		dst = append(dst, ' ')
		dst = append(dst, v...)
	}
	return append(dst, '\n')
}

// appendLines appends each line of v (split at "\r\n", "\r" or "\n") after
// prefix and a space; an empty line as the bare prefix. With no prefix, lines
// are written verbatim and empty ones dropped.
func appendLines(dst []byte, prefix string, v []byte) []byte {
	for {
		line, rest, more := v, []byte(nil), false
		if i := lineEnd(v); i >= 0 {
			line, rest, more = v[:i], v[i+1:], true
			if v[i] == '\r' && len(rest) > 0 && rest[0] == '\n' {
				rest = rest[1:]
			}
		}
		switch {
		case prefix == "":
			if len(line) > 0 {
				dst = append(dst, line...)
				dst = append(dst, '\n')
			}
		case len(line) > 0:
			dst = append(dst, prefix...)
			dst = append(dst, ' ')
			dst = append(dst, line...)
			dst = append(dst, '\n')
		default:
			dst = append(dst, prefix...)
			dst = append(dst, '\n')
		}
		if !more {
			return dst
		}
		v = rest
	}
}

// lineEnd returns the index of the first '\r' or '\n' in v, or -1. Two
// IndexByte scans beat one bytes.IndexAny, which goes byte by byte.
func lineEnd(v []byte) int {
	i := bytes.IndexByte(v, '\n')
	head := v
	if i >= 0 {
		head = v[:i]
	}
	if j := bytes.IndexByte(head, '\r'); j >= 0 {
		return j
	}
	return i
}
