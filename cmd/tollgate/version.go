package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// versionUsage is `tollgate version --help`.
const versionUsage = `Usage: tollgate version

Print the build's version, VCS revision and Go version, in one line, and exit 0.
`

// versionCommand runs `tollgate version` with args (after the command's
// name) and returns its exit code: it prints version's line; it takes no
// argument and no flag but --help (its usage, exit 0). Anything else is a
// usage error (exitUsage), one line on stderr.
func versionCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, versionUsage)
		return exitOK
	case err != nil:
		err = flagError(err)
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate version: %v; run 'tollgate version --help'.\n", err)
		return exitUsage
	}
	fmt.Fprintln(stdout, version())
	return exitOK
}

// version is the line `tollgate version` prints and the "tollgate
// running" log line carries: the build's module version ("(devel)" for a
// binary built from a checkout with go build), its VCS revision, whether
// the tree had uncommitted changes, and the commit's time when the Go
// toolchain stamped them (debug.BuildInfo's vcs.* settings, set by
// go build in a git checkout unless -buildvcs=false), and the Go version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "tollgate (unknown build)"
	}
	settings := make(map[string]string, len(bi.Settings))
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	return versionOf(bi.Main.Version, settings, bi.GoVersion)
}

// versionOf is version's line for a module version, build settings and
// Go version.
func versionOf(module string, settings map[string]string, goVersion string) string {
	if module == "" {
		module = "(devel)"
	}
	var vcs []string
	if rev := settings["vcs.revision"]; rev != "" {
		vcs = append(vcs, "revision "+rev[:min(len(rev), 12)])
		if settings["vcs.modified"] == "true" {
			vcs = append(vcs, "modified")
		}
		if t := settings["vcs.time"]; t != "" {
			vcs = append(vcs, t)
		}
	}
	if len(vcs) == 0 {
		return fmt.Sprintf("tollgate %s %s", module, goVersion)
	}
	return fmt.Sprintf("tollgate %s (%s) %s", module, strings.Join(vcs, ", "), goVersion)
}
