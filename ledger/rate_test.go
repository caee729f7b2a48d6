package ledger

import (
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// bigRate is the reference for Rate: the documented formula in arbitrary
// precision.
func bigRate(u usage.Tokens, p Price) *big.Int {
	uncached := max(u.PromptTokens-u.CachedTokens-u.CacheWriteTokens, 0)
	reasoning, rp := int64(0), p.OutputMicros
	if p.ReasoningMicros != nil {
		reasoning, rp = min(u.ReasoningTokens, u.CompletionTokens), *p.ReasoningMicros
	}
	sum := new(big.Int)
	for _, t := range [][2]int64{{uncached, p.InputMicros}, {u.CachedTokens, p.CachedInputMicros},
		{u.CacheWriteTokens, p.CacheWriteMicros}, {u.CompletionTokens - reasoning, p.OutputMicros},
		{reasoning, rp}, {1_000_000, p.RequestFeeMicros}, {u.WebSearchRequests * 1_000_000, p.WebSearchMicros}} {
		sum.Add(sum, new(big.Int).Mul(big.NewInt(t[0]), big.NewInt(t[1])))
	}
	return sum
}

func TestRateMatchesArbitraryPrecision(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		prompt := r.Int64N(2_000_000)
		cached := r.Int64N(prompt + 1)
		write := r.Int64N(prompt - cached + 1)
		completion := r.Int64N(200_000)
		u := usage.Tokens{PromptTokens: prompt, CachedTokens: cached, CacheWriteTokens: write,
			CompletionTokens: completion, ReasoningTokens: r.Int64N(completion + 10), WebSearchRequests: r.Int64N(5)}
		p := Price{InputMicros: r.Int64N(100_000_000), CachedInputMicros: r.Int64N(10_000_000),
			CacheWriteMicros: r.Int64N(200_000_000), OutputMicros: r.Int64N(400_000_000),
			RequestFeeMicros: r.Int64N(100_000), WebSearchMicros: r.Int64N(50_000)}
		if r.IntN(2) == 0 {
			rp := r.Int64N(400_000_000)
			p.ReasoningMicros = &rp
		}
		got, err := usage.Rate(u, p)
		if err != nil {
			t.Fatalf("Rate(%+v, %+v): %v", u, p, err)
		}
		if want := bigRate(u, p); want.Cmp(big.NewInt(got)) != 0 {
			t.Fatalf("Rate(%+v, %+v) = %d, want %s", u, p, got, want)
		}
		// A discount of bp basis points charges cost × (10000−bp)/10000,
		// exactly: the decimal the ledger keeps equals the rational.
		bp := int32(r.IntN(10001))
		want := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(got), big.NewInt(int64(10000-bp))), big.NewInt(10000))
		ch := chargeOf(got, bp)
		if ch.Rat().Cmp(want) != 0 {
			t.Fatalf("chargeOf(%d, %d) = %s, want %s", got, bp, ch, want.FloatString(4))
		}
		// What the gateways show callers is what the ledger charges.
		if shown, charged := (usage.Rating{CostE12: got, DiscountBP: bp}).Charge(), ch.Shift(-12).String(); shown != charged {
			t.Fatalf("Rating.Charge() = %s, the ledger charges %s", shown, charged)
		}
	}
}

func TestRateWorkedExample(t *testing.T) {
	// 1,000 prompt tokens of which 400 cached, 200 completion, at $2.50 input,
	// $1.25 cached, $10 output per million tokens:
	// 600×2.5e-6 + 400×1.25e-6 + 200×1e-5 = 0.0015 + 0.0005 + 0.002 = $0.004.
	p := Price{InputMicros: 2_500_000, CachedInputMicros: 1_250_000, CacheWriteMicros: 2_500_000, OutputMicros: 10_000_000}
	got, err := usage.Rate(usage.Tokens{PromptTokens: 1000, CachedTokens: 400, CompletionTokens: 200}, p)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := FormatE12(big.NewInt(got).String()); s != "0.004" {
		t.Fatalf("cost = %s (%d e-12), want 0.004", s, got)
	}
}

func TestRateOverflowIsAnError(t *testing.T) {
	p := Price{OutputMicros: 1 << 40}
	if _, err := usage.Rate(usage.Tokens{CompletionTokens: 1 << 30}, p); err == nil {
		t.Fatal("Rate accepted a cost beyond int64")
	}
}

func TestParseMicros(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "2.50": 2_500_000, "0.000001": 1, "15": 15_000_000, " 3.2 ": 3_200_000} {
		got, err := ParseMicros("input", in)
		if err != nil || got != want {
			t.Errorf("ParseMicros(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	// Exponent notation is refused, not read: "1e6" would be a million.
	for _, in := range []string{"", "abc", "-1", "0.0000001", "1e30", "NaN", "1e2", "1E2", "2.5e-1", "1e-6"} {
		if _, err := ParseMicros("input", in); ErrorCode(err) != EInvalid {
			t.Errorf("ParseMicros(%q) error = %v, want EInvalid", in, err)
		}
	}
	// The message writes out the number given, not one example for all.
	for in, out := range map[string]string{"1e3": `"1000"`, "2.5e-1": `"0.25"`, "1e-3": `"0.001"`} {
		if _, err := ParseMicros("input", in); err == nil || !strings.Contains(err.Error(), "write the number out ("+out+")") {
			t.Errorf("ParseMicros(%q): %v, want it to suggest %s", in, err, out)
		}
	}
}

func BenchmarkRate(b *testing.B) {
	u := usage.Tokens{PromptTokens: 1234, CachedTokens: 512, CompletionTokens: 321, ReasoningTokens: 100}
	p := Price{InputMicros: 2_500_000, CachedInputMicros: 1_250_000, CacheWriteMicros: 3_000_000, OutputMicros: 10_000_000}
	for b.Loop() {
		if _, err := usage.Rate(u, p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRateBigInt(b *testing.B) {
	u := usage.Tokens{PromptTokens: 1234, CachedTokens: 512, CompletionTokens: 321, ReasoningTokens: 100}
	p := Price{InputMicros: 2_500_000, CachedInputMicros: 1_250_000, CacheWriteMicros: 3_000_000, OutputMicros: 10_000_000}
	for b.Loop() {
		_ = bigRate(u, p)
	}
}
