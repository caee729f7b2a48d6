package keys

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestTableRoundTrip: every field of a key's state comes back from the
// pointer-free table as it went in, rows of deleted keys are reused, and
// a revoked key stays a tombstone that an older state cannot replace.
func TestTableRoundTrip(t *testing.T) {
	c := NewCache(nil, nil, slog.New(slog.DiscardHandler))
	exp, until := time.Unix(1_900_000_000, 123), time.Now().Add(time.Hour).Round(0)
	states := []usage.KeyState{
		{KeyID: uuid.NewString(), CustomerID: "c1", Version: 1},
		{KeyID: uuid.NewString(), CustomerID: "c1", RPMLimit: 60, TPMLimit: 100_000, MaxConcurrent: 3, ExpiresAt: &exp,
			AllowedModels: []string{"gpt-4o", "anthropic/*"}, Version: 7},
		{KeyID: uuid.NewString(), CustomerID: "c2", Blocked: "rate_limited", BlockedUntil: &until, AllowedModels: []string{"gpt-4o", "anthropic/*"}, Version: 2},
		{KeyID: uuid.NewString(), CustomerID: "c3", AllowedModels: []string{"gpt-4o"}, Version: 3},
		{KeyID: uuid.NewString(), CustomerID: "c3", SpendLimited: true, Currency: "EUR", Version: 4},
		{KeyID: uuid.NewString(), CustomerID: "c4", SpendLimited: true, Currency: "USD", DailyLimitMicros: new(int64(2_500_000)),
			DaySpentMicros: 1234, MonthSpentMicros: 2234, Version: 5},
		{KeyID: uuid.NewString(), CustomerID: "c4", SpendLimited: true, Currency: "USD", MonthlyLimitMicros: new(int64(0)), Version: 6},
	}
	for i, s := range states {
		c.setKey(sha256.Sum256([]byte(strconv.Itoa(i))), s)
	}
	for i, want := range states {
		got, ok := c.LookupKey(strconv.Itoa(i))
		if !ok {
			t.Fatalf("key %d: not found", i)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("key %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
	if n := len(c.keys.lists.vals); n != 3 { // nil, and two distinct lists
		t.Errorf("interned model lists: %d, want 3", n)
	}
	// A customer's credit limit makes each of its keys' spend limited.
	c.setCustomer("c1", usage.CustomerState{Currency: "USD", CreditLimited: true, Version: 1}, true)
	if got, _ := c.LookupKey("0"); !got.SpendLimited {
		t.Error("a key of a customer with a credit limit is not SpendLimited")
	}
	if got, _ := c.LookupKey("2"); got.SpendLimited {
		t.Error("another customer's credit limit made a key SpendLimited")
	}
	// What it may still spend, for the gateway's spend holds, with the
	// version it counts from; not for a customer without a credit limit.
	c.setCustomer("c4", usage.CustomerState{Currency: "USD", CreditLimited: true, CreditLeftMicros: new(int64(-5)), Version: 9}, true)
	if got, _ := c.LookupKey("5"); got.CreditLeftMicros == nil || *got.CreditLeftMicros != -5 || got.CustomerVersion != 9 ||
		*got.DailyLimitMicros != 2_500_000 {
		t.Errorf("a key of a customer with credit left: %+v", got)
	}
	c.setCustomer("c3", usage.CustomerState{Currency: "EUR", CreditLeftMicros: new(int64(7)), Version: 9}, true)
	if got, _ := c.LookupKey("4"); got.CreditLeftMicros != nil {
		t.Errorf("a customer without a credit limit has credit left: %+v", got)
	}
	// A state without limits forgets those of the one before.
	h5 := sha256.Sum256([]byte("5"))
	c.setKey(h5, usage.KeyState{KeyID: states[5].KeyID, CustomerID: "c4", Currency: "USD", Version: 10})
	if got, _ := c.LookupKey("5"); got.DailyLimitMicros != nil || got.DaySpentMicros != 0 || len(c.keys.spend) != 1 {
		t.Errorf("limits lifted: %+v, %d keys' spend held; want none, 1", got, len(c.keys.spend))
	}

	h0 := sha256.Sum256([]byte("0"))
	c.setKey(h0, usage.KeyState{Revoked: true, Version: 5})
	c.setKey(h0, usage.KeyState{KeyID: states[0].KeyID, CustomerID: "c1", Version: 4}) // a stale lookup
	if _, ok := c.LookupKey("0"); ok {
		t.Error("a revoked key came back with an older state")
	}
	c.mu.Lock()
	c.keys.delete(h0)
	c.mu.Unlock()
	c.setKey(sha256.Sum256([]byte("new")), usage.KeyState{KeyID: uuid.NewString(), CustomerID: "c4", Version: 1})
	if len(c.keys.rows) != len(states) || c.Len() != len(states) {
		t.Errorf("rows %d, keys %d after a delete and an insert: want %d (the row reused)", len(c.keys.rows), c.Len(), len(states))
	}
}

// BenchmarkGCWithKeys measures what holding n keys costs the garbage
// collector while the gateway serves requests: each operation allocates
// what a small request does (a 16 KiB buffer and a few small objects),
// and gc-ns/op is the GC's CPU time (runtime/metrics
// /cpu/classes/gc/total:cpu-seconds) per operation. Steady-state CPU
// must not depend on the number of keys: compare keys=10000 with
// keys=1000000.
func BenchmarkGCWithKeys(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			c := NewCache(nil, nil, slog.New(slog.DiscardHandler))
			models := []string{"gpt-4o", "gpt-4o-mini"}
			for i := range n {
				s := usage.KeyState{KeyID: uuid.NewString(), CustomerID: "customer-" + strconv.Itoa(i/100), RPMLimit: 600,
					TPMLimit: 1_000_000, Version: int64(i + 1)}
				if i%10 == 0 {
					s.AllowedModels = models
				}
				c.setKey(sha256.Sum256([]byte(strconv.Itoa(i))), s)
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			sample := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
			metrics.Read(sample)
			before := sample[0].Value.Float64()
			b.ResetTimer()
			for i := range b.N {
				buf := make([]byte, 16<<10)
				buf[i%len(buf)] = 1
				sink = append(sink[:0], buf, []byte(strconv.Itoa(i)), make([]byte, 256))
				if _, ok := c.LookupKey(strconv.Itoa(i % n)); !ok {
					b.Fatal("key not found")
				}
			}
			b.StopTimer()
			runtime.GC() // the cycle the run's garbage owes, so that short runs are not flattered
			metrics.Read(sample)
			b.ReportMetric((sample[0].Value.Float64()-before)*1e9/float64(b.N), "gc-ns/op")
			b.ReportMetric(float64(ms.HeapAlloc)/float64(n), "heap-B/key") // held after a GC, over n
			runtime.KeepAlive(c)
		})
	}
}

var sink [][]byte

// TestCustomerBlockOutlastsTheKeysReset: a key over its daily spend limit
// (blocked until the next UTC day) whose customer's balance and credit
// are spent too is refused for the customer's block, which no reset
// lifts: its state names no reset time, so that the 402 tells no client
// to come back at midnight only to be refused again. A key frozen by a
// limit of 0 (no reset either) keeps its own reason; a customer with no
// block leaves the key's as it is.
func TestCustomerBlockOutlastsTheKeysReset(t *testing.T) {
	c := NewCache(nil, nil, slog.New(slog.DiscardHandler))
	midnight := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	daily := usage.KeyState{KeyID: uuid.NewString(), CustomerID: "c1", Blocked: "daily limit reached",
		BlockedUntil: &midnight, SpendLimited: true, Version: 1}
	frozen := usage.KeyState{KeyID: uuid.NewString(), CustomerID: "c1", Blocked: "daily limit is 0", SpendLimited: true, Version: 1}
	other := usage.KeyState{KeyID: uuid.NewString(), CustomerID: "c2", Blocked: "daily limit reached",
		BlockedUntil: &midnight, SpendLimited: true, Version: 1}
	c.setKey(sha256.Sum256([]byte("daily")), daily)
	c.setKey(sha256.Sum256([]byte("frozen")), frozen)
	c.setKey(sha256.Sum256([]byte("other")), other)
	c.setCustomer("c1", usage.CustomerState{Blocked: "balance and credit spent", Currency: "USD", CreditLimited: true, Version: 1}, true)
	if got, _ := c.LookupKey("daily"); got.Blocked != "balance and credit spent" || got.BlockedUntil != nil {
		t.Errorf("daily limit reached, customer blocked too: Blocked %q until %v; want the customer's block, with no reset time",
			got.Blocked, got.BlockedUntil)
	}
	if got, _ := c.LookupKey("frozen"); got.Blocked != "daily limit is 0" || got.BlockedUntil != nil {
		t.Errorf("key frozen, customer blocked too: Blocked %q until %v; want the key's own block", got.Blocked, got.BlockedUntil)
	}
	if got, _ := c.LookupKey("other"); got.Blocked != "daily limit reached" || got.BlockedUntil == nil || !got.BlockedUntil.Equal(midnight) {
		t.Errorf("daily limit reached, customer not blocked: Blocked %q until %v; want the key's block until %s",
			got.Blocked, got.BlockedUntil, midnight)
	}
}

// TestWatchStatesSeesNewerStates: a watcher is told of each newer key and
// customer state as it is applied, with its id and version, and of no
// older one (the gateway's spend holds count charges from it).
func TestWatchStatesSeesNewerStates(t *testing.T) {
	c := NewCache(nil, nil, slog.New(slog.DiscardHandler))
	var seen []string
	c.WatchStates(func(id string, v int64) { seen = append(seen, fmt.Sprintf("key %s %d", id, v)) },
		func(id string, v int64) { seen = append(seen, fmt.Sprintf("customer %s %d", id, v)) })
	h := sha256.Sum256([]byte("w"))
	c.setKey(h, usage.KeyState{KeyID: "k1", CustomerID: "c1", Version: 2})
	c.setKey(h, usage.KeyState{KeyID: "k1", CustomerID: "c1", Version: 1}) // older: not applied
	c.setKey(h, usage.KeyState{KeyID: "k1", CustomerID: "c1", Version: 3})
	c.setCustomer("c1", usage.CustomerState{Version: 5}, true)
	c.setCustomer("c1", usage.CustomerState{Version: 4}, true)
	if want := []string{"key k1 2", "key k1 3", "customer c1 5"}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("watched %v; want %v", seen, want)
	}
}

// TestReplacedModelListsAreForgotten: a key's allowed_models list that a
// newer state replaced, or that its key's revocation left unused, is not
// held for the life of the process. Every distinct list was interned for
// ever ("few distinct lists"), so an operator who edits allowlists (a
// fine-tune added to a key's list each time one ships) or issues and
// revokes keys with lists of their own grew every gateway's memory with
// each edit: 10,000 edits of one key held 10,001 lists.
func TestReplacedModelListsAreForgotten(t *testing.T) {
	const edits = 10_000
	c := NewCache(nil, nil, slog.New(slog.DiscardHandler))
	id := uuid.NewString()
	h := sha256.Sum256([]byte("edited"))
	for i := range edits {
		c.setKey(h, usage.KeyState{KeyID: id, CustomerID: "c1", AllowedModels: []string{"gpt-4o", fmt.Sprintf("ft:gpt-4o:acme:%d", i)},
			Version: int64(i + 1)})
	}
	// Keys issued with lists of their own, then revoked.
	for i := range edits {
		k := sha256.Sum256([]byte("revoked" + strconv.Itoa(i)))
		c.setKey(k, usage.KeyState{KeyID: uuid.NewString(), CustomerID: "c2", AllowedModels: []string{fmt.Sprintf("ft:mini:%d", i)}, Version: 1})
		c.setKey(k, usage.KeyState{Revoked: true, Version: 2})
	}
	got, ok := c.LookupKey("edited")
	if want := []string{"gpt-4o", fmt.Sprintf("ft:gpt-4o:acme:%d", edits-1)}; !ok || !reflect.DeepEqual(got.AllowedModels, want) {
		t.Fatalf("the edited key's list: %v (found %v), want %v", got.AllowedModels, ok, want)
	}
	if n := len(c.keys.lists.nums); n > 1 {
		t.Errorf("model lists held after %d edits of one key and %d revoked keys: %d, want 1 (the live one)", edits, edits, n)
	}
	if n := len(c.keys.lists.vals); n > 3 {
		t.Errorf("model list slots: %d, want at most 3 (nil, the live list, one freed and reused)", n)
	}
}
