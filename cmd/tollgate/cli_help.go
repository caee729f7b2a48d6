package main

import (
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
)

// exitCodesHelp documents the admin commands' exit codes.
const exitCodesHelp = `Exit codes (admin commands):
  0  ok
  1  server or internal error (HTTP 5xx, a stream cut short, a file not written, a change sent and not answered: it may have been done);
     also HTTP 429 (too many wrong admin tokens from this address: retry in a few seconds, with the right token)
  2  usage error: unknown command, bad flags or arguments (nothing was sent)
  3  not found (HTTP 404): no such customer, key, entry, event or route
  4  conflict (HTTP 409): e.g. an overlapping override, an idempotency key used for another entry
  5  invalid input (HTTP 400): the API's message says which field
  6  unauthorized (HTTP 401/403): missing or wrong --token / TOLLGATE_ADMIN_TOKEN
  7  cannot reach the admin API at --admin-url / TOLLGATE_ADMIN_URL
  8  reconcile only: the ledger does not reconcile
`

// adminFlagsHelp documents the flags every admin command takes.
const adminFlagsHelp = `Every admin command takes:
  --admin-url URL   admin API base URL (env TOLLGATE_ADMIN_URL, default ` + defaultAdminURL + `)
  --token TOKEN     admin token (env TOLLGATE_ADMIN_TOKEN)
  --json            print the API's JSON instead of a table
  --help            the command's flags and an example
`

// fullUsage is `tollgate --help`: the server commands, every admin command
// with an example, the environment and the exit codes.
func fullUsage() string {
	var b strings.Builder
	b.WriteString(serverUsage)
	b.WriteString("\nAdmin commands (clients of the admin API, never of Postgres):\n")
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, cmd := range commands() {
		fmt.Fprintf(w, "  tollgate %s\t%s\n", cmd.name, cmd.summary)
	}
	w.Flush()
	b.WriteString("\nExamples:\n")
	for _, cmd := range commands() {
		fmt.Fprintf(&b, "  %s\n", cmd.example)
	}
	b.WriteString("\n" + adminFlagsHelp + "\n" + envUsage + "\n" + exitCodesHelp)
	b.WriteString("\nRun 'tollgate NOUN --help' or 'tollgate NOUN VERB --help' for a command's flags and examples.\n")
	return b.String()
}

// groupUsage is `tollgate customers --help`: a noun's commands.
func groupUsage(noun string, cmds []*command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: tollgate %s VERB [flags]\n\n", noun)
	for _, cmd := range cmds {
		fmt.Fprintf(&b, "  tollgate %s %s\n      %s\n", cmd.name, cmd.args, cmd.summary)
	}
	b.WriteString("\nExamples:\n")
	for _, cmd := range cmds {
		fmt.Fprintf(&b, "  %s\n", cmd.example)
	}
	b.WriteString("\n" + adminFlagsHelp + "\n" + exitCodesHelp)
	return b.String()
}

// commandUsage is `tollgate customers create --help`: synopsis, flags
// (those of fs) and examples.
func commandUsage(cmd *command, fs *flag.FlagSet) string {
	return fmt.Sprintf("Usage: tollgate %s %s\n\n%s.\n\nFlags:\n%s\nExample:\n  %s\n\n%s",
		cmd.name, cmd.args, upperFirst(cmd.summary), flagsUsage(fs), cmd.example, exitCodesHelp)
}

// serverUsageOf is `tollgate serve --help` (or that of another of
// serverCommands, fs's name): synopsis, what it does, its flags (those of
// fs) and the environment.
func serverUsageOf(fs *flag.FlagSet) string {
	cmd := serverCommands[fs.Name()]
	return fmt.Sprintf("Usage: tollgate %s %s\n\n%s.\n\nFlags:\n%s  --help\n      this help\n\n%s",
		fs.Name(), cmd.args, upperFirst(cmd.summary), flagsUsage(fs), envUsage)
}

// flagsUsage lists fs's flags, each with its usage and its default.
func flagsUsage(fs *flag.FlagSet) string {
	var flags strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(&flags, "  --%s\n      %s", strings.TrimSpace(f.Name+" "+kind), usage)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			if isString(f) {
				fmt.Fprintf(&flags, " (default %q)", f.DefValue)
			} else { // a number, as Go's flag package shows it
				fmt.Fprintf(&flags, " (default %s)", f.DefValue)
			}
		}
		flags.WriteString("\n")
	})
	return flags.String()
}

// isString reports whether f holds a string (its default is then shown
// quoted).
func isString(f *flag.Flag) bool {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return true
	}
	_, s := g.Get().(string)
	return s
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
