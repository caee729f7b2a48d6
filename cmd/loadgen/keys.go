package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// keysRun is -mode keys: the key pipeline of split mode at scale. A real
// nats-server process, a database holding -keys active keys (inserted
// with COPY; their secrets are "tg-loadgen-<i>"), `tollgate meter` and
// `tollgate admin` (whose key syncer publishes every key to the buckets),
// and -gateways `tollgate gateway` processes. It measures the full sync,
// each gateway's start-up sync and memory, the steady-state CPU of every
// process under a constant rate of authenticated requests, and how long a
// revocation takes to reach every gateway.
type keysRun struct {
	cfg      *config
	log      io.Writer
	dir      string
	bin      string
	natsURL  string
	dbURL    string
	dbName   string
	token    string
	nats     *child
	meter    *child
	admin    *child
	adminURL string
	gws      []*child
	gwURLs   []string
	gwOps    []string
	secrets  []string // a sample of the keys' secrets
	keyIDs   []string // their ids
	env      []string
}

// keySample is how many keys' secrets the run keeps for requests.
const keySample = 20_000

func runKeys(ctx context.Context, cfg *config, out, log io.Writer) error {
	r := &keysRun{cfg: cfg, log: log, token: "loadgen-keys"}
	defer r.close()
	var err error
	if r.dir, err = os.MkdirTemp("", "loadgen-keys-"); err != nil {
		return err
	}
	if r.bin = cfg.tollgateBin; r.bin == "" {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		fmt.Fprintln(log, "building ./cmd/tollgate...")
		if r.bin, err = build(ctx, root, r.dir, "tollgate"); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "loadgen %s\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(out, "machine: %s; load average at start %s\n", machineInfo(), loadAvg())
	if rev := gitState(); rev != "" && cfg.tollgateBin == "" {
		fmt.Fprintf(out, "code: built from the %s\n", rev)
	}
	if err := r.startNATS(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	if err := r.database(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "keys: %d active keys of %d customers inserted with COPY in %.1f s\n", cfg.keys, customersFor(cfg.keys),
		time.Since(t0).Seconds())

	// The full sync: the admin's syncer publishes every key.
	t0 = time.Now()
	if err := r.startServices(ctx); err != nil {
		return err
	}
	n, err := r.waitBucket(ctx, cfg.keys, 30*time.Minute)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "full sync: %d entries in the bucket (the keys, and the sync lease's delete marker) %.1f s after `tollgate admin` and `tollgate meter` started (%.0f keys/s)\n",
		n, time.Since(t0).Seconds(), float64(n)/time.Since(t0).Seconds())

	// Each gateway's start-up sync and memory.
	for i := range cfg.gateways {
		start := time.Now()
		if err := r.startGateway(ctx, i); err != nil {
			return err
		}
		if err := r.waitReady(ctx, i, 30*time.Minute); err != nil {
			return err
		}
		took := time.Since(start)
		rt, rss := r.memory(ctx, i)
		fmt.Fprintf(out, "gateway %d: ready (every key loaded) %.2f s after start; after a GC: heap in use %.1f MiB (%.0f B per key), RSS %.1f MiB\n",
			i+1, took.Seconds(), mib(rt.heapInuse), float64(rt.heapInuse)/float64(max(cfg.keys, 1)), mib(rss))
	}

	// Steady state under a constant rate of authenticated requests.
	if err := r.steady(ctx, out); err != nil {
		return err
	}
	// A new key works at once; revocations reach every gateway.
	if err := r.propagation(ctx, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "load average at end %s\n", loadAvg())
	return nil
}

// customersFor is how many customers own n keys: 100 keys each.
func customersFor(n int) int { return max(1, (n+99)/100) }

func (r *keysRun) startNATS(ctx context.Context) error {
	var err error
	r.nats, r.natsURL, err = startNATSServer(ctx, r.dir, natsBinary(r.cfg.natsBin), "nats-server", "")
	return err
}

// database creates the run's database, migrates it with `tollgate
// migrate`, and inserts the keys.
func (r *keysRun) database(ctx context.Context) error {
	var b [6]byte
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	r.dbName = "tollgate_loadgen_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, r.cfg.databaseURL)
	if err != nil {
		return fmt.Errorf("postgres at %s: %w", r.cfg.databaseURL, err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+r.dbName)
	conn.Close(ctx)
	if err != nil {
		return err
	}
	u, err := url.Parse(r.cfg.databaseURL)
	if err != nil {
		return err
	}
	u.Path = "/" + r.dbName
	r.dbURL = u.String()
	r.env = append(tollgateEnv(), "TOLLGATE_DATABASE_URL="+r.dbURL, "TOLLGATE_ADMIN_TOKEN="+r.token,
		"TOLLGATE_NATS_URL="+r.natsURL, "TOLLGATE_PPROF=1", "TOLLGATE_LOG_LEVEL=info")
	mig := exec.CommandContext(ctx, r.bin, "migrate")
	mig.Env = r.env
	if out, err := mig.CombinedOutput(); err != nil {
		return fmt.Errorf("tollgate migrate: %v\n%s", err, out)
	}
	conn, err = pgx.Connect(ctx, r.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	nc := customersFor(r.cfg.keys)
	customers := make([]uuid.UUID, nc)
	rows := make([][]any, nc)
	for i := range customers {
		customers[i] = uuid.New()
		rows[i] = []any{customers[i], fmt.Sprintf("loadgen-%d", i)}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"customers"}, []string{"id", "name"}, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("insert customers: %w", err)
	}
	every := max(1, r.cfg.keys/keySample)
	i := 0
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"api_keys"}, []string{"id", "customer_id", "name", "prefix", "secret_hash"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i >= r.cfg.keys {
				return nil, nil
			}
			secret := fmt.Sprintf("tg-loadgen-%08d", i)
			h := sha256.Sum256([]byte(secret))
			id := uuid.New()
			if i%every == 0 && len(r.secrets) < keySample {
				r.secrets, r.keyIDs = append(r.secrets, secret), append(r.keyIDs, id.String())
			}
			row := []any{id, customers[i/100], "k", secret[:11], h[:]}
			i++
			return row, nil
		}))
	if err != nil {
		return fmt.Errorf("insert keys: %w", err)
	}
	_, err = conn.Exec(ctx, "ANALYZE")
	return err
}

// tollgateEnv is loadgen's environment without TOLLGATE_ settings.
func tollgateEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOLLGATE_") {
			env = append(env, kv)
		}
	}
	return env
}

// roleEnv is the environment of one tollgate process.
func (r *keysRun) roleEnv(name string) ([]string, string, string, error) {
	listen, err := freeAddr()
	if err != nil {
		return nil, "", "", err
	}
	ops, err := freeAddr()
	if err != nil {
		return nil, "", "", err
	}
	cfgPath := filepath.Join(r.dir, "tollgate.yaml")
	if _, err := os.Stat(cfgPath); err != nil {
		// No upstream is called: the requests are GET /v1/models.
		if err := os.WriteFile(cfgPath, []byte(tollgateConfig("http://127.0.0.1:9", false)), 0o644); err != nil {
			return nil, "", "", err
		}
	}
	env := append(append([]string{}, r.env...), "TOLLGATE_LISTEN="+listen, "TOLLGATE_ADMIN_LISTEN="+ops,
		"TOLLGATE_DATA_DIR="+filepath.Join(r.dir, name+"-data"))
	return env, "http://" + listen, "http://" + ops, nil
}

func (r *keysRun) startServices(ctx context.Context) error {
	for _, role := range []string{"meter", "admin"} {
		env, _, ops, err := r.roleEnv(role)
		if err != nil {
			return err
		}
		c, err := startChild("tollgate-"+role, r.dir, r.bin, []string{role, "--config", filepath.Join(r.dir, "tollgate.yaml")}, env)
		if err != nil {
			return err
		}
		if role == "meter" {
			r.meter = c
		} else {
			r.admin, r.adminURL = c, ops
		}
		if err := waitHTTP(ctx, c, ops+"/healthz", 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// waitBucket polls the keys bucket until it holds want keys (its sync
// mark besides), and returns how many it holds.
func (r *keysRun) waitBucket(ctx context.Context, want int, timeout time.Duration) (int, error) {
	nc, err := nats.Connect(r.natsURL)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(timeout)
	last := time.Now()
	for {
		var n int
		kv, err := js.KeyValue(ctx, "TOLLGATE_KEYS")
		if err == nil {
			var st jetstream.KeyValueStatus
			if st, err = kv.Status(ctx); err == nil {
				n = int(st.Values())
				if _, merr := kv.Get(ctx, "_sync"); merr == nil && n >= want+1 {
					return n - 1, nil
				}
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return n, fmt.Errorf("the keys bucket holds %d of %d keys after %v (%v); admin log:\n%s", n, want, timeout, err, r.admin.tail())
		}
		if time.Since(last) > 10*time.Second {
			fmt.Fprintf(r.log, "full sync: %d of %d keys in the bucket\n", n, want)
			last = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *keysRun) startGateway(ctx context.Context, i int) error {
	name := fmt.Sprintf("gateway%d", i+1)
	env, llm, ops, err := r.roleEnv(name)
	if err != nil {
		return err
	}
	c, err := startChild("tollgate-"+name, r.dir, r.bin, []string{"gateway", "--config", filepath.Join(r.dir, "tollgate.yaml")}, env)
	if err != nil {
		return err
	}
	r.gws, r.gwURLs, r.gwOps = append(r.gws, c), append(r.gwURLs, llm), append(r.gwOps, ops)
	return nil
}

// waitReady polls gateway i's /readyz until it answers 200 (its keys are
// loaded).
func (r *keysRun) waitReady(ctx context.Context, i int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", r.gwOps[i]+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-r.gws[i].done:
			return fmt.Errorf("gateway %d exited: %s", i+1, r.gws[i].tail())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("gateway %d not ready after %v", i+1, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// memory reads gateway i's heap after a garbage collection, and its RSS.
func (r *keysRun) memory(ctx context.Context, i int) (goRuntime, int64) {
	req, _ := http.NewRequestWithContext(ctx, "GET", r.gwOps[i]+"/debug/pprof/heap?gc=1", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	rt := readGoRuntime(ctx, r.gwOps[i]+"/metrics")
	rss, _, _ := procMem(r.gws[i].pid)
	return rt, rss
}

// models asks gateway i for GET /v1/models with secret, and returns the
// status.
func (r *keysRun) models(ctx context.Context, client *http.Client, i int, secret string) int {
	req, _ := http.NewRequestWithContext(ctx, "GET", r.gwURLs[i]+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// steady measures every process's CPU over -duration while -rate requests
// a second, with keys drawn from the sample, go to the gateways in turn.
func (r *keysRun) steady(ctx context.Context, out io.Writer) error {
	client := newClient(64, 10*time.Second)
	pids := map[string]int{"nats-server": r.nats.pid, "meter": r.meter.pid, "admin": r.admin.pid}
	for i, g := range r.gws {
		pids[fmt.Sprintf("gateway%d", i+1)] = g.pid
	}
	cpu := func() map[string]float64 {
		m := map[string]float64{}
		for name, pid := range pids {
			m[name], _ = procCPU(pid)
		}
		pg := postgresCPU(r.dbName)
		m["postgres (this database's backends)"], m["postgres (background)"] = pg.db, pg.bg
		return m
	}
	before, start := cpu(), time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	interval := time.Second / time.Duration(max(r.cfg.keyRate, 1))
	tick := time.NewTicker(interval)
	n := 0
	for time.Since(start) < r.cfg.duration {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		i, secret := n%len(r.gws), r.secrets[rand.IntN(len(r.secrets))]
		n++
		wg.Go(func() {
			code := r.models(ctx, client, i, secret)
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	tick.Stop()
	wg.Wait()
	span := time.Since(start).Seconds()
	after := cpu()
	fmt.Fprintf(out, "steady state: %d requests (GET /v1/models, %d keys drawn at random) in %.1f s, answers %v; CPU, in %% of one core:\n",
		n, len(r.secrets), span, codes)
	for _, name := range slices.Sorted(maps.Keys(after)) {
		fmt.Fprintf(out, "  %-38s %6.2f%%\n", name, 100*(after[name]-before[name])/span)
	}
	if codes[http.StatusOK] != n {
		return fmt.Errorf("steady state: %d of %d requests were not answered 200: %v", n-codes[http.StatusOK], n, codes)
	}
	return nil
}

// propagation creates keys and uses each on every gateway at once (none
// may be refused), then revokes -changes sampled keys one by one, each
// while every gateway is polled with it, and reports when each gateway
// first refused it, from the start of the revoking call.
func (r *keysRun) propagation(ctx context.Context, out io.Writer) error {
	client := newClient(16, 10*time.Second)
	var customer struct {
		ID string `json:"id"`
	}
	if err := r.adminCall(ctx, "POST", "/admin/v1/customers", `{"name":"loadgen-new-keys"}`, &customer); err != nil {
		return err
	}
	refused := 0
	for range 20 {
		var k struct {
			Key string `json:"key"`
		}
		if err := r.adminCall(ctx, "POST", "/admin/v1/customers/"+customer.ID+"/keys", `{"name":"new"}`, &k); err != nil {
			return err
		}
		for i := range r.gws {
			if code := r.models(ctx, client, i, k.Key); code != http.StatusOK {
				refused++
			}
		}
	}
	fmt.Fprintf(out, "new keys: 20 created, each used at once on every gateway: %d refused\n", refused)

	changes := min(r.cfg.changes, len(r.secrets))
	applied, calls := newHist(), newHist()
	perm := rand.Perm(len(r.secrets))
	for c := range changes {
		secret, id := r.secrets[perm[c]], r.keyIDs[perm[c]]
		if code := r.models(ctx, client, 0, secret); code != http.StatusOK {
			return fmt.Errorf("key %s answered %d before its revocation", id, code)
		}
		start := time.Now()
		var wg sync.WaitGroup
		seen := make([]time.Duration, len(r.gws))
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		for i := range r.gws {
			wg.Go(func() {
				for pctx.Err() == nil {
					if r.models(pctx, client, i, secret) == http.StatusUnauthorized {
						seen[i] = time.Since(start)
						return
					}
					// A millisecond between polls: a tight loop on every
					// gateway would take the cores the change is applied on.
					time.Sleep(time.Millisecond)
				}
			})
		}
		err := r.adminCall(ctx, "POST", "/admin/v1/keys/"+id+"/revoke", "", nil)
		calls.record(time.Since(start))
		wg.Wait()
		cancel()
		if err != nil {
			return err
		}
		for i, d := range seen {
			if d == 0 {
				return fmt.Errorf("gateway %d still accepts key %s 30 s after its revocation", i+1, id)
			}
			applied.record(d)
		}
	}
	fmt.Fprintf(out, "revocations: %d, each polled on %d gateways; from the start of POST /keys/{id}/revoke to the gateway's first 401: "+
		"p50 %.1f ms, p99 %.1f ms, max %.1f ms (the call itself: p50 %.1f ms, p99 %.1f ms)\n",
		changes, len(r.gws), ms(applied.quantile(0.5)), ms(applied.quantile(0.99)), ms(applied.quantile(1)),
		ms(calls.quantile(0.5)), ms(calls.quantile(0.99)))
	return nil
}

func (r *keysRun) adminCall(ctx context.Context, method, path, body string, out any) error {
	return adminCall(ctx, r.adminURL, r.token, method, path, body, out)
}

// close stops the processes, drops the database and removes the run's
// directory.
func (r *keysRun) close() {
	for _, g := range r.gws {
		g.stop(10 * time.Second)
	}
	r.admin.stop(10 * time.Second)
	r.meter.stop(10 * time.Second)
	r.nats.stop(10 * time.Second)
	if r.dbName != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, r.cfg.databaseURL); err == nil {
			if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+r.dbName+" WITH (FORCE)"); err != nil {
				fmt.Fprintf(r.log, "drop database %s: %v\n", r.dbName, err)
			}
			conn.Close(ctx)
		}
	}
	if r.dir != "" {
		if r.cfg.keepLogs {
			fmt.Fprintf(r.log, "logs kept in %s\n", r.dir)
		} else {
			_ = os.RemoveAll(r.dir)
		}
	}
}

// checkKeys checks -mode keys' settings.
func (c *config) checkKeys() error {
	switch {
	case c.keys < 1:
		return errors.New("-keys must be at least 1")
	case c.gateways < 1:
		return errors.New("-gateways must be at least 1")
	case c.keyRate < 1:
		return errors.New("-rate must be at least 1")
	}
	return nil
}
