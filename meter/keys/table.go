package keys

import (
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// table holds every key a gateway knows, a million of them or more, in
// memory the garbage collector never walks: the index maps a key's hash
// to its row, and neither the index nor the rows hold a pointer (a
// row names its customer, its blocked reason and its model allowlist by
// number). A table of pointers to one small object per key made every
// collection mark a million objects, so that the gateway's CPU at a steady
// request rate grew with the number of keys (BENCHMARKS.md, issue 13).
// It is not safe for concurrent use: Cache guards it.
type table struct {
	index map[[32]byte]uint32 // key hash → position in rows
	rows  []row
	free  []uint32 // positions of deleted rows, to reuse

	// spend holds the spend limits and spend of the keys that have any,
	// beside their rows: few keys have them, and a million rows stay as
	// small as they were.
	spend map[[32]byte]spendRow

	customers   []*customer // by number; a few per thousand keys
	customerNum map[string]uint32
	strs        interned[string]   // blocked reasons and currencies; 0 is ""
	lists       interned[[]string] // allowed-model lists; 0 is nil (every model)
}

// row is one key: usage.KeyState without its strings, times in Unix
// nanoseconds (0: none), or a revoked key's tombstone.
type row struct {
	keyID        [16]byte
	expires      int64
	blockedUntil int64
	rpm, tpm     int64
	conc         int64
	version      int64
	customer     uint32 // index in table.customers
	blocked      uint32 // index in table.strs
	currency     uint32 // index in table.strs
	models       uint32 // index in table.lists
	spendLimited bool   // a daily or monthly spend limit
	revoked      bool   // a tombstone: only version is set
}

// spendRow is a key's spend limits and spend, as usage.KeyState has them
// (noLimit: none).
type spendRow struct {
	daily, monthly       int64
	daySpent, monthSpent int64
}

// noLimit marks a spend limit a key does not have in a spendRow.
const noLimit = -1

// interned numbers distinct values, so that rows can name them without a
// pointer; number 0 is the zero value. Each number counts the rows that
// name it (number adds one, release takes one away), and a value no row
// names is forgotten, its number reused: a model allowlist replaced by a
// newer state, or left by its key's revocation, was held for the life of
// the process, 190 bytes an edit in every gateway.
type interned[T any] struct {
	vals []T
	nums map[string]uint32
	keys []string // by number: the key of vals[n]
	refs []int    // by number: the rows that name it
	free []uint32 // numbers of forgotten values, to reuse
}

// number returns the number of v, whose key is key, counting one more row
// that names it: the row must release it when it no longer does.
func (in *interned[T]) number(key string, v T) uint32 {
	if key == "" {
		return 0
	}
	if n, ok := in.nums[key]; ok {
		in.refs[n]++
		return n
	}
	if in.nums == nil {
		var zero T
		in.vals, in.keys, in.refs, in.nums = []T{zero}, []string{""}, []int{0}, map[string]uint32{}
	}
	var n uint32
	if f := len(in.free); f > 0 {
		n, in.free = in.free[f-1], in.free[:f-1]
		in.vals[n], in.keys[n], in.refs[n] = v, key, 1
	} else {
		n = uint32(len(in.vals))
		in.vals, in.keys, in.refs = append(in.vals, v), append(in.keys, key), append(in.refs, 1)
	}
	in.nums[key] = n
	return n
}

// release counts one row fewer naming n, and forgets its value when none
// does.
func (in *interned[T]) release(n uint32) {
	if n == 0 {
		return
	}
	if in.refs[n]--; in.refs[n] > 0 {
		return
	}
	var zero T
	delete(in.nums, in.keys[n])
	in.vals[n], in.keys[n] = zero, ""
	in.free = append(in.free, n)
}

func (in *interned[T]) value(n uint32) T {
	if n == 0 {
		var zero T
		return zero
	}
	return in.vals[n]
}

func newTable() *table {
	return &table{index: map[[32]byte]uint32{}, customerNum: map[string]uint32{}, spend: map[[32]byte]spendRow{}}
}

// len is the number of keys held, revoked keys' tombstones included.
func (t *table) len() int { return len(t.index) }

// get returns the row of hash, or nil.
func (t *table) get(h [32]byte) *row {
	i, ok := t.index[h]
	if !ok {
		return nil
	}
	return &t.rows[i]
}

// set stores r as the row of hash.
func (t *table) set(h [32]byte, r row) {
	if i, ok := t.index[h]; ok {
		t.release(&t.rows[i])
		t.rows[i] = r
		return
	}
	var i uint32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
		t.rows[i] = r
	} else {
		i = uint32(len(t.rows))
		t.rows = append(t.rows, r)
	}
	t.index[h] = i
}

// setSpend stores the spend limits and spend of s, a state of the key of
// hash, or forgets them when it has none.
func (t *table) setSpend(h [32]byte, s *usage.KeyState) {
	if s.Revoked || s.DailyLimitMicros == nil && s.MonthlyLimitMicros == nil {
		delete(t.spend, h)
		return
	}
	sp := spendRow{daily: noLimit, monthly: noLimit, daySpent: s.DaySpentMicros, monthSpent: s.MonthSpentMicros}
	if s.DailyLimitMicros != nil {
		sp.daily = *s.DailyLimitMicros
	}
	if s.MonthlyLimitMicros != nil {
		sp.monthly = *s.MonthlyLimitMicros
	}
	t.spend[h] = sp
}

// delete forgets hash.
func (t *table) delete(h [32]byte) {
	delete(t.spend, h)
	if i, ok := t.index[h]; ok {
		delete(t.index, h)
		t.release(&t.rows[i])
		t.rows[i] = row{}
		t.free = append(t.free, i)
	}
}

// customer returns the number of the customer id, its record made when new.
func (t *table) customer(id string) uint32 {
	if n, ok := t.customerNum[id]; ok {
		return n
	}
	n := uint32(len(t.customers))
	t.customers = append(t.customers, &customer{id: id})
	t.customerNum[id] = n
	return n
}

// release lets go of the interned values r names, before r is replaced
// or deleted.
func (t *table) release(r *row) {
	t.strs.release(r.blocked)
	t.strs.release(r.currency)
	t.lists.release(r.models)
}

// row returns s as a row, naming its interned values: set it (set
// releases them when the row is replaced or deleted).
func (t *table) row(s usage.KeyState) row {
	if s.Revoked {
		return row{revoked: true, version: s.Version}
	}
	id, _ := uuid.Parse(s.KeyID)
	r := row{keyID: id, customer: t.customer(s.CustomerID), rpm: s.RPMLimit, tpm: s.TPMLimit, conc: s.MaxConcurrent,
		blocked: t.strs.number(s.Blocked, s.Blocked), version: s.Version, spendLimited: s.SpendLimited,
		currency: t.strs.number(s.Currency, s.Currency)}
	if len(s.AllowedModels) > 0 {
		r.models = t.lists.number(strings.Join(s.AllowedModels, "\x00")+"\x00", s.AllowedModels)
	}
	if s.ExpiresAt != nil {
		r.expires = s.ExpiresAt.UnixNano()
	}
	if s.BlockedUntil != nil {
		r.blockedUntil = s.BlockedUntil.UnixNano()
	}
	return r
}

// state returns the live row r of hash as a KeyState, with its
// customer's budget state folded into Blocked, its credit limit into
// SpendLimited, and what it may still spend into CreditLeftMicros.
func (t *table) state(h [32]byte, r *row) usage.KeyState {
	cu := t.customers[r.customer]
	s := usage.KeyState{KeyID: uuid.UUID(r.keyID).String(), CustomerID: cu.id, RPMLimit: r.rpm, TPMLimit: r.tpm,
		MaxConcurrent: r.conc, AllowedModels: t.lists.value(r.models), Blocked: t.strs.value(r.blocked), Version: r.version,
		SpendLimited: r.spendLimited || cu.creditLimited, Currency: t.strs.value(r.currency)}
	if r.expires != 0 {
		t := time.Unix(0, r.expires)
		s.ExpiresAt = &t
	}
	if r.blockedUntil != 0 {
		t := time.Unix(0, r.blockedUntil)
		s.BlockedUntil = &t
	}
	if r.spendLimited { // the map is read for the few keys with limits only
		if sp, ok := t.spend[h]; ok {
			if sp.daily != noLimit {
				s.DailyLimitMicros = &sp.daily
			}
			if sp.monthly != noLimit {
				s.MonthlyLimitMicros = &sp.monthly
			}
			s.DaySpentMicros, s.MonthSpentMicros = sp.daySpent, sp.monthSpent
		}
	}
	if cu.creditLimited && cu.hasCreditLeft {
		left := cu.creditLeft
		s.CreditLeftMicros, s.CustomerVersion = &left, cu.version
	}
	// The customer's block (its balance and credit spent) holds until a
	// top-up: it is the one to tell when the key's own block ends by
	// itself (a daily or monthly limit, at BlockedUntil), or there is
	// none; the client must not be told to come back at the key's reset.
	if cu.blocked != "" && (s.BlockedUntil != nil || s.BlockedAt(time.Now()) == "") {
		s.Blocked, s.BlockedUntil = cu.blocked, nil
	}
	return s
}
