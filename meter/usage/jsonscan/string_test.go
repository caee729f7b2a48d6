package jsonscan

import (
	"encoding/json"
	"testing"
)

// FuzzAppendString: AppendStringHTML writes what json.Marshal writes, byte
// for byte; AppendString writes a JSON string that reads back as the same
// string as json.Marshal's, with < > & left as they are.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\/\n\r\t\b\f\x00\x1f\x7f", "\xff\xfeé", "\u2028\u2029", "日本語 😀", "<&>", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendStringHTML([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendStringHTML(%q) = %s, json.Marshal %s", s, got[1:], want)
		}
		got := AppendString(nil, s)
		var back, wantBack string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: %v", s, got, err)
		}
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("AppendString(%q) = %s reads back %q, want %q", s, got, back, wantBack)
		}
	})
}
