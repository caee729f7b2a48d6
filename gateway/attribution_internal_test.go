package gateway

import (
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// bodyTagsSeeds are metadata fields at the edges of what bodyTags reads.
var bodyTagsSeeds = []string{
	`{"team":"search","feature":"autocomplete"}`,
	` { "a" : "x" , "b" : 1 , "c" : true , "d" : null , "e" : [1,"s",{"f":"g"}] , "h" : {"i":"j"} } `,
	`{}`, `{ }`, `null`, `[]`, `"x"`, `1`, ``, `{`, `{"a"}`, `{"a":}`, `{"a":"x",}`, `{"a":"x"} x`, `{"a":"x"}{}`,
	`{"a":"x","a":"y"}`, `{"a":"x","a":1}`, `{"a":1,"a":"x"}`, `{"a":"x","a":null}`,
	`{"\u0061":"x","a":"y"}`, `{"k\"ey":"v\\al\/ue\n\t"}`, `{"s":"\ud83d\ude00 \ud83d x \ude00"}`,
	`{"u":"héllo 日本"}`, "{\"bad\":\"\xff\"}", "{\"\xfe\":\"v\"}", "{\"a\":\"x\",\"b\":[\"\xff\"]}",
	`{"n":1e500,"a":"x"}`, `{"n":-0.0e-0,"a":"x"}`, `{"n":01,"a":"x"}`, `{"n":1.,"a":"x"}`, `{"n":.5}`, `{"n":-}`,
	`{"n":1e}`, `{"n":+1}`, `{"t":tru}`, `{"t":nul}`, "{\"c\":\"a\x01b\"}", `{"a":"\x"}`, `{"a":"\u12"}`,
	`{"deep":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `,"a":"x"}`,
	`{"deeper":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `,"a":"x"}`,
	"{\"a\":\"x\"}\t\r\n ", "\ufeff{\"a\":\"x\"}",
}

// TestBodyTagsMatchesEncodingJSON: bodyTags gives the tags encoding/json
// gives (decodeBodyTags), on the seeds and on 20,000 generated objects and
// their mutations, and the lexer reads most of them itself (else the test
// would compare encoding/json with itself).
func TestBodyTagsMatchesEncodingJSON(t *testing.T) {
	rnd := rand.New(rand.NewPCG(16, 1))
	inputs := append([]string(nil), bodyTagsSeeds...)
	for range 20_000 {
		inputs = append(inputs, mutateJSON(rnd, genObject(rnd, 0)))
	}
	scanned := 0
	for _, in := range inputs {
		checkBodyTags(t, []byte(in))
		if _, ok := scanBodyTags([]byte(in)); ok {
			scanned++
		}
	}
	if scanned < len(inputs)/4 {
		t.Fatalf("the lexer read %d of %d inputs; the comparison is mostly encoding/json with itself", scanned, len(inputs))
	}
}

// TestBodyTagsAsUnmarshal: the tags are those json.Unmarshal into a
// map[string]any gives (how they were read before the lexer), except that
// a number beyond float64 elsewhere in the object no longer drops them all.
func TestBodyTagsAsUnmarshal(t *testing.T) {
	for _, in := range bodyTagsSeeds {
		var all map[string]any
		err := json.Unmarshal([]byte(in), &all)
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && strings.HasPrefix(typeErr.Value, "number ") {
			if got := bodyTags([]byte(in)); got["a"] != "x" {
				t.Errorf("%q: tags %v, want a=x kept beside the out-of-range number", in, got)
			}
			continue
		}
		var want map[string]string
		for k, v := range all {
			if s, ok := v.(string); ok && err == nil {
				if want == nil {
					want = map[string]string{}
				}
				want[k] = s
			}
		}
		if got := bodyTags([]byte(in)); !maps.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("%q: tags %v, json.Unmarshal gives %v", in, got, want)
		}
	}
}

func FuzzBodyTags(f *testing.F) {
	for _, s := range bodyTagsSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkBodyTags(t, b) })
}

func checkBodyTags(t *testing.T, in []byte) {
	t.Helper()
	want := decodeBodyTags(in)
	got := bodyTags(in)
	if !maps.Equal(got, want) || (got == nil) != (want == nil) {
		t.Fatalf("%q: bodyTags %v, encoding/json %v", in, got, want)
	}
	if s, ok := scanBodyTags(in); ok && (!maps.Equal(s, want) || (s == nil) != (want == nil)) {
		t.Fatalf("%q: the lexer read %v, encoding/json %v", in, s, want)
	}
}

// genObject makes a random JSON object whose members are mostly strings
// (escaped, non-ASCII, repeated keys), with values of every other kind.
func genObject(rnd *rand.Rand, depth int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range rnd.IntN(6) {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(ws(rnd) + genString(rnd) + ws(rnd) + ":" + ws(rnd) + genValue(rnd, depth) + ws(rnd))
	}
	b.WriteString("}")
	return b.String()
}

func genValue(rnd *rand.Rand, depth int) string {
	switch n := rnd.IntN(10); {
	case n < 5:
		return genString(rnd)
	case n == 5 && depth < 3:
		return genObject(rnd, depth+1)
	case n == 6 && depth < 3:
		return "[" + genValue(rnd, depth+1) + "," + genString(rnd) + "]"
	case n == 7:
		return []string{"true", "false", "null"}[rnd.IntN(3)]
	default:
		return []string{"0", "-1", "3.25", "1e3", "-2.5E-7", "1e400", strconv.Itoa(rnd.Int())}[rnd.IntN(7)]
	}
}

func genString(rnd *rand.Rand) string {
	parts := []string{"a", "b", "team", `\u0061`, `\n`, `\"`, `\\`, `\/`, "é", "日本", `\ud83d\ude00`, `\ud800`, " "}
	var b strings.Builder
	b.WriteString(`"`)
	for range rnd.IntN(4) {
		b.WriteString(parts[rnd.IntN(len(parts))])
	}
	b.WriteString(`"`)
	return b.String()
}

func ws(rnd *rand.Rand) string { return []string{"", "", " ", "\n\t"}[rnd.IntN(4)] }

// mutateJSON leaves s as it is half the time, else changes one byte,
// cuts it short or inserts a byte JSON cares about.
func mutateJSON(rnd *rand.Rand, s string) string {
	if rnd.IntN(2) == 0 || s == "" {
		return s
	}
	b := []byte(s)
	i := rnd.IntN(len(b))
	special := []byte{'"', '\\', ',', ':', '{', '}', '[', ']', 0x01, 0xff, 0xc3, '1', 'e', '-', ' '}
	switch rnd.IntN(3) {
	case 0:
		b[i] = special[rnd.IntN(len(special))]
	case 1:
		b = b[:i]
	default:
		b = append(b[:i], append([]byte{special[rnd.IntN(len(special))]}, b[i:]...)...)
	}
	return string(b)
}

// BenchmarkBodyTags reads loadgen's metadata field (two members, neither a
// string) and a field of three tags, by bodyTags and by encoding/json
// (decodeBodyTags), the way it was read before.
func BenchmarkBodyTags(b *testing.B) {
	for _, c := range []struct{ name, in string }{
		{"loadgen", `{"sim_chunks":10,"sim_delay_ms":0}`},
		{"tags", `{"team":"search","feature":"autocomplete","env":"prod"}`},
	} {
		for _, f := range []struct {
			name string
			read func([]byte) map[string]string
		}{{"lexer", bodyTags}, {"encoding_json", decodeBodyTags}} {
			b.Run(c.name+"/"+f.name, func(b *testing.B) {
				in := []byte(c.in)
				b.ReportAllocs()
				for b.Loop() {
					f.read(in)
				}
			})
		}
	}
}
