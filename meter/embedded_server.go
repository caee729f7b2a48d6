package meter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// The wait before the embedded server is restarted after a store failed,
// doubling while restarts keep failing or stores keep failing soon after
// one, up to the maximum.
const (
	embeddedRestartMin = time.Second
	embeddedRestartMax = time.Minute
)

// Embedded is the NATS server with JetStream that `tollgate serve` embeds
// when no NATS URL is set (and that tests run).
//
// It restarts itself when one of its stores stops taking writes. A file
// store that fails one write (a descriptor limit reached, a full or failing
// disk) refuses every later write until its server restarts (nats-server's
// filestore.go, setWriteErr), and a server out of space disables JetStream
// (stream.go, "will be DISABLED"): until then every event would go to the
// gateway's spool and the ledger would stand still. The restart comes
// embeddedRestartMin after the server logged the failure, then at doubling
// intervals up to embeddedRestartMax while it keeps failing. An attempt is
// refused while the process cannot open files, and a new server that did
// not load every stream and durable consumer of its store directory is
// shut down again (embeddedStrictAttempts times at most: see restart).
// Clients connected with nats.InProcessServer(e), or to ClientURL (the
// address is kept across restarts), reconnect by themselves. Restarts
// counts the restarts.
type Embedded struct {
	opts   func() *server.Options // fresh options for each start
	dir    string                 // the store directory
	log    *slog.Logger           // never nil
	failed chan storeFailure      // capacity 1: the newest failure waits
	quit   chan struct{}          // closed by Stop
	done   chan struct{}          // closed when heal returns
	once   sync.Once

	mu      sync.Mutex
	srv     *server.Server // the running server (or the one that failed)
	gen     uint64         // srv's generation: 0, then one per restart
	stopped bool

	restarts atomic.Uint64
}

// storeFailure is a failure the server of generation gen logged.
type storeFailure struct {
	gen uint64
	msg string
}

// StartEmbedded starts an in-process NATS server with JetStream, keeping its
// data under dir and syncing it by sync (zero: DefaultSync). listen is
// "host:port" to accept network clients (port 0: a free port, kept across
// restarts), or "" for in-process clients only (connect with
// nats.InProcessServer(e)). The server's warnings and errors (a store it
// cannot write, say) go to log at those levels, its notices at debug level;
// log nil keeps it silent. It returns once the server is ready for
// connections, or an error after 10 seconds or for a listen address it
// cannot parse. Stop (or Shutdown) ends it and its restarts.
func StartEmbedded(dir, listen string, sync SyncPolicy, log *slog.Logger) (*Embedded, error) {
	if sync == (SyncPolicy{}) {
		sync = DefaultSync
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var host string
	port := 0
	if listen != "" {
		h, p, err := net.SplitHostPort(listen)
		if err != nil {
			return nil, fmt.Errorf("embedded nats listen %q: %w", listen, err)
		}
		if port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("embedded nats listen %q: %w", listen, err)
		}
		host = h
		if port == 0 {
			port = server.RANDOM_PORT
		}
	}
	e := &Embedded{
		dir:    dir,
		log:    log,
		failed: make(chan storeFailure, 1),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	e.opts = func() *server.Options {
		return &server.Options{
			ServerName: "tollgate-embedded",
			JetStream:  true,
			StoreDir:   dir,
			// Told nothing, nats-server sizes the store at 75% of the
			// disk space free as it starts, for the server's life: one
			// started on a full disk (or restarted by heal with a few MiB
			// free) refused every stream and every event "insufficient
			// storage resources" once the disk was freed, until the
			// process restarted. The usage stream is trimmed as the
			// ledger takes it; a disk that fills is met by heal instead.
			JetStreamMaxStore: server.JetStreamMaxStoreDefault,
			NoSigs:            true,
			SyncAlways:        sync.Always,
			SyncInterval:      sync.Interval,
			DontListen:        listen == "",
			Host:              host,
			Port:              port,
		}
	}
	s, err := e.start(0)
	if err != nil {
		return nil, err
	}
	if a, ok := s.Addr().(*net.TCPAddr); ok && port == server.RANDOM_PORT {
		port = a.Port // a restart listens where clients were told to connect
	}
	e.srv = s
	go e.heal()
	return e, nil
}

// start starts a server of generation gen, its failures reported to heal.
func (e *Embedded) start(gen uint64) (*server.Server, error) {
	s, err := server.NewServer(e.opts())
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	s.SetLogger(serverLog{log: e.log, failed: func(msg string) { e.storeFailed(gen, msg) }}, false, false)
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("embedded nats: not ready after 10s")
	}
	return s, nil
}

// storeFailed hands a failure to heal without waiting. The channel holds
// one: of two, the one of the newer server stays (a server's store logs its
// failure once, so a newer server's must not give way to a stale one).
func (e *Embedded) storeFailed(gen uint64, msg string) {
	f := storeFailure{gen, msg}
	for {
		select {
		case e.failed <- f:
			return
		default:
		}
		select {
		case old := <-e.failed:
			if old.gen > f.gen {
				f = old
			}
		default:
		}
	}
}

// heal restarts the server after a store failed, until Stop.
func (e *Embedded) heal() {
	defer close(e.done)
	wait := embeddedRestartMin
	var last time.Time
	for {
		var f storeFailure
		select {
		case <-e.quit:
			return
		case f = <-e.failed:
		}
		e.mu.Lock()
		current := f.gen == e.gen
		e.mu.Unlock()
		if !current {
			continue // logged by a server already replaced
		}
		if time.Since(last) > 10*embeddedRestartMax {
			wait = embeddedRestartMin
		}
		e.log.Error("embedded NATS: a JetStream store stopped taking writes; restarting the server (events wait in the spool meanwhile)",
			"err", f.msg, "in", wait)
		refused := 0 // new servers shut down for what they did not load
		for {
			select {
			case <-e.quit:
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, embeddedRestartMax)
			err := e.restart(refused >= embeddedStrictAttempts)
			if err == nil {
				break
			}
			if errors.Is(err, errNotLoaded) {
				refused++
			}
			if errors.Is(err, errEmbeddedStopped) {
				return
			}
			e.log.Error("embedded NATS: restart failed; trying again", "err", err, "in", wait)
		}
		last = time.Now()
		e.log.Warn("embedded NATS: restarted", "restarts", e.restarts.Load())
	}
}

var (
	errEmbeddedStopped = errors.New("embedded nats: stopped")
	errNotLoaded       = errors.New("not loaded")
)

// embeddedStrictAttempts is how many restarts in a row may be refused for
// a stream or consumer the new server did not load (attempts refused
// before a server started, for want of files, do not count). Past them the server is
// taken as it comes up, as a restart of the process would take it, and what
// it lacks is logged: a store that can never load must not keep the
// embedded server down, and every event with it.
const embeddedStrictAttempts = 5

// restart shuts the current server down and starts the next generation.
// It refuses to while the process cannot open files. It refuses a server
// that came up without JetStream, and, unless lenient, one that did not
// load every stream and consumer its store directory holds: a store whose
// metadata could not be read (too many open files, say) is left out of the
// server, and a stream created again in its place would start empty.
func (e *Embedded) restart(lenient bool) error {
	if err := canOpenFiles(restartSpareFiles); err != nil {
		return fmt.Errorf("embedded nats: not restarted: %w", err)
	}
	if err := canWrite(e.dir, restartSpareBytes); err != nil {
		return fmt.Errorf("embedded nats: not restarted: %w", err)
	}
	e.mu.Lock()
	old, gen := e.srv, e.gen+1
	e.mu.Unlock()
	old.Shutdown()
	old.WaitForShutdown()
	// Read once the old server is down: the directory holds all it stored.
	want, err := storedNames(e.dir)
	if err != nil {
		return fmt.Errorf("embedded nats: not restarted: %w", err)
	}
	s, err := e.start(gen)
	if err != nil {
		return err
	}
	missing, err := notLoaded(s, want)
	if err != nil || (len(missing) > 0 && !lenient) {
		s.Shutdown()
		s.WaitForShutdown()
		if err == nil {
			err = fmt.Errorf("%w: %s", errNotLoaded, strings.Join(missing, ", "))
		}
		return fmt.Errorf("embedded nats: the restarted server is shut down: %w", err)
	}
	if len(missing) > 0 {
		e.log.Error("embedded NATS: restarted without some of its store after repeated attempts; they are left on disk",
			"not_loaded", missing)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		s.Shutdown()
		return errEmbeddedStopped
	}
	e.srv, e.gen = s, gen
	e.restarts.Add(1)
	return nil
}

// storedNames is the streams ("account/stream") and consumers
// ("account/stream/consumer") a JetStream store directory holds, read from
// the directories nats-server keeps them in:
// <dir>/jetstream/<account>/streams/<stream>/obs/<consumer>. Consumers kept
// only in memory (the ordered consumers of a key-value watch) have none.
func storedNames(dir string) ([]string, error) {
	var names []string
	root := filepath.Join(dir, "jetstream")
	accounts, err := readDirs(root)
	for _, a := range accounts {
		streams, serr := readDirs(filepath.Join(root, a, "streams"))
		err = errors.Join(err, serr)
		for _, st := range streams {
			names = append(names, a+"/"+st)
			consumers, cerr := readDirs(filepath.Join(root, a, "streams", st, "obs"))
			err = errors.Join(err, cerr)
			for _, c := range consumers {
				names = append(names, a+"/"+st+"/"+c)
			}
		}
	}
	return names, err
}

// readDirs is the names of the directories in dir (none if dir does not
// exist).
func readDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	var names []string
	for _, en := range entries {
		if en.IsDir() {
			names = append(names, en.Name())
		}
	}
	return names, err
}

// notLoaded is the names of want (as storedNames gives them) that s does not
// hold, from its JetStream report; an error if JetStream is not running.
func notLoaded(s *server.Server, want []string) ([]string, error) {
	if !s.JetStreamEnabled() {
		return nil, errors.New("JetStream did not start")
	}
	info, err := s.Jsz(&server.JSzOptions{Accounts: true, Streams: true, Consumer: true})
	if err != nil {
		return nil, err
	}
	has := map[string]bool{}
	for _, a := range info.AccountDetails {
		for _, st := range a.Streams {
			has[a.Name+"/"+st.Name] = true
			for _, c := range st.Consumer {
				has[a.Name+"/"+st.Name+"/"+c.Name] = true
			}
		}
	}
	var missing []string
	for _, n := range want {
		if !has[n] {
			missing = append(missing, n)
		}
	}
	return missing, nil
}

// restartSpareFiles is how many files the process must be able to open
// before the server is restarted: a store opens its metadata, index and
// block files as it loads.
const restartSpareFiles = 64

// restartSpareBytes is the space the store's directory must have free
// before the server is restarted. One restarted on a full disk (a second
// after a write failed, the disk still full) came up unable to write, and
// its JetStream locked up in a purge for good (a crash review, three runs
// of three): events waited in the spool until the process was killed.
const restartSpareBytes = 4 << 20

// canWrite writes n bytes to a file in dir, syncs and removes it; it
// returns the first error (ENOSPC on a full disk).
func canWrite(dir string, n int) error {
	f, err := os.CreateTemp(dir, ".space-probe-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, n))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// canOpenFiles opens n files (the null device) and closes them; it returns
// the first open's error.
func canOpenFiles(n int) error {
	var fs []*os.File
	defer func() {
		for _, f := range fs {
			f.Close()
		}
	}()
	for range n {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return err
		}
		fs = append(fs, f)
	}
	return nil
}

// current is the server running now (or the one being replaced).
func (e *Embedded) current() *server.Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srv
}

// InProcessConn connects to the current server in process; it makes e a
// nats.InProcessConnProvider, so that a client reconnects to the server
// that replaced a failed one. It returns an error while no server runs.
func (e *Embedded) InProcessConn() (net.Conn, error) { return e.current().InProcessConn() }

// ClientURL is the URL network clients connect to ("" when e does not
// listen), the same across restarts.
func (e *Embedded) ClientURL() string { return e.current().ClientURL() }

// Server is the server running now; a restart replaces it.
func (e *Embedded) Server() *server.Server { return e.current() }

// Restarts is how many times the server restarted after a store failed.
func (e *Embedded) Restarts() uint64 { return e.restarts.Load() }

// Stop ends the restarts and shuts the server down, waiting for both until
// ctx ends (then it returns ctx.Err(); the shutdown goes on). It is
// idempotent. The server's Shutdown runs under ctx too: one locked up in
// its store (after a disk filled) never returned, and SIGTERM hung the
// process for good.
func (e *Embedded) Stop(ctx context.Context) error {
	e.once.Do(func() { close(e.quit) })
	e.mu.Lock()
	e.stopped = true
	s := e.srv
	e.mu.Unlock()
	down := make(chan struct{})
	go func() {
		s.Shutdown()
		<-e.done
		s.WaitForShutdown()
		close(down)
	}()
	select {
	case <-down:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown is Stop without a deadline.
func (e *Embedded) Shutdown() { _ = e.Stop(context.Background()) }

// WaitForShutdown waits until the server a Stop or Shutdown ended is down.
func (e *Embedded) WaitForShutdown() {
	<-e.done
	e.current().WaitForShutdown()
}

// serverLog passes the embedded server's log lines to a slog.Logger,
// tagged "nats": warnings and errors at their levels, notices, debug and
// trace lines at debug level (its start-up banner is a dozen notices). An
// error line that says a store stopped taking writes also goes to failed.
type serverLog struct {
	log    *slog.Logger
	failed func(msg string)
}

func (l serverLog) Noticef(format string, v ...any) { l.at(slog.LevelDebug, format, v) }
func (l serverLog) Warnf(format string, v ...any)   { l.at(slog.LevelWarn, format, v) }
func (l serverLog) Fatalf(format string, v ...any)  { l.at(slog.LevelError, format, v) }
func (l serverLog) Debugf(format string, v ...any)  { l.at(slog.LevelDebug, format, v) }
func (l serverLog) Tracef(format string, v ...any)  { l.at(slog.LevelDebug, format, v) }

func (l serverLog) Errorf(format string, v ...any) {
	l.at(slog.LevelError, format, v)
	if l.failed != nil && storeFailed(format) {
		l.failed(fmt.Sprintf(format, v...))
	}
}

func (l serverLog) at(level slog.Level, format string, v []any) {
	ctx := context.Background()
	if l.log.Enabled(ctx, level) {
		l.log.Log(ctx, level, "nats: "+fmt.Sprintf(format, v...))
	}
}

// storeFailed reports whether the format of one of the server's error lines
// says a store stopped taking writes: a file store's "Critical write error"
// (nats-server filestore.go: the store refuses writes from then on) or
// JetStream "will be DISABLED" for want of space or resources (stream.go,
// jetstream.go). TestEmbeddedRestartsWhenAStoreFails holds the first to
// the nats-server version in go.mod.
func storeFailed(format string) bool {
	return strings.Contains(format, "Critical write error") || strings.Contains(format, "will be DISABLED")
}
