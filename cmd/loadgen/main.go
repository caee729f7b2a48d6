// Command loadgen is an SSE-aware load generator for Tollgate. It measures,
// for several targets run in turn within each round so that the machine's
// noise hits all of them alike:
//
//   - sim: upstream-sim directly;
//   - proxy: a bare httputil.ReverseProxy in front of it (FlushInterval -1),
//     the floor any Go proxy can reach;
//   - tollgate: `tollgate serve` with full metering (embedded JetStream, the
//     meter worker and a fresh Postgres database), reaching the simulator
//     over HTTP/1.1;
//   - tollgate-h2c (only when -targets names it): another `tollgate serve`,
//     its own database, reaching the simulator over cleartext HTTP/2 (the
//     provider's protocol: h2c);
//   - tollgate-base (only when -targets names it): `tollgate serve` of
//     another build (-base-tollgate-bin), to measure two builds in one run;
//   - tollgate-split (only when -targets names it): tollgate as
//     docker-compose.yaml deploys it, `tollgate gateway`, `tollgate meter`
//     and `tollgate admin` each a process, with a nats-server process; its
//     CPU per chunk is the gateway process's, and the others' is reported
//     beside it;
//
// time to first token, gaps between content chunks, chunks/s and
// requests/s (p50, p90, p99, max), errors, and the CPU time of each
// process (from /proc/PID/stat) per million chunks, with each target's
// ratios to the bare proxy.
//
//	go run ./cmd/loadgen [-targets sim,proxy,tollgate] [-concurrency 100] [-chunks 200]
//	    [-duration 20s | -requests N] [-rounds 3] [-stream=true] [-prompt-words 50] [-chunk-delay-ms 0]
//	go run ./cmd/loadgen -mode short [-duration 20s]   10-chunk streams at full speed; checks the ledger
//	go run ./cmd/loadgen -mode idle -streams 10000     N silent open streams; the gateway's RSS
//	go run ./cmd/loadgen -mode keys -keys 1000000 [-gateways 2] [-rate 200] [-duration 20s] [-changes 200]
//	    split mode (a nats-server process, tollgate meter, admin and gateways): the key sync, memory per key,
//	    steady CPU, and revocation latency (see keys.go)
//
// By default it builds ./cmd/upstream-sim and ./cmd/tollgate and starts each
// target as a separate process on loopback: the simulator, the proxy
// (loadgen re-executing itself as `loadgen proxy -listen ADDR -target URL`)
// and `tollgate serve` on a database tollgate_loadgen_<random> created on
// -database-url's server and dropped at the end, with a customer and key
// made through the admin API. -gateway-url and -key point it at a running
// deployment instead (add -admin-url, -admin-token and -customer-id to
// check the ledger), -sim-url at a running simulator.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

type config struct {
	mode         string
	targets      []string
	concurrency  int
	chunks       int
	duration     time.Duration
	requests     int
	stream       bool
	promptWords  int
	chunkDelayMs int
	rounds       int
	warmup       time.Duration
	model        string

	streams      int
	openParallel int
	// memoryLimit is GOMEMLIMIT in the environment of the bare proxy and of
	// every tollgate target (not of loadgen or the simulator); empty: none.
	memoryLimit string
	// memoryCgroup is -memory-cgroup in bytes: the memory cgroup limit of
	// the bare proxy and of every tollgate target; 0: none.
	memoryCgroup int64
	openTimeout  time.Duration
	idleSettle   time.Duration

	keys, gateways, keyRate, changes int
	natsBin                          string

	simURL, gatewayURL, adminURL, key, adminToken, customerID string
	simBin, tollgateBin, baseTollgateBin                      string
	databaseURL                                               string
	keepLogs                                                  bool
	cpuProfileDir                                             string
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var targets string
	fs.StringVar(&c.mode, "mode", "standard", "standard | short (10-chunk streams at full speed, ledger checked) | idle (N silent open streams, RSS) | keys (split mode with -keys keys: sync, memory, CPU, revocation latency)")
	fs.StringVar(&targets, "targets", "", "comma-separated targets among sim, proxy, tollgate, tollgate-h2c, tollgate-base, tollgate-split (default sim,proxy,tollgate; idle: proxy,tollgate); tollgate-h2c is a second tollgate serve whose simulator provider has protocol: h2c (cleartext HTTP/2), tollgate's uses HTTP/1.1; tollgate-base runs -base-tollgate-bin; tollgate-split runs tollgate gateway, meter and admin as processes of their own with a nats-server, and its CPU is the gateway process's")
	fs.IntVar(&c.concurrency, "concurrency", 100, "concurrent streams")
	fs.IntVar(&c.chunks, "chunks", 200, "content chunks per stream (short mode: 10 unless set)")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "length of a round, shared by the targets in turn")
	fs.IntVar(&c.requests, "requests", 0, "requests per target per round instead of -duration (0: use -duration)")
	fs.BoolVar(&c.stream, "stream", true, "stream the completions")
	fs.IntVar(&c.promptWords, "prompt-words", 50, "words in the prompt")
	fs.IntVar(&c.chunkDelayMs, "chunk-delay-ms", 0, "simulator delay before each content chunk (sim_delay_ms)")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unmeasured warm-up per target before the first round")
	fs.StringVar(&c.model, "model", "sim-small", "model to request")
	fs.IntVar(&c.streams, "streams", 10000, "idle mode: streams to hold open")
	fs.IntVar(&c.openParallel, "open-parallel", 200, "idle mode: streams being opened at once")
	fs.StringVar(&c.memoryLimit, "memory-limit", "", "GOMEMLIMIT for the bare proxy and every tollgate target, the same for each (for example 450MiB; Go's syntax); default none")
	var cgroupSize string
	fs.StringVar(&cgroupSize, "memory-cgroup", "", "run the bare proxy and every tollgate target each in a memory cgroup of this limit (Linux; as a container's memory limit: tollgate sets its GOMEMLIMIT to 90% of it, and the proxy is given the same), and report what the kernel charged; for example 477MiB")
	fs.DurationVar(&c.openTimeout, "open-timeout", 3*time.Minute, "idle mode: how long to wait for every stream to open")
	fs.DurationVar(&c.idleSettle, "idle-settle", 2*time.Second, "idle mode: wait between the last stream opening and reading RSS")
	fs.IntVar(&c.keys, "keys", 10_000, "keys mode: active keys in the database")
	fs.IntVar(&c.gateways, "gateways", 2, "keys mode: gateway processes (split mode)")
	fs.IntVar(&c.keyRate, "rate", 200, "keys mode: authenticated requests per second during the steady-state window (-duration)")
	fs.IntVar(&c.changes, "changes", 200, "keys mode: revocations measured")
	fs.StringVar(&c.natsBin, "nats-bin", "", "nats-server binary: keys mode's (default: nats-server on PATH, else /usr/sbin/nats-server) and tollgate-split's (default: built from the module's github.com/nats-io/nats-server/v2, the server tollgate serve embeds; 2.10 or later, for its sync_interval)")
	fs.StringVar(&c.simURL, "sim-url", "", "a running upstream-sim (default: start one)")
	fs.StringVar(&c.gatewayURL, "gateway-url", "", "a running tollgate LLM API (default: start `tollgate serve`)")
	fs.StringVar(&c.key, "key", "", "customer API key for -gateway-url")
	fs.StringVar(&c.adminURL, "admin-url", "", "admin API of -gateway-url, to check the ledger")
	fs.StringVar(&c.adminToken, "admin-token", os.Getenv("TOLLGATE_ADMIN_TOKEN"), "admin token for -admin-url")
	fs.StringVar(&c.customerID, "customer-id", "", "the customer of -key, to check the ledger")
	fs.StringVar(&c.simBin, "sim-bin", "", "upstream-sim binary (default: go build ./cmd/upstream-sim)")
	fs.StringVar(&c.tollgateBin, "tollgate-bin", "", "tollgate binary (default: go build ./cmd/tollgate)")
	fs.StringVar(&c.baseTollgateBin, "base-tollgate-bin", "", "the tollgate binary of the target tollgate-base: another build, measured in the same run (required by that target)")
	def := os.Getenv("TOLLGATE_TEST_DATABASE_URL")
	if def == "" {
		def = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	fs.StringVar(&c.databaseURL, "database-url", def, "Postgres server to create the run's database on")
	fs.BoolVar(&c.keepLogs, "keep-logs", false, "keep the children's logs and data directory")
	fs.StringVar(&c.cpuProfileDir, "cpu-profile-dir", "", "save a CPU profile of the target tollgate over each of its measured windows in this directory (tollgate-MODE-cCONCURRENCY-nCHUNKS-dDELAY-rROUND.pprof; make pgo merges them into cmd/tollgate/default.pgo); profiling costs the target CPU, so compare no figures from such a run")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch c.mode {
	case "standard":
	case "short":
		if !set["chunks"] {
			c.chunks = 10
		}
	case "idle":
		if !set["targets"] {
			targets = "proxy,tollgate"
		}
	case "keys":
		if err := c.checkKeys(); err != nil {
			return nil, err
		}
	case "meter":
		return nil, errors.New("-mode meter is not part of loadgen: the meter benchmark lives elsewhere")
	default:
		return nil, fmt.Errorf("-mode %q: want standard, short, idle or keys", c.mode)
	}
	if targets == "" {
		targets = "sim,proxy,tollgate"
	}
	seen := map[string]bool{}
	for _, t := range strings.Split(targets, ",") {
		t = strings.TrimSpace(t)
		if t != "sim" && t != "proxy" && !isTollgate(t) {
			return nil, fmt.Errorf("-targets: unknown target %q (want sim, proxy, tollgate, tollgate-h2c, tollgate-base, tollgate-split)", t)
		}
		if t == targetTollgateBase && c.baseTollgateBin == "" {
			return nil, errors.New("-targets: tollgate-base needs -base-tollgate-bin")
		}
		if !seen[t] {
			seen[t] = true
			c.targets = append(c.targets, t)
		}
	}
	switch {
	case c.concurrency < 1:
		return nil, errors.New("-concurrency must be at least 1")
	case c.chunks < 1:
		return nil, errors.New("-chunks must be at least 1")
	case c.rounds < 1:
		return nil, errors.New("-rounds must be at least 1")
	case c.requests == 0 && c.duration <= 0:
		return nil, errors.New("-duration must be positive")
	case c.cpuProfileDir != "" && (c.mode == "idle" || c.mode == "keys"):
		return nil, fmt.Errorf("-cpu-profile-dir: profiles the load of -mode standard or short, not %s", c.mode)
	case c.cpuProfileDir != "" && c.requests > 0:
		return nil, errors.New("-cpu-profile-dir: a profile lasts a window's whole seconds: use -duration, not -requests")
	case c.cpuProfileDir != "" && !seen[targetTollgate]:
		return nil, errors.New("-cpu-profile-dir: profiles the target tollgate: name it in -targets")
	case c.streams < 1 || c.openParallel < 1:
		return nil, errors.New("-streams and -open-parallel must be at least 1")
	case c.memoryLimit != "" && !validMemoryLimit(c.memoryLimit):
		return nil, fmt.Errorf("-memory-limit %q: want a size in GOMEMLIMIT's syntax, such as 450MiB or 2GiB", c.memoryLimit)
	}
	if cgroupSize != "" {
		n, ok := parseMemorySize(cgroupSize)
		if !ok {
			return nil, fmt.Errorf("-memory-cgroup %q: want a size in GOMEMLIMIT's syntax, such as 477MiB or 2GiB", cgroupSize)
		}
		if c.mode == "keys" {
			return nil, errors.New("-memory-cgroup: keys mode starts its own processes, outside any cgroup of loadgen's; use it with standard, short or idle")
		}
		c.memoryCgroup = n
	}
	return c, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == cgroupExec {
		err := cgroupExecMain(os.Args[2:])
		fmt.Fprintln(os.Stderr, "loadgen cgroup-exec:", err)
		os.Exit(1)
	}
	if os.Getenv(childEnv) == "proxy" || (len(os.Args) > 1 && os.Args[1] == "proxy") {
		args := os.Args[1:]
		if len(args) > 0 && args[0] == "proxy" {
			args = args[1:]
		}
		if err := proxyMain(args); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen proxy:", err)
			os.Exit(1)
		}
		return
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func numCPU() int { return runtime.NumCPU() }

// raiseNoFile lifts the soft RLIMIT_NOFILE to the hard limit, explicitly so
// that the children inherit it too (Go restores the original soft limit in
// children unless the program set one itself).
func raiseNoFile() (soft, hard uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0
	}
	rl.Cur = rl.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	return rl.Cur, rl.Max
}

// run starts the stack, runs the mode and prints its report to out;
// progress goes to log.
func run(ctx context.Context, cfg *config, out, log io.Writer) error {
	soft, hard := raiseNoFile()
	if cfg.mode == "keys" {
		return runKeys(ctx, cfg, out, log)
	}
	st, err := startStack(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.close()

	fmt.Fprintf(out, "loadgen %s\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(out, "machine: %s; load average at start %s; RLIMIT_NOFILE %d (hard %d)\n", machineInfo(), loadAvg(), soft, hard)
	for _, t := range cfg.targets {
		if isTollgate(t) {
			fmt.Fprintf(out, "%s: reaches the simulator over %s\n", t, upstreamMode(t))
		}
	}
	if cfg.simBin != "" || cfg.tollgateBin != "" {
		fmt.Fprintf(out, "code: prebuilt binaries -sim-bin %q -tollgate-bin %q -base-tollgate-bin %q\n", cfg.simBin, cfg.tollgateBin, cfg.baseTollgateBin)
	} else if rev := gitState(); rev != "" {
		fmt.Fprintf(out, "code: built from the %s\n", rev)
	}
	if cfg.memoryCgroup > 0 {
		fmt.Fprintf(out, "memory cgroup: the proxy and every tollgate target each in a memory cgroup limited to %.0f MiB (tollgate's GOMEMLIMIT is its own, 90%% of it; the proxy's is set to the same)\n", mib(cfg.memoryCgroup))
	}
	if cfg.memoryLimit != "" {
		fmt.Fprintf(out, "memory limit: GOMEMLIMIT=%s for the proxy and every tollgate target\n", cfg.memoryLimit)
	}
	switch cfg.mode {
	case "idle":
		fmt.Fprintf(out, "mode idle: %d streams per target held open (sim_delay_ms=600000 before the first content chunk), %d opened at a time\n\n",
			cfg.streams, cfg.openParallel)
		rs, err := runIdle(ctx, cfg, st, log, nil)
		if err != nil {
			return err
		}
		printIdle(out, rs)
	default:
		what := fmt.Sprintf("%d s per round, %v per target per round", int(cfg.duration.Seconds()), cfg.duration/time.Duration(len(cfg.targets)))
		if cfg.requests > 0 {
			what = fmt.Sprintf("%d requests per target per round", cfg.requests)
		}
		fmt.Fprintf(out, "mode %s: targets %s; concurrency %d; %d chunks per stream (stream=%v), prompt %d words, chunk delay %d ms; %d rounds, %s, order rotated each round; warm-up %v per target\n",
			cfg.mode, strings.Join(cfg.targets, ","), cfg.concurrency, cfg.chunks, cfg.stream, cfg.promptWords, cfg.chunkDelayMs,
			cfg.rounds, what, cfg.warmup)
		r := newRunner(cfg, st, log)
		if r.prof, err = newCPUProfiler(cfg.cpuProfileDir, cfg); err != nil {
			return err
		}
		totals, all, err := r.runRounds(ctx)
		if err != nil {
			return err
		}
		printReport(out, cfg, totals, all)
	}
	if n, total, err := simHTTP2(ctx, st.simURL); err == nil {
		fmt.Fprintf(out, "upstream-sim: %d of its %d model requests came over HTTP/2\n", n, total)
	}
	fmt.Fprintf(out, "load average at end %s\n", loadAvg())
	return nil
}

// simHTTP2 reads from the simulator's /stats how many of its requests came
// over HTTP/2, and how many model requests it served in all.
func simHTTP2(ctx context.Context, simURL string) (http2, total int64, err error) {
	if simURL == "" {
		return 0, 0, errors.New("no simulator")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, simURL+"/stats", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var st struct {
		HTTP2    int64 `json:"http2_requests"`
		Requests struct {
			Total    int64 `json:"total"`
			InFlight int64 `json:"in_flight"`
		} `json:"requests"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, 0, err
	}
	return st.HTTP2, st.Requests.Total + st.Requests.InFlight, nil
}

// gitState names the commit the binaries were built from and how many
// files of the working tree differ from it.
func gitState() string {
	root, err := moduleRoot()
	if err != nil {
		return ""
	}
	rev, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	st, _ := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output()
	n := 0
	for l := range strings.Lines(string(st)) {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return fmt.Sprintf("working tree of %s (%d tracked files modified)", strings.TrimSpace(string(rev)), n)
}
