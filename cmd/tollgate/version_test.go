package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
)

// TestVersionCommand: `tollgate version` (and --version) prints one line
// naming the build (its module version, and its VCS revision when the
// binary was built from a checkout) and the Go version, and exits 0; an
// operator had no way to tell which build a server or a binary was.
func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var out, errs bytes.Buffer
		code := runCLI(context.Background(), args, &out, &errs, func(string) string { return "" })
		if code != exitOK {
			t.Fatalf("tollgate %v: exit %d, stderr %q", args, code, errs.String())
		}
		line := out.String()
		if !strings.HasPrefix(line, "tollgate ") || !strings.Contains(line, runtime.Version()) ||
			strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
			t.Fatalf("tollgate %v printed %q: want one line naming the build and %s", args, line, runtime.Version())
		}
	}
}

// TestVersionOfABuild: the version line says what debug.BuildInfo holds:
// the module's version, the revision (12 digits) and its time, and
// whether the tree had changes.
func TestVersionOfABuild(t *testing.T) {
	got := versionOf("v1.2.3", map[string]string{
		"vcs.revision": "98b3a44d0c1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a", "vcs.time": "2026-12-06T07:24:00Z", "vcs.modified": "true",
	}, "go1.26.8")
	want := "tollgate v1.2.3 (revision 98b3a44d0c1e, modified, 2026-12-06T07:24:00Z) go1.26.8"
	if got != want {
		t.Fatalf("versionOf = %q, want %q", got, want)
	}
	if got := versionOf("(devel)", nil, "go1.26.8"); got != "tollgate (devel) go1.26.8" {
		t.Fatalf("versionOf without VCS = %q", got)
	}
}

// TestVersionRefusesArguments: `tollgate version` takes no argument and
// no flag but --help, as every other command: `version extra` and
// `version --json` printed the version and exited 0, so a script never
// learnt that what it asked for (JSON, say) was not there; `version
// --help` printed the version, not its usage.
func TestVersionRefusesArguments(t *testing.T) {
	for _, args := range [][]string{{"version", "extra"}, {"version", "--json"}, {"--version", "-x"}} {
		r := runTollgate(t, nil, args...)
		checkFail(t, r, exitUsage, "tollgate version", args)
		if r.out != "" {
			t.Fatalf("tollgate %v: stdout %q, want nothing", args, r.out)
		}
	}
	for _, args := range [][]string{{"version", "--help"}, {"version", "-h"}, {"help", "version"}} {
		r := runTollgate(t, nil, args...)
		if r.code != exitOK || !strings.HasPrefix(r.out, "Usage: tollgate version") || r.errOut != "" {
			t.Fatalf("tollgate %v: exit %d, stdout %q, stderr %q; want its usage and exit 0", args, r.code, r.out, r.errOut)
		}
	}
}
