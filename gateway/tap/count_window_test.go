package tap

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestCountInPiecesIsTheWholeCount: Count cuts a long text into pieces
// where the pre-tokenizer cuts anyway, so its count is the tokenizer's
// count of the whole text: compared with the library's on texts of
// words, numbers, punctuation, code and runs of spaces and newlines.
func TestCountInPiecesIsTheWholeCount(t *testing.T) {
	e, err := NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"the", "Billing", "ledger's", "tokens", "1234567", "3.14", "—", "naïve", "über", "x", "don't",
		"{\"a\":", "[1,", "2]", "func", "()", "\t", "\n", "\n\n", "  ", "   ", ",", ".", "!?", "émigré", "日本語", "😀", "a\u00a0b"}
	for trial := range 6 {
		var b strings.Builder
		for b.Len() < 5*countWindow+rng.IntN(countWindow) {
			b.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(5) > 0 {
				b.WriteByte(' ')
			}
		}
		s := b.String()
		want, err := e.codec.Count(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Count(s); got != int64(want) {
			t.Errorf("text %d (%d bytes): Count %d, the tokenizer on the whole %d", trial, len(s), got, want)
		}
	}
}

// TestCountWithoutSpacesIsClose: a text with no spaces to cut at (Chinese)
// is cut at characters: its count stays within a token a piece of the
// whole's, and every piece is valid UTF-8.
func TestCountWithoutSpacesIsClose(t *testing.T) {
	e, err := NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Repeat("计量每一个令牌进入账本", 3*countWindow/30)
	want, _ := e.codec.Count(s)
	got := e.Count(s)
	pieces := int64(len(s)/countWindow + 1)
	if d := got - int64(want); d < -pieces || d > pieces {
		t.Errorf("Count %d, the whole's %d: more than a token a piece (%d pieces) apart", got, want, pieces)
	}
	for rest := s; len(rest) > countWindow; {
		cut := cutNear(rest, countWindow)
		if !utf8.ValidString(rest[:cut]) {
			t.Fatalf("a piece cut inside a character at %d", cut)
		}
		rest = rest[cut:]
	}
}

// TestCountOfALongTextIsBoundedInMemory: counting 16 MiB of text at once
// allocated 810 MB in the tokenizer; in pieces, Count's memory does not
// grow with the text (a long output's estimate at a stream's end ran the
// gateway's heap up by hundreds of MB).
func TestCountOfALongTextIsBoundedInMemory(t *testing.T) {
	e, err := NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Repeat("lorem ipsum ", 16<<20/12)
	var peak uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	go func() {
		defer close(done)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond): // ReadMemStats stops the world: not in a tight loop
			}
		}
	}()
	n := e.Count(s)
	close(stop)
	<-done
	if n < int64(len(s)/8) {
		t.Fatalf("counted %d tokens in %d bytes", n, len(s))
	}
	grew := int64(peak) - int64(base.HeapInuse)
	if grew > 64<<20 {
		t.Errorf("counting %d MB grew the heap by %d MB", len(s)>>20, grew>>20)
	}
	t.Logf("counting %d MB grew the heap by %d MB", len(s)>>20, grew>>20)
}

// BenchmarkCountLongText compares Count, in pieces, with the tokenizer on
// the whole text (the baseline), on 1 MiB of prose: time and memory.
func BenchmarkCountLongText(b *testing.B) {
	e, err := NewEstimator()
	if err != nil {
		b.Fatal(err)
	}
	s := strings.Repeat("The ledger records every token, exactly once; 42 customers paid. ", 1<<20/66)
	b.Run("pieces", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		b.ReportAllocs()
		for b.Loop() {
			e.Count(s)
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		b.ReportAllocs()
		for b.Loop() {
			_, _ = e.codec.Count(s)
		}
	})
}
