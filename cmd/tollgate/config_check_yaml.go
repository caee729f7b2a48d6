package main

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// configIndex locates a configuration file's settings: for each line, the
// keys and values on it with their paths, so that the decoder's and the
// validators' errors can name the setting an operator wrote.
type configIndex struct {
	keys, values map[int][]configNode
	// lines maps a raw path ("providers[0]", "providers[0].base_url") to
	// the line of its key, or of its entry for a list entry.
	lines map[string]int
	// names maps a list entry's raw path to its name ("sim"), or "".
	names map[string]string
	// times are the scalar values of the time settings (effective_from,
	// effective_to), in the file's order (see badTimes).
	times []timeSetting
}

// timeSetting is a time setting's value node, its raw path
// ("prices[0].effective_from") and its entry's ("prices[0]").
type timeSetting struct {
	raw, entry, key string
	node            *yaml.Node
}

// configNode is one key or value of the file.
type configNode struct {
	raw   string // providers[0].base_url
	value string // the scalar as written
	kind  yaml.Kind
	tag   string // the resolved tag, "!!int" or "!!str"
}

func newConfigIndex(root *yaml.Node) *configIndex {
	x := &configIndex{keys: map[int][]configNode{}, values: map[int][]configNode{}, lines: map[string]int{}, names: map[string]string{}}
	x.walk(root, "")
	return x
}

func (x *configIndex) walk(n *yaml.Node, raw string) {
	if n == nil {
		return
	}
	if n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode {
		for _, c := range n.Content {
			x.walk(c, raw)
		}
		return
	}
	x.values[n.Line] = append(x.values[n.Line], configNode{raw: raw, value: n.Value, kind: n.Kind, tag: n.ShortTag()})
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if raw != "" {
				p = raw + "." + k.Value
			}
			x.keys[k.Line] = append(x.keys[k.Line], configNode{raw: p, value: k.Value, kind: k.Kind})
			x.lines[p] = k.Line
			if (k.Value == "effective_from" || k.Value == "effective_to") && v.Kind == yaml.ScalarNode {
				x.times = append(x.times, timeSetting{raw: p, entry: raw, key: k.Value, node: v})
			}
			x.walk(v, p)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", raw, i)
			x.lines[p] = c.Line
			if c.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(c.Content); j += 2 {
					if k := c.Content[j].Value; (k == "name" || k == "model") && x.names[p] == "" {
						x.names[p] = c.Content[j+1].Value
					}
				}
			}
			x.walk(c, p)
		}
	}
}

var rawStep = regexp.MustCompile(`^([^.\[]+)((?:\[\d+\])*)\.?`)

// display turns a raw path into what an operator reads: each named list
// entry with its name, `models[1] ("gpt-x").provider`.
func (x *configIndex) display(raw string) string {
	if raw == "" {
		return "the file"
	}
	var b strings.Builder
	done := ""
	for rest := raw; rest != ""; {
		m := rawStep.FindStringSubmatch(rest)
		if m == nil {
			b.WriteString(rest)
			break
		}
		if b.Len() > 0 {
			b.WriteString(".")
		}
		done += m[1]
		b.WriteString(m[1])
		for _, idx := range regexp.MustCompile(`\[\d+\]`).FindAllString(m[2], -1) {
			done += idx
			b.WriteString(idx)
			if name := x.names[done]; name != "" {
				fmt.Fprintf(&b, " (%q)", name)
			}
		}
		rest = rest[len(m[0]):]
		if rest != "" {
			done += "."
		}
	}
	return b.String()
}

// at returns " (line N)" for a raw path, or "".
func (x *configIndex) at(raw string) string {
	if l, ok := x.lines[raw]; ok {
		return fmt.Sprintf(" (line %d)", l)
	}
	return ""
}

var (
	yamlUnknown  = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (\S+)$`)
	yamlMismatch = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+)(?: `(.*)`)? into (\\S+)$")
	yamlLine     = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
)

// yamlProblems explains the decoder's errors (yaml.TypeError's lines), and
// returns the raw paths they are about.
func (x *configIndex) yamlProblems(msgs []string) (problems []string, paths map[string]bool) {
	paths = map[string]bool{}
	for _, msg := range msgs {
		if m := yamlUnknown.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			raw := x.find(x.keys[line], func(n configNode) bool { return n.value == m[2] })
			paths[raw] = true
			where := ""
			if parent, ok := strings.CutSuffix(raw, "."+m[2]); ok {
				where = x.display(parent)
			}
			problems = append(problems, unknownSetting(where, m[2], m[3], line))
			continue
		}
		if m := yamlMismatch.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			if m[2] == "int" && m[3] == "0" && m[4] == "time.Duration" {
				// A duration written 0, without a unit: the decoder
				// left it at 0, its default, as the docs say.
				continue
			}
			shown, cut := strings.CutSuffix(m[3], "...")
			// The value the decoder quotes, of its tag: on a line
			// holding several (a one-line mapping), the one it means.
			raw := x.find(x.values[line], func(n configNode) bool {
				switch m[2] {
				case "seq":
					return n.kind == yaml.SequenceNode
				case "map":
					return n.kind == yaml.MappingNode
				}
				return n.kind == yaml.ScalarNode && n.tag == "!!"+m[2] &&
					(n.value == shown || cut && strings.HasPrefix(n.value, shown))
			})
			value := m[3]
			for _, n := range x.values[line] {
				if n.raw == raw {
					value = n.value
				}
			}
			paths[raw] = true
			problems = append(problems, fmt.Sprintf("%s: %s (line %d).", x.display(raw), wrongType(m[2], value, m[4]), line))
			continue
		}
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			problems = append(problems, fmt.Sprintf("line %s: %s.", m[1], m[2]))
			continue
		}
		problems = append(problems, strings.TrimPrefix(msg, "yaml: ")+".")
	}
	return problems, paths
}

// find returns the raw path of the first node that matches, or of the
// first node when none does.
func (x *configIndex) find(ns []configNode, match func(configNode) bool) string {
	for _, n := range ns {
		if match(n) {
			return n.raw
		}
	}
	if len(ns) > 0 {
		return ns[0].raw
	}
	return ""
}

// wrongType says, in an operator's words, why value (of YAML kind tag) is
// not what the Go type goType takes.
func wrongType(tag, value, goType string) string {
	what := fmt.Sprintf("%q", value)
	switch tag {
	case "seq":
		what = "a list"
	case "map":
		what = "a mapping (name: value lines)"
	}
	switch {
	case goType == "time.Duration":
		return what + ` is not a duration; write e.g. "30s", "500ms" or "5m"`
	case goType == "time.Time":
		return what + " is not a time; write e.g. 2026-01-01T00:00:00Z"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return what + " is not a whole number; write e.g. 2000"
	case strings.HasPrefix(goType, "float"):
		return what + " is not a number"
	case goType == "bool":
		return what + " is neither true nor false"
	case goType == "string":
		return what + " is not a single value; write one word or a quoted string"
	case strings.HasPrefix(goType, "[]"):
		return what + ` is not a list; write each entry on its own line starting with "- "`
	}
	return what + " is not a mapping of settings; write them as name: value lines, indented under it"
}

// unknownSetting explains a key the config does not have, where is its
// parent's path as displayed (or "" at the top level); it suggests the
// setting the key was probably meant to be.
func unknownSetting(where, key, goType string, line int) string {
	msg := fmt.Sprintf("%q is not a top-level setting", key)
	if where != "" {
		msg = fmt.Sprintf("%s: %q is not a setting here", where, key)
	}
	known := yamlKeysOf(goType)
	best, bestD := "", max(1, len(key)/3)+1
	for _, k := range known {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	switch {
	case best != "":
		msg += fmt.Sprintf("; did you mean %q?", best)
	case len(known) > 0:
		msg += "; the settings here are " + strings.Join(known, ", ")
	}
	return fmt.Sprintf("%s (line %d; docs/configuration.md describes every setting).", msg, line)
}

// yamlKeysOf returns the YAML keys of the config's struct type named
// goType ("gateway.ProviderConfig"), inline fields' included.
func yamlKeysOf(goType string) []string {
	t := findConfigType(reflect.TypeFor[fileConfig](), goType, map[reflect.Type]bool{})
	if t == nil {
		return nil
	}
	var keys []string
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for f := range t.Fields() {
			tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch {
			case !f.IsExported() || tag == "-":
			case opts == "inline" || (f.Anonymous && tag == ""):
				add(f.Type)
			case tag != "":
				keys = append(keys, tag)
			default:
				keys = append(keys, strings.ToLower(f.Name))
			}
		}
	}
	add(t)
	slices.Sort(keys)
	return keys
}

func findConfigType(t reflect.Type, name string, seen map[reflect.Type]bool) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || t == reflect.TypeFor[time.Time]() {
		return nil
	}
	seen[t] = true
	if t.String() == name {
		return t
	}
	for f := range t.Fields() {
		if found := findConfigType(f.Type, name, seen); found != nil {
			return found
		}
	}
	return nil
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// badTimes finds the time settings of a file (effective_from,
// effective_to) whose value is no time, which stop the decoder outright:
// it reports the first alone, with no line ("parsing time ..."). It
// returns a problem for each, naming its setting and line; the raw paths
// of their entries; and b with each such value replaced by null on its
// own line, so that the rest decodes and every line keeps its number. A
// value it cannot replace so (an anchor, a tag, a block or multi-line
// scalar) makes it return nil for b: the caller reports the bad times
// alone.
func badTimes(b []byte, x *configIndex) ([]byte, []string, map[string]bool) {
	var problems []string
	bad := map[string]bool{}
	lines := bytes.SplitAfter(b, []byte("\n"))
	type span struct{ line, start, end int }
	var blank []span
	safe := true
	for _, ts := range x.times {
		v := ts.node
		var t time.Time
		if v.Tag == "!!null" || v.Decode(&t) == nil {
			continue
		}
		problems = append(problems, fmt.Sprintf("%s.%s: %q is not a time: write one like 2026-01-01T00:00:00Z (RFC 3339, with its zone)%s.",
			x.display(ts.entry), ts.key, v.Value, x.at(ts.raw)))
		bad[ts.entry], bad[ts.raw] = true, true
		if v.Line < 1 || v.Line > len(lines) {
			safe = false
			continue
		}
		start, end, ok := scalarSpan(lines[v.Line-1], v)
		safe = safe && ok
		blank = append(blank, span{v.Line - 1, start, end})
	}
	switch {
	case len(problems) == 0:
		return b, nil, bad
	case !safe:
		return nil, problems, bad
	}
	// Right to left, so that a replacement leaves the offsets of the
	// others on its line (a flow mapping) as they were.
	slices.SortFunc(blank, func(a, b span) int { return b.start - a.start })
	for _, sp := range blank {
		l := lines[sp.line]
		lines[sp.line] = append(append(append([]byte{}, l[:sp.start]...), "null"...), l[sp.end:]...)
	}
	return bytes.Join(lines, nil), problems, bad
}

// scalarSpan returns where on its line the one-line scalar v is written
// (bytes start to end), and false when it cannot tell for sure: v has an
// anchor or a tag, is a block scalar, spans lines, or what is written
// there does not read back as v's value.
func scalarSpan(line []byte, v *yaml.Node) (start, end int, ok bool) {
	if v.Anchor != "" || v.Style&(yaml.TaggedStyle|yaml.LiteralStyle|yaml.FoldedStyle|yaml.FlowStyle) != 0 {
		return 0, 0, false
	}
	start = -1
	col := v.Column - 1 // Column counts characters
	for i := range string(line) {
		if col == 0 {
			start = i
			break
		}
		col--
	}
	if start < 0 {
		return 0, 0, false
	}
	switch {
	case v.Style&yaml.DoubleQuotedStyle != 0:
		for i := start + 1; i < len(line) && end == 0; i++ {
			switch line[i] {
			case '\\':
				i++
			case '"':
				end = i + 1
			}
		}
	case v.Style&yaml.SingleQuotedStyle != 0:
		for i := start + 1; i < len(line) && end == 0; i++ {
			if line[i] == '\'' {
				if i+1 < len(line) && line[i+1] == '\'' {
					i++
					continue
				}
				end = i + 1
			}
		}
	default:
		end = start + len(v.Value)
	}
	if end <= start || end > len(line) {
		return 0, 0, false
	}
	var got string
	if yaml.Unmarshal(line[start:end], &got) != nil || got != v.Value {
		return 0, 0, false
	}
	return start, end, true
}
