package openai

import (
	"encoding/json"
	"testing"
)

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "\"\\/\n\r\t\x00\x1f\x7f", "\xff\xfeé", "\u2028\u2029", "日本語 😀", "<&>"} {
		got := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q → %s: %v", s, got, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("%q → %s reads back %q, want %q", s, got, back, wantBack)
		}
	}
}
