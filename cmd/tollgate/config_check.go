package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"
)

// configCheck serves `tollgate config check --config FILE`: it loads the
// file as serve would, explains what is wrong in a sentence per problem, or
// summarizes what the file configures. It returns the exit code.
func configCheck(args []string, stdout, stderr io.Writer) int {
	path, err := configFlag("config check", args, true)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate config check: %v\nUsage: tollgate config check --config FILE\n", err)
		return exitUsage
	}
	cfg, err := loadConfig(path)
	if err != nil {
		fmt.Fprintf(stderr, "%s is not valid:\n", path)
		for _, msg := range explainConfigError(err) {
			fmt.Fprintf(stderr, "  - %s\n", msg)
		}
		return exitInvalid
	}
	fmt.Fprintf(stdout, "%s is valid: %d providers, %d models, %d seed prices; usage stream replicas %d, batches of %d, spool cap %d bytes.\n",
		path, len(cfg.Providers), len(cfg.Models), len(cfg.Prices), cfg.Meter.Replicas, cfg.Meter.BatchSize, cfg.Meter.SpoolMaxBytes)
	return exitOK
}

var (
	yamlUnknown = regexp.MustCompile(`line (\d+): field (\S+) not found in type (\S+)`)
	yamlType    = regexp.MustCompile(`line (\d+): cannot unmarshal !!(\w+) ` + "`" + `?([^` + "`" + `]*)` + "`" + `? into (\S+)`)
)

// configSections names the config's Go types as an operator knows them.
var configSections = map[string]string{
	"main.fileConfig": "at the top level", "gateway.ProviderConfig": "in a provider",
	"gateway.ModelConfig": "in a model", "ledger.PriceInput": "in a seed price", "meter.Config": "in the meter section",
}

// explainConfigError turns a config error into sentences an operator can
// act on, one per problem.
func explainConfigError(err error) []string {
	msg := strings.TrimPrefix(err.Error(), "config ")
	if _, rest, ok := strings.Cut(msg, ": "); ok && (strings.Contains(msg, ".yaml") || strings.Contains(msg, ".yml")) {
		msg = rest
	}
	var out []string
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "yaml: unmarshal errors:"))
		if line == "" {
			continue
		}
		switch m := yamlUnknown.FindStringSubmatch(line); {
		case m != nil:
			where := configSections[m[3]]
			if where == "" {
				where = "in " + m[3]
			}
			out = append(out, fmt.Sprintf("line %s: %q is not a setting %s; check its spelling and indentation (docs/configuration.md lists every field).", m[1], m[2], where))
		default:
			if t := yamlType.FindStringSubmatch(line); t != nil {
				out = append(out, fmt.Sprintf("line %s: the value %q has the wrong type for its field (%s expected); durations look like 30s or 5m, amounts are quoted strings like \"2.50\".", t[1], t[3], t[4]))
				continue
			}
			out = append(out, strings.ToUpper(line[:1])+line[1:]+".")
		}
	}
	return out
}
