package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter"
)

// emptyConfig is the problem of a file that configures nothing.
const emptyConfig = "the file is empty: it configures nothing. A configuration defines at least its providers and models; " +
	"examples/demo.yaml is a complete one and docs/configuration.md describes every setting."

// parseConfig decodes and validates a configuration file's bytes with the
// validators serve runs (gateway.Config.Validate with the registered
// provider types, meter.Config.Validate, ledger.PriceInput.Price), and
// fills in defaults. Its error is a *configError listing every problem:
// the decoder's (unknown settings, wrong types) and each validator's, one
// sentence each, naming the setting and its line.
func parseConfig(path string, b []byte, types []string) (*fileConfig, error) {
	fail := func(problems ...string) error { return &configError{Path: path, Problems: problems} }
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		// The parser stops at the first malformed line: one problem.
		return nil, fail(malformedYAML(err))
	}
	if isEmptyYAML(&root) {
		return nil, fail(emptyConfig)
	}
	x := newConfigIndex(&root)
	var cfg fileConfig
	b, problems, bad := badTimes(b, x)
	if b == nil { // bad times it could not set aside: they alone, with their lines
		return nil, fail(problems...)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, fail(malformedYAML(err))
		}
		// The decoder went on past each of these: the rest is decoded.
		more, paths := x.yamlProblems(te.Errors)
		problems = append(problems, more...)
		maps.Copy(bad, paths)
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		problems = append(problems, "the file holds more than one YAML document (a line with ---): only the first is read; keep one.")
	}
	for _, p := range validationProblems(&cfg, types) {
		if bad[p.entry] || slices.ContainsFunc(ancestors(p.raw), func(a string) bool { return bad[a] }) {
			continue // its YAML error says it already
		}
		problems = append(problems, x.explain(p))
	}
	if len(problems) > 0 {
		slices.SortStableFunc(problems, func(a, b string) int { return lineOf(a) - lineOf(b) })
		return nil, fail(problems...)
	}
	// Valid: validate the real thing, to fill in its defaults.
	if err := cfg.Validate(types...); err != nil {
		return nil, fail(err.Error())
	}
	if err := cfg.Meter.Validate(); err != nil {
		return nil, fail(err.Error())
	}
	return &cfg, nil
}

// malformedYAML explains a YAML syntax error.
func malformedYAML(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("line %s: this is not well-formed YAML (%s); check the indentation (spaces, not tabs), the colons and the quotes.", m[1], m[2])
	}
	return fmt.Sprintf("this is not well-formed YAML (%s).", msg)
}

// isEmptyYAML reports whether a document holds no setting: nothing, only
// comments, null, or an empty mapping.
func isEmptyYAML(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode {
		return len(n.Content) == 0 || isEmptyYAML(n.Content[0])
	}
	switch n.Kind {
	case 0:
		return true
	case yaml.ScalarNode:
		return n.Tag == "!!null"
	case yaml.MappingNode:
		return len(n.Content) == 0
	}
	return false
}

// checkProblem is a validator's complaint: the list entry it is about
// ("models[1]", or "" outside the lists), the setting ("models[1].provider"
// or "meter.batch_size", when the message names one) and the sentence.
type checkProblem struct{ entry, raw, text string }

var (
	entryProblem = regexp.MustCompile(`^(providers|models)\[(\d+)\](?: \(.*?\))?: (.*)$`)
	leadingKey   = regexp.MustCompile(`^([a-z_]+)\b`)
	meterKey     = regexp.MustCompile(`^meter\.([a-z_]+)`)
	// settingProblem is the setting a problem outside the lists starts
	// with: "retry.max_attempts must be 0 (its default) or more".
	settingProblem = regexp.MustCompile(`^[a-z_]+(\.[a-z_]+)*\b`)
	// missingAmount is ledger.ParseMicros' word for an amount left out.
	missingAmount = regexp.MustCompile(`^([a-z_]+): is required, a decimal string`)
	lineNumber    = regexp.MustCompile(`\(line (\d+)`)
	// nestedProblem is a list inside an entry: "deployments[0] (name): ".
	nestedProblem = regexp.MustCompile(`^([a-z_]+\[\d+\])(?: \(.*?\))?: `)
	// refersTo finds the name of another entry a problem is about.
	refersTo = regexp.MustCompile(`^(?:provider )?"([^"]*)" is not (?:defined|another model)`)
)

// validationProblems runs the validators until each has said everything:
// the validators stop at their first error, so the setting at fault is set
// to a valid stand-in (or its entry left out) and the check repeated.
func validationProblems(cfg *fileConfig, types []string) []checkProblem {
	out := gatewayProblems(cfg.Config, types)
	out = append(out, meterProblems(cfg.Meter)...)
	for i, p := range cfg.Prices {
		out = append(out, priceProblems(fmt.Sprintf("prices[%d]", i), p)...)
	}
	return out
}

func gatewayProblems(c gateway.Config, types []string) []checkProblem {
	// c is repaired and never validated: Validate fills in defaults (a
	// model's provider becomes a deployment), so each round validates a copy.
	c.Providers, c.Models = slices.Clone(c.Providers), cloneModels(c.Models)
	type entry struct {
		orig int // index in the file
		gone bool
	}
	lists := map[string][]entry{"providers": make([]entry, len(c.Providers)), "models": make([]entry, len(c.Models))}
	for _, l := range lists {
		for i := range l {
			l[i].orig = i
		}
	}
	validType := "openai"
	if len(types) > 0 {
		validType = types[0]
	}
	var out []checkProblem
	said := map[string]bool{}
	// Names of entries left out: what refers to them needs no word of its own.
	dropped := map[string]bool{}
	for range 4*(len(c.Providers)+len(c.Models)) + 1 {
		try := c
		try.Providers, try.Models = slices.Clone(c.Providers), cloneModels(c.Models)
		err := try.Validate(types...)
		if err == nil {
			break
		}
		progressed := false
		for _, line := range strings.Split(err.Error(), "\n") {
			m := entryProblem.FindStringSubmatch(line)
			if m == nil {
				if !said[line] { // a top-level setting's, "retry.budget must be ...": said each round
					out = append(out, checkProblem{raw: settingProblem.FindString(line), text: line})
					said[line] = true
				}
				continue
			}
			list, rest := m[1], m[3]
			i, _ := strconv.Atoi(m[2])
			live := liveIndex(lists[list], func(e entry) bool { return !e.gone }, i)
			if live < 0 {
				continue
			}
			raw := fmt.Sprintf("%s[%d]", list, lists[list][live].orig)
			p := checkProblem{entry: raw, raw: raw, text: rest}
			body := rest
			for n := nestedProblem.FindStringSubmatch(body); n != nil; n = nestedProblem.FindStringSubmatch(body) {
				p.raw += "." + n[1]
				body = body[len(n[0]):]
			}
			field := leadingKey.FindString(body)
			if strings.Contains(body, "already defined") {
				field = "name" // of the entry, or of its deployment
			}
			if field != "" {
				p.raw += "." + field
			}
			key := raw + ": " + rest
			drop := said[key] // repaired once and still wrong: leave it out
			// The list inside the entry the problem is about, "deployments[1]",
			// or "" when it is about the entry's own setting (models[1].name).
			nested := strings.TrimPrefix(strings.TrimSuffix(strings.TrimPrefix(p.raw, raw), "."+field), ".")
			if field == "" {
				nested = ""
			}
			said[key] = true
			ref := refersTo.FindStringSubmatch(body)
			suppressed := ref != nil && dropped[ref[1]]
			switch {
			case drop:
			case list == "providers":
				pc := &c.Providers[i]
				switch field {
				case "name":
					dropped[pc.Name] = true // what refers to it is wrong for the same reason
					pc.Name = fmt.Sprintf("invalid-provider-%d", lists[list][live].orig)
				case "type":
					pc.Type = validType
				case "base_url":
					pc.BaseURL = "http://placeholder.invalid"
				case "api_key_env":
					pc.APIKeyEnv = ""
				case "protocol":
					pc.Protocol = ""
				case "prefix_routes":
					pc.PrefixRoutes = ""
				default:
					drop = true
				}
			default:
				mc := &c.Models[i]
				var j, f int
				_, deployment := fmt.Sscanf(nested, "deployments[%d]", &j)
				_, fallback := fmt.Sscanf(strings.TrimPrefix(p.raw, raw+"."), "fallbacks[%d]", &f) // no field follows its index
				switch {
				case nested == "" && field == "name":
					mc.Name = fmt.Sprintf("invalid-model-%d", lists[list][live].orig)
				case deployment == nil && j < len(mc.Deployments) && field == "name":
					// Named as another of its model's, or too long: a
					// name of its own, and the model's other problems
					// are checked in turn.
					mc.Deployments[j].Name = fmt.Sprintf("invalid-deployment-%d", j)
				case deployment == nil && j < len(mc.Deployments) && field == "weight":
					mc.Deployments[j].Weight = 1
				case deployment == nil && j < len(mc.Deployments) && field == "max_concurrent":
					mc.Deployments[j].MaxConcurrent, mc.Deployments[j].RPMLimit = 0, 0
				case fallback == nil && f < len(mc.Fallbacks) && otherModel(c.Models, mc.Name) != "":
					// Another model of the file in its place: the next
					// fallback is checked in turn (one that is dropped
					// later is said of its own, not of this fallback).
					mc.Fallbacks[f] = otherModel(c.Models, mc.Name)
				case nested == "" && strings.HasPrefix(body, "give provider or deployments"):
					mc.Provider = "" // its deployments are checked on
				case field != "provider" || len(c.Providers) == 0:
					drop = true
				case nested == "" || (deployment == nil && yamlField(mc, "deployments").Len() == 0):
					mc.Provider = c.Providers[0].Name
				case deployment == nil && j < yamlField(mc, "deployments").Len():
					d := yamlField(mc, "deployments").Index(j).Addr().Interface()
					setYAMLField(d, "provider", c.Providers[0].Name)
					if yamlField(d, "name").String() == "" { // its default name, from the provider, could clash
						setYAMLField(d, "name", fmt.Sprintf("invalid-deployment-%d", j))
					}
				default:
					drop = true
				}
			}
			if !suppressed {
				out = append(out, p)
			}
			if drop {
				switch {
				case list == "providers":
					dropped[c.Providers[i].Name] = true
					c.Providers = slices.Delete(c.Providers, i, i+1)
					lists[list][live].gone = true
				case c.Models[i].Name != "" && field != "name" && len(c.Providers) > 0:
					// A valid stand-in of the same name: the name stays
					// taken, so that a second model of it is still said.
					c.Models[i] = gateway.ModelConfig{Name: c.Models[i].Name, Provider: c.Providers[0].Name}
				default:
					dropped[c.Models[i].Name] = true
					c.Models = slices.Delete(c.Models, i, i+1)
					lists[list][live].gone = true
				}
			}
			progressed = true
			break // indices may have moved: validate again
		}
		if !progressed {
			break
		}
	}
	return out
}

// otherModel returns the name of a model of models other than name, or "".
func otherModel(models []gateway.ModelConfig, name string) string {
	for _, m := range models {
		if m.Name != "" && m.Name != name {
			return m.Name
		}
	}
	return ""
}

// cloneModels copies models deeply enough for Validate to fill in a copy:
// their lists (deployments, fallbacks) too.
func cloneModels(models []gateway.ModelConfig) []gateway.ModelConfig {
	out := slices.Clone(models)
	for i := range out {
		v := reflect.ValueOf(&out[i]).Elem()
		for j := range v.NumField() {
			if f := v.Field(j); f.Kind() == reflect.Slice && f.CanSet() && !f.IsNil() {
				c := reflect.MakeSlice(f.Type(), f.Len(), f.Len())
				reflect.Copy(c, f)
				f.Set(c)
			}
		}
	}
	return out
}

// liveIndex returns the position in l of the i-th entry that keep holds
// for, or -1.
func liveIndex[T any](l []T, keep func(T) bool, i int) int {
	for j, e := range l {
		if keep(e) {
			if i == 0 {
				return j
			}
			i--
		}
	}
	return -1
}

func meterProblems(m meter.Config) []checkProblem {
	var out []checkProblem
	said := map[string]bool{}
	for range reflect.TypeFor[meter.Config]().NumField() + 1 {
		err := m.Validate()
		if err == nil || said[err.Error()] {
			break
		}
		said[err.Error()] = true
		key := meterKey.FindStringSubmatch(err.Error())
		p := checkProblem{text: err.Error()}
		if key != nil {
			p.raw = "meter." + key[1]
		}
		out = append(out, p)
		// Zero is the default, which is valid.
		if key == nil || !setYAMLField(&m, key[1], nil) {
			break
		}
	}
	return out
}

func priceProblems(raw string, p ledger.PriceInput) []checkProblem {
	var out []checkProblem
	said := map[string]bool{}
	for range reflect.TypeFor[ledger.PriceInput]().NumField() + 1 {
		_, err := p.Price()
		if err == nil || said[err.Error()] {
			break
		}
		said[err.Error()] = true
		key := leadingKey.FindString(err.Error())
		pr := checkProblem{entry: raw, text: err.Error()}
		if m := missingAmount.FindStringSubmatch(pr.text); m != nil {
			pr.text = m[1] + ` is required: a decimal amount per million tokens, e.g. "2.50"`
		}
		if key != "" {
			pr.raw = raw + "." + key
		}
		out = append(out, pr)
		var standIn any = "0" // amounts
		switch key {
		case "model":
			standIn = "placeholder"
		case "currency":
			standIn = "USD"
		case "effective_from":
			standIn = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		case "effective_to":
			standIn = nil
		}
		if key == "" || !setYAMLField(&p, key, standIn) {
			break
		}
	}
	return out
}

// yamlField returns the field of the struct at ptr whose YAML key is key,
// or an empty slice when there is none.
func yamlField(ptr any, key string) reflect.Value {
	v := reflect.ValueOf(ptr).Elem()
	for i := range v.NumField() {
		if tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); tag == key {
			return v.Field(i)
		}
	}
	return reflect.ValueOf([]struct{}{})
}

// setYAMLField sets the field of the struct at ptr whose YAML key is key to
// val (its zero value when val is nil), and reports whether it could.
func setYAMLField(ptr any, key string, val any) bool {
	v := reflect.ValueOf(ptr).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag != key || !v.Field(i).CanSet() {
			continue
		}
		if val == nil {
			v.Field(i).SetZero()
			return true
		}
		rv := reflect.ValueOf(val)
		if !rv.Type().AssignableTo(f.Type) {
			return false
		}
		v.Field(i).Set(rv)
		return true
	}
	return false
}

// lineOf returns the line a problem names, or a line past any file's end.
func lineOf(problem string) int {
	if m := lineNumber.FindStringSubmatch(problem); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 1 << 30
}

// ancestors returns raw and the paths above it, nearest first:
// models[1].deployments[0].provider, models[1].deployments[0],
// models[1].deployments, models[1], models.
func ancestors(raw string) []string {
	var out []string
	for raw != "" {
		out = append(out, raw)
		switch i := strings.LastIndexAny(raw, ".["); {
		case i < 0:
			raw = ""
		default:
			raw = raw[:i]
		}
	}
	return out
}

// explain makes a validator's problem a sentence: the entry as the file
// names it (a nested one, models[0] ("m").deployments[1], when the file
// spells it out), the message, and the line of the setting at fault or of
// the closest thing the file has. A nested entry the file does not spell
// out (the deployment a model's provider: makes) is left out.
func (x *configIndex) explain(p checkProblem) string {
	text := strings.TrimRight(p.text, ".")
	if p.entry == "" {
		return text + x.at(p.raw) + "."
	}
	where, nested := p.entry, p.entry
	for n := nestedProblem.FindStringSubmatch(text); n != nil; n = nestedProblem.FindStringSubmatch(text) {
		nested += "." + n[1]
		if _, ok := x.lines[nested]; !ok {
			break
		}
		where, text = nested, text[len(n[0]):]
	}
	line := ""
	if _, ok := x.lines[p.raw]; !ok && where != p.raw {
		// models[1].deployments[0].provider, not in the file: the model's own provider.
		last := p.raw[strings.LastIndexByte(p.raw, '.')+1:]
		if _, ok := x.lines[where+"."+last]; ok {
			line = x.at(where + "." + last)
			if n := nestedProblem.FindString(text); n != "" {
				text = text[len(n):]
			}
		}
	}
	for _, a := range ancestors(p.raw) {
		if _, ok := x.lines[a]; ok && line == "" {
			line = x.at(a)
		}
	}
	return x.display(where) + ": " + text + line + "."
}
