package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigCheck(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := configCheck([]string{"--config", "../../examples/demo.yaml"}, &out, &errOut); code != exitOK ||
		!strings.Contains(out.String(), "is valid: 3 providers, 4 models, 4 seed prices") {
		t.Fatalf("demo config: exit %d, %s %s", code, out.String(), errOut.String())
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(`providers:
  - name: sim
    type: openai
    base_url: http://127.0.0.1:9090/v1
    connect_timeot: 3s
models:
  - name: m
    provider: nobody
meter:
  batch_size: lots
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	code := configCheck([]string{"--config", bad}, &out, &errOut)
	got := errOut.String()
	for _, want := range []string{
		`line 5: "connect_timeot" is not a setting in a provider; check its spelling`,
		`line 10: the value "lots" has the wrong type`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config check said:\n%s\nwant a sentence with %q", got, want)
		}
	}
	if code != exitInvalid {
		t.Fatalf("exit %d, want %d", code, exitInvalid)
	}
	// Once it parses, the semantic error is a sentence too.
	if err := os.WriteFile(bad, []byte("providers:\n  - {name: sim, type: openai, base_url: http://x/v1}\nmodels:\n  - {name: m, provider: nobody}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := configCheck([]string{"--config", bad}, &out, &errOut); code != exitInvalid ||
		!strings.Contains(errOut.String(), `provider "nobody" is not defined under providers`) {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}
