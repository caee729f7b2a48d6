package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
)

// Exit codes of the admin commands, as `tollgate --help` documents them.
const (
	exitOK           = 0 // done
	exitError        = 1 // the server failed (internal, unavailable), or something else went wrong
	exitUsage        = 2 // bad command, flags or arguments: nothing was sent
	exitNotFound     = 3 // ENotFound: no such customer, key, entry, event or route
	exitConflict     = 4 // EConflict: it exists already, or clashes with what exists
	exitInvalid      = 5 // EInvalid: the server refused the input
	exitUnauthorized = 6 // EUnauthorized: missing or wrong admin token
	exitUnreachable  = 7 // no answer from the admin API
	exitUnclean      = 8 // reconcile: the ledger does not reconcile
)

// defaultAdminURL is the admin API when neither --admin-url nor
// TOLLGATE_ADMIN_URL says otherwise.
const defaultAdminURL = "http://127.0.0.1:8081"

// cli is one run of an admin command: where it writes, the admin API client
// and the global flags.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	env            func(string) string
	api            *api.Client
	// json prints the API's JSON instead of tables.
	json bool
	// noToken is set when neither --token nor TOLLGATE_ADMIN_TOKEN
	// gave a token: a refusal then says so.
	noToken bool
}

// command is one `tollgate NOUN VERB` (or single-word) admin command.
type command struct {
	name    string // "customers create", or "balance"
	args    string // synopsis of its arguments and flags
	summary string // one line, for the command list
	example string // one or more example invocations
	// interrupted, for a long command, says what an interruption
	// (Ctrl-C) leaves done and how to finish: fail adds it to
	// "interrupted".
	interrupted string
	// nargs is the number of positional arguments it takes.
	nargs int
	// idArgs: its positional arguments are ids (UUIDs), checked as an id
	// flag is, before anything is sent.
	idArgs bool
	// flags registers the command's flags on fs and returns its action,
	// which sees the positional arguments.
	flags func(fs *flag.FlagSet) func(c *cli, args []string) error
}

// usageError is a bad invocation, caught before anything is sent (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// uncleanError makes reconcile exit with exitUnclean after printing its
// result: as tables, or as JSON when json is set.
type uncleanError struct{ json bool }

func (e uncleanError) Error() string {
	if e.json {
		return `the ledger does not reconcile: "clean" is false in the JSON on stdout`
	}
	return "the ledger does not reconcile: see the differences above"
}

// runCLI runs the admin command in args (without the program name), reading
// its configuration through env, and returns the exit code.
func runCLI(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) int {
	if len(args) == 0 || isHelp(args[0]) || args[0] == "help" {
		if len(args) > 1 && args[0] == "help" && args[1] == "config" {
			return configCommand([]string{"--help"}, stdout, stderr)
		}
		if len(args) > 1 && args[0] == "help" {
			if _, ok := serverCommands[args[1]]; ok {
				// Its --help prints its usage and returns before it does anything.
				_ = runServer(ctx, nil, args[1], []string{"--help"}, stdout)
				return exitOK
			}
			return runCLI(ctx, append(args[1:], "--help"), stdout, stderr, env)
		}
		fmt.Fprint(stdout, fullUsage())
		return exitOK
	}
	if args[0] == "version" || args[0] == "--version" || args[0] == "-version" {
		return versionCommand(args[1:], stdout, stderr)
	}
	cmd, rest := findCommand(args)
	if cmd == nil {
		if group := commandsOf(args[0]); len(group) > 0 {
			if len(args) > 1 && isHelp(args[1]) {
				fmt.Fprint(stdout, groupUsage(args[0], group))
				return exitOK
			}
			if len(args) == 1 {
				fmt.Fprint(stderr, groupUsage(args[0], group))
				return exitUsage
			}
			fmt.Fprintf(stderr, "tollgate %s: unknown command %q; run 'tollgate %s --help'.\n", args[0], args[1], args[0])
			return exitUsage
		}
		fmt.Fprintf(stderr, "tollgate: unknown command %q; run 'tollgate --help'.\n", args[0])
		return exitUsage
	}
	c := &cli{ctx: ctx, stdout: stdout, stderr: stderr, env: env}
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	adminURL := fs.String("admin-url", orDefault(env("TOLLGATE_ADMIN_URL"), defaultAdminURL), "admin API base URL (env TOLLGATE_ADMIN_URL)")
	// The token's default stays out of --help: read the environment after parsing.
	token := fs.String("token", "", "admin token (default: env TOLLGATE_ADMIN_TOKEN)")
	fs.BoolVar(&c.json, "json", false, "print the API's JSON instead of a table")
	action := cmd.flags(fs)
	pos, err := parseInterspersed(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, commandUsage(cmd, fs))
		return exitOK
	}
	switch {
	case err != nil:
	case len(pos) < cmd.nargs:
		err = usagef("missing %s", strings.Fields(cmd.args)[len(pos)])
	case len(pos) > cmd.nargs:
		err = usagef("unexpected argument %q", pos[cmd.nargs])
	case cmd.idArgs:
		for i, a := range pos {
			if err = checkID(a); err != nil {
				err = usagef("%s: %v", strings.Fields(cmd.args)[i], err)
				break
			}
		}
	}
	if err == nil {
		err = checkAdminURL(*adminURL)
	}
	if err == nil {
		tok := orDefault(*token, env("TOLLGATE_ADMIN_TOKEN"))
		c.noToken = tok == ""
		c.api = api.NewClient(*adminURL, tok, nil)
		err = action(c, pos)
	}
	return c.fail(cmd, err)
}

// checkAdminURL returns a usage error when adminURL (--admin-url or
// TOLLGATE_ADMIN_URL) is not an http(s) URL with a host.
func checkAdminURL(adminURL string) error {
	if u, err := url.Parse(adminURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--admin-url: %q is not an http(s) URL like %s", adminURL, defaultAdminURL)
	}
	return nil
}

// fail prints err on stderr in one line and returns its exit code. An
// error of the command's context ended by a signal is "interrupted", with
// the command's interrupted hint.
func (c *cli) fail(cmd *command, err error) int {
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	msg := err.Error()
	if c.ctx != nil && c.ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Ctrl-C (SIGINT) or SIGTERM: Go's "context canceled" told the
		// operator nothing. What the error says after it (a re-rating's
		// batches kept, through when) is kept; the command's hint is for
		// an error that says nothing more.
		rest := strings.TrimPrefix(msg, context.Canceled.Error())
		if msg = "interrupted" + rest; rest == "" && cmd.interrupted != "" {
			msg += ": " + cmd.interrupted
		}
	}
	if code == exitUsage {
		msg += fmt.Sprintf("; run 'tollgate %s --help'", cmd.name)
	}
	if code == exitUnauthorized && c.noToken {
		msg = strings.TrimRight(msg, ".") + "; TOLLGATE_ADMIN_TOKEN is not set and no --token was given: export it (the server's admin token)"
	}
	if code == exitUnreachable {
		// The admin listener may be elsewhere than the CLI looks
		// (TOLLGATE_ADMIN_LISTEN moved, as `make run` offers): say how
		// to point it there, not only that nothing answered.
		msg = strings.TrimRight(msg, ".") + "; " + unreachableHint
	}
	msg = strings.TrimRight(msg, ".")
	fmt.Fprintf(c.stderr, "tollgate %s: %s.\n", cmd.name, msg)
	return code
}

// unreachableHint follows an admin API client's "cannot reach the admin
// API" (exit 7): the admin commands' and tollgate demo's.
const unreachableHint = "start tollgate serve (or admin), or point --admin-url or TOLLGATE_ADMIN_URL at its TOLLGATE_ADMIN_LISTEN"

// exitCode maps an error to the documented exit codes: the API's by its
// ledger error code.
func exitCode(err error) int {
	var ue *usageError
	var ne *api.UnreachableError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ne):
		return exitUnreachable
	case errors.As(err, new(uncleanError)):
		return exitUnclean
	}
	switch ledger.ErrorCode(err) {
	case ledger.ENotFound:
		return exitNotFound
	case ledger.EConflict:
		return exitConflict
	case ledger.EInvalid:
		return exitInvalid
	case ledger.EUnauthorized:
		return exitUnauthorized
	}
	return exitError
}

// flagNameRE matches a flag's name in the flag package's errors, which
// write it with one dash ("for flag -amount", "not defined: -bogus").
var flagNameRE = regexp.MustCompile(`(for flag|not defined:|needs an argument:) -([^-\s])`)

// flagError is the flag package's parse error err as a usage error, the
// flag named with the two dashes every help text and doc uses.
func flagError(err error) *usageError {
	return &usageError{msg: flagNameRE.ReplaceAllString(err.Error(), "$1 --$2")}
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments ("customers get ID --json"), and returns the
// positional ones. Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, flagError(err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// flag stops at "--" (consumed) or at the first non-flag.
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// findCommand finds the command named by the first one or two words.
func findCommand(args []string) (*command, []string) {
	for _, cmd := range commands() {
		words := strings.Fields(cmd.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == cmd.name {
			return cmd, args[len(words):]
		}
	}
	return nil, nil
}

// commandsOf returns the commands of a noun ("customers").
func commandsOf(noun string) []*command {
	var out []*command
	for _, cmd := range commands() {
		if strings.HasPrefix(cmd.name, noun+" ") {
			out = append(out, cmd)
		}
	}
	return out
}

func isHelp(s string) bool { return s == "-h" || s == "-help" || s == "--help" }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// commands lists every admin command, in the order help shows them.
func commands() []*command {
	var all []*command
	for _, group := range [][]*command{customerCommands(), keyCommands(), priceCommands(),
		creditCommands(), eventCommands(), reportCommands(), dlqCommands()} {
		all = append(all, group...)
	}
	return all
}

// flagGiven reports whether the command line set the flag name (to its
// default value too).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
