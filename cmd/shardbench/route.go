package main

import (
	"fmt"
	"hash/fnv"
)

// The shard layout of docs/scaling.md: ledger shard k has its own usage
// stream, subject, durable consumer (its meter worker set) and Postgres.

// shardStream is shard k's usage stream name, "TOLLGATE_USAGE_<k>".
func shardStream(k int) string { return fmt.Sprintf("TOLLGATE_USAGE_%d", k) }

// shardSubject is shard k's usage subject, "tollgate.usage.v1.<k>": the
// default subject with the shard appended.
func shardSubject(k int) string { return fmt.Sprintf("tollgate.usage.v1.%d", k) }

// shardDurable is shard k's durable consumer, shared by its worker set.
func shardDurable(k int) string { return fmt.Sprintf("tollgate-meter-%d", k) }

// jumpHash maps key to a bucket in [0, buckets): Lamping and Veach's jump
// consistent hash ("A Fast, Minimal Memory, Consistent Hash Algorithm",
// 2014, arXiv:1406.2294). Going from n to n+1 buckets moves only the keys
// that land in the new bucket, about 1/(n+1) of them. buckets must be at
// least 1.
func jumpHash(key uint64, buckets int) int {
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// directory is the customer → ledger shard map that every gateway would
// hold in memory beside its key state (docs/scaling.md): a customer is
// placed once, when it is created, and stays on its shard.
type directory struct {
	shards int
	of     map[string]int // customer ID → shard
}

// newDirectory returns an empty directory over shards ledger shards. It
// returns an error when shards is not between 1 and 1024.
func newDirectory(shards int) (*directory, error) {
	if shards < 1 || shards > 1024 {
		return nil, fmt.Errorf("shards must be between 1 and 1024, not %d", shards)
	}
	return &directory{shards: shards, of: map[string]int{}}, nil
}

// place picks the shard of a new customer from a placement key (its name,
// or any stable key known before the ledger assigns the customer an ID):
// the jump hash of the key's 64-bit FNV-1a hash.
func (d *directory) place(key string) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return jumpHash(h.Sum64(), d.shards)
}

// record notes that customer id lives on shard k.
func (d *directory) record(id string, k int) { d.of[id] = k }

// shard returns the shard of customer id, and false for a customer the
// directory does not know (an event for it cannot be routed).
func (d *directory) shard(id string) (int, bool) {
	k, ok := d.of[id]
	return k, ok
}
