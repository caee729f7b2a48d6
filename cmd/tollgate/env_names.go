package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
)

// runtimeEnv are the environment variables the tollgate command reads
// (docs/configuration.md, "Environment").
var runtimeEnv = []string{
	"TOLLGATE_DATABASE_URL", "TOLLGATE_NATS_URL", "TOLLGATE_ADMIN_TOKEN", "TOLLGATE_ADMIN_URL",
	"TOLLGATE_LISTEN", "TOLLGATE_ADMIN_LISTEN", "TOLLGATE_DATA_DIR", "TOLLGATE_SHUTDOWN_GRACE",
	"TOLLGATE_PPROF", "TOLLGATE_LOG_LEVEL",
}

// envFoldsCase says environment names match without regard to case, as
// on Windows, where os.Getenv("TOLLGATE_LISTEN") reads tollgate_listen.
var envFoldsCase = runtime.GOOS == "windows"

// misspeltEnv returns a sentence for each variable of environ (as
// os.Environ gives it, NAME=value) that tollgate does not read but whose
// name is within two edits of one it does (TOLLGATE_ADMIN_LISTN,
// TOLLGATE_DATABSE_URL, tollgate_listen except on Windows, envFoldsCase):
// such a setting is ignored, and
// the process runs on the default it was meant to replace (the admin
// listener on every interface, the default database). Other TOLLGATE_
// names (the tests' and the benchmarks' own) are left alone. Sorted by
// name.
func misspeltEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(runtimeEnv, name) || len(name) < len("TOLLGATE_") {
			continue
		}
		upper := strings.ToUpper(name)
		if envFoldsCase && slices.Contains(runtimeEnv, upper) {
			continue // read as it is (Windows)
		}
		for _, known := range runtimeEnv {
			if upper == known || levenshtein.ComputeDistance(upper, known) <= 2 {
				out = append(out, fmt.Sprintf("%s is set, but tollgate reads no such variable: did you mean %s? (unset, it takes its default)", name, known))
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
