package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// configUsage is `tollgate config --help`.
const configUsage = `Usage: tollgate config check --config FILE   (or: tollgate config check FILE)

Loads FILE as serve, gateway, meter and admin would, and lists every problem
in it, one sentence each, naming the setting (models[1] ("gpt-x").provider)
and its line; then the TOLLGATE_* variables of the environment it runs in
(TOLLGATE_LISTEN, TOLLGATE_DATABASE_URL, TOLLGATE_SHUTDOWN_GRACE, ...).
Exit codes: 0 valid, 2 bad invocation, 5 not valid (or unreadable).
docs/configuration.md describes every setting; examples/demo.yaml is a complete file.
`

// configCommand serves `tollgate config ...` and returns the exit code:
// --help on stdout with 0, a bad invocation with 2, or configCheck's.
func configCommand(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && (isHelp(args[0]) || args[0] == "help"):
		fmt.Fprint(stdout, configUsage)
		return exitOK
	case len(args) > 0 && args[0] == "check":
		return configCheck(args[1:], stdout, stderr)
	case len(args) == 0:
		fmt.Fprint(stderr, configUsage)
	default:
		fmt.Fprintf(stderr, "tollgate config: unknown command %q; run 'tollgate config --help'.\n", args[0])
	}
	return exitUsage
}

// configCheck serves `tollgate config check [--config] FILE`: it loads the
// file as serve would and lists every problem in it, or summarizes what the
// file configures. It returns the exit code.
func configCheck(args []string, stdout, stderr io.Writer) int {
	for _, a := range args {
		if isHelp(a) {
			fmt.Fprint(stdout, configUsage)
			return exitOK
		}
	}
	path, pos, err := configCheckArgs(args)
	if err == nil && path == "" && len(pos) > 0 {
		path, pos = pos[0], pos[1:]
	}
	switch {
	case err != nil:
	case len(pos) > 0:
		err = fmt.Errorf("unexpected argument %q", pos[0])
	case path == "":
		err = errors.New("give the file to check: --config FILE")
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate config check: %v; run 'tollgate config --help'.\n", err)
		return exitUsage
	}
	cfg, err := loadConfig(path)
	if err != nil {
		var ce *configError
		if !errors.As(err, &ce) {
			fmt.Fprintf(stderr, "tollgate config check: %v.\n", err)
		} else {
			fmt.Fprintf(stderr, "%s is not valid: %d %s.\n", path, len(ce.Problems), plural(len(ce.Problems), "problem", "problems"))
			for _, p := range ce.Problems {
				fmt.Fprintf(stderr, "  - %s\n", p)
			}
		}
		printEnvProblems(stderr) // beside the file's, not a round trip later
		return exitInvalid
	}
	fmt.Fprintf(stdout, "%s is valid: %d providers, %d models, %d seed prices; usage stream replicas %d, batches of %d, spool cap %d bytes.\n",
		path, len(cfg.Providers), len(cfg.Models), len(cfg.Prices), cfg.Meter.Replicas, cfg.Meter.BatchSize, cfg.Meter.SpoolMaxBytes)
	if len(cfg.Providers) == 0 {
		fmt.Fprintln(stdout, "Note: it defines no provider, so a gateway started with it routes no model (fine for a meter or admin process).")
	}
	if os.Getenv("TOLLGATE_NATS_URL") == "" {
		if err := cfg.Meter.CheckEmbedded(); err != nil { // a note: the file may be checked away from its cluster
			fmt.Fprintf(stdout, "Note: TOLLGATE_NATS_URL is not set here, and `tollgate serve` without it refuses this file: %v.\n", err)
		}
	}
	if printEnvProblems(stderr) {
		return exitInvalid
	}
	return exitOK
}

// printEnvProblems lists the environment's problems (envProblems) on
// stderr and reports whether there were any.
func printEnvProblems(stderr io.Writer) bool {
	problems := envProblems()
	if len(problems) == 0 {
		return false
	}
	fmt.Fprintf(stderr, "The environment is not valid: %d %s.\n", len(problems), plural(len(problems), "problem", "problems"))
	for _, p := range problems {
		fmt.Fprintf(stderr, "  - %s\n", p)
	}
	return true
}

// configCheckArgs parses --config FILE (flags may follow the file) and
// returns the positional arguments.
func configCheckArgs(args []string) (path string, pos []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case !strings.HasPrefix(a, "-") || a == "-":
			pos = append(pos, a)
		case name != "config":
			return "", nil, fmt.Errorf("unknown flag %s", a)
		case hasVal:
			path = val
		case i+1 < len(args):
			i++
			path = args[i]
		default:
			return "", nil, errors.New("--config needs a file")
		}
	}
	return path, pos, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// configError is every problem found in a configuration file, each a
// sentence naming the setting at fault and its line.
type configError struct {
	Path     string
	Problems []string
}

func (e *configError) Error() string {
	return fmt.Sprintf("config %s is not valid:\n  - %s", e.Path, strings.Join(e.Problems, "\n  - "))
}

// readConfigFile reads path for loadConfig, in plain words when it cannot.
func readConfigFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("config %s: no such file", path)
	case err != nil:
		return nil, fmt.Errorf("config %s: cannot read it: %w", path, err)
	}
	return b, nil
}
