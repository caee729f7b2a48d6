package provider

import "bytes"

// EscapesALetter reports whether b holds a JSON escape of an ASCII letter
// or underscore (\u0041 to \u005a, \u005f, \u0061 to \u007a): what
// could spell a key or value ("audio", "ttl") unseen by a byte search. The escapes clients write
// for other text (\u00e9, \u4e2d, Go's \u003c) do not count, so a body in
// any language is read once.
func EscapesALetter(b []byte) bool {
	for {
		i := bytes.Index(b, []byte(`\u00`))
		if i < 0 || i+6 > len(b) {
			return false
		}
		hi, lo := b[i+4], b[i+5]|0x20 // lo: a hex digit, lower-cased
		switch {
		case hi == '4' && lo != '0' && (lo >= '1' && lo <= '9' || lo >= 'a' && lo <= 'f'),
			hi == '5' && (lo >= '0' && lo <= '9' || lo == 'a' || lo == 'f'),
			hi == '6' && lo != '0' && (lo >= '1' && lo <= '9' || lo >= 'a' && lo <= 'f'),
			hi == '7' && (lo >= '0' && lo <= '9' || lo == 'a'):
			return true
		}
		b = b[i+4:]
	}
}
