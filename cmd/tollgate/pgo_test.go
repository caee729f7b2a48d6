package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDefaultPGOProfilesTheRequestPath: default.pgo, the CPU profile go
// build optimises tollgate with (-pgo=auto, Go's profile-guided
// optimisation; `make pgo` writes it), is one the compiler reads (go tool
// preprofile, the build's own first step: a file it refuses fails every
// build of tollgate), and most of its weight within this module is on the
// request path: the gateway's relay and its metering. A profile of
// something else would optimise the wrong code.
func TestDefaultPGOProfilesTheRequestPath(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go not on PATH:", err)
	}
	out := filepath.Join(t.TempDir(), "preprofile")
	if b, err := exec.CommandContext(t.Context(), goTool, "tool", "preprofile", "-i", "default.pgo", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("go tool preprofile: %v\n%s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The preprofile's format: a header line, then per call edge the
	// caller, the callee, and "call-site-offset weight".
	sc := bufio.NewScanner(f)
	if !sc.Scan() || sc.Text() != "GO PREPROFILE V1" {
		t.Fatalf("preprofile header %q", sc.Text())
	}
	const module = "github.com/tollgate-dev/tollgate/"
	var ours, path int64
	hot := map[string]bool{}
	for sc.Scan() {
		caller := sc.Text()
		if !sc.Scan() || !sc.Scan() {
			t.Fatal("preprofile: an edge cut short")
		}
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 {
			t.Fatalf("preprofile edge weight line %q", sc.Text())
		}
		w, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(caller, module) {
			continue
		}
		ours += w
		for _, p := range []string{"gateway.", "gateway/openai.", "gateway/sse.", "meter.", "meter/journal.", "meter/usage"} {
			if strings.HasPrefix(caller, module+p) {
				path += w
				hot[caller] = true
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if ours == 0 || 2*path < ours {
		t.Fatalf("default.pgo: %d of its %d samples' edges within this module are on the request path; want most (regenerate it: make pgo)", path, ours)
	}
	for _, fn := range []string{module + "gateway.(*Server).relayChatStream", module + "gateway.(*Server).chatCompletions"} {
		if !hot[fn] {
			t.Errorf("default.pgo has no sample in %s (renamed? regenerate it: make pgo)", fn)
		}
	}
}
