// Package ledger is Tollgate's Postgres ledger: customers, API keys, the
// price book, and rated usage events, written exactly once per event id.
// It is the only package that talks to Postgres.
package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/tollgate-dev/tollgate/migrations"
)

// DefaultDatabaseURL is used when TOLLGATE_DATABASE_URL is not set: the local
// server, database "tollgate".
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/tollgate?sslmode=disable"

// Store is the ledger over a Postgres connection pool. It is safe for
// concurrent use.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
	// partitions remembers the months ("2006_01") whose usage_events
	// partition is known to exist.
	partitions sync.Map
	obs        Observer // nil: none
	// exports holds a token per export running (ExportLines), at most
	// MaxExports.
	exports chan struct{}
}

// newStore is a Store over pool.
func newStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, now: time.Now, exports: make(chan struct{}, MaxExports)}
}

// Open connects to the database at url, creating the database first when it
// does not exist (connecting to the server's "postgres" database to do so).
// It does not apply migrations; call Migrate. Its sessions run in UTC,
// whatever the server's or the url's TimeZone: the ledger's hours, days and
// statement months are UTC ones, and Postgres truncates a timestamptz to
// the hour or month in the session's zone.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	return open(ctx, url, true, opts)
}

// OpenExisting is Open without creating the database: a missing one is an
// error (Postgres's 3D000, "database … does not exist"), for commands that
// only make sense on a ledger that is there, such as a rollback.
func OpenExisting(ctx context.Context, url string, opts ...Option) (*Store, error) {
	return open(ctx, url, false, opts)
}

// Option changes how Open, OpenExisting and OpenLazy set up the store's
// sessions.
type Option func(*pgxpool.Config)

// ApplicationName names the store's Postgres sessions name (their
// application_name, as pg_stat_activity and the server's log show them:
// "tollgate-meter"), so that an operator can tell the processes' sessions
// apart, unless the url (or PGAPPNAME) names them already: the operator's
// name wins.
func ApplicationName(name string) Option {
	return func(cfg *pgxpool.Config) {
		if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set {
			cfg.ConnConfig.RuntimeParams["application_name"] = name
		}
	}
}

// CheckURL returns the error Open would return for url (a key=value
// string or a postgres:// URL, pool_* settings included) before it
// connects, or nil; it connects to nothing. pgx's error hides a password.
func CheckURL(url string) error {
	_, err := parseURL(url)
	return err
}

// parseURL is pgxpool.ParseConfig, refusing a host that holds an "@":
// no host does, but a password with an "@" not percent-encoded
// ("postgres://u:p@ss@host/db") parses as the password "p" on the host
// "ss@host", which connection errors then show, the password's rest
// with it. The error names neither.
func parseURL(url string) (*pgxpool.Config, error) {
	if slashInUserinfo(url) {
		return nil, errors.New(`a "/" ends its host part before its "@": a user or password with a "/" must write it percent-encoded, as %2F (and "@" as %40, ":" as %3A)`)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	hosts := []string{cfg.ConnConfig.Host}
	for _, f := range cfg.ConnConfig.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if strings.Contains(h, "@") {
			return nil, errors.New(`its host holds an "@": a user or password with an "@" must write it percent-encoded, as %40 (and ":" as %3A, "/" as %2F)`)
		}
	}
	return cfg, nil
}

// slashInUserinfo reports whether url, a postgres:// or postgresql:// URL,
// has a "/" in its user or password: an "@" after the first "/" with no
// "=" between them (an "@" in a query parameter, "?user=me@corp", comes
// after its "="). pgx, as libpq, ends the userinfo's search at the first
// "/", so "u:pa/ss@host/db" reads as the host "u" on the port "pa" ("invalid
// port"), and "u:12/ss@host/db" as port 12 and a database named after the
// password's rest, which connection errors then show.
func slashInUserinfo(url string) bool {
	rest, ok := strings.CutPrefix(url, "postgresql://")
	if !ok {
		if rest, ok = strings.CutPrefix(url, "postgres://"); !ok {
			return false
		}
	}
	i := strings.IndexAny(rest, "@/")
	if i < 0 || rest[i] == '@' {
		return false
	}
	before, _, found := strings.Cut(rest[i:], "@")
	return found && !strings.Contains(before, "=")
}

// OpenLazy is Open without creating the database or connecting to it:
// the pool connects when it is first used. It is for a process that can
// serve without the ledger while Postgres is unreachable (a gateway), and
// returns an error only for an invalid url.
func OpenLazy(url string, opts ...Option) (*Store, error) {
	cfg, err := parseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	sessionParams(cfg, opts)
	poolSize(cfg, url)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.ConnConfig.Database, err)
	}
	return newStore(pool), nil
}

// Unreachable reports whether err, from Open, is Postgres being
// unreachable or not taking connections now (down, starting, shutting
// down, connections disallowed), rather than a bad url or a
// misconfiguration a retry will not fix: a refused password or role
// (SQLSTATE class 28), a database that does not exist (3D000), a missing
// privilege (42501).
func Unreachable(err error) bool {
	var u *unreachableError
	if !errors.As(err, &u) {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) && (strings.HasPrefix(pg.Code, "28") || pg.Code == "3D000" || pg.Code == "42501") {
		return false
	}
	return true
}

// Down reports whether err, from any Store call, is Postgres not answering
// now rather than refusing the operation: no connection could be made
// (the pool's connect, but for the misconfigurations Unreachable names),
// or the connection was lost or ended by the server (SQLSTATE class 08,
// connection exception; 57P01 to 57P03, shutting down or not yet
// accepting connections; a broken socket). A retry once the database is
// back may succeed.
func Down(err error) bool {
	if err == nil {
		return false
	}
	if Unreachable(err) {
		return true
	}
	var pg *pgconn.PgError
	isPg := errors.As(err, &pg)
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		// Any refusal to connect (connections disallowed is 55000) but a
		// misconfiguration, as Unreachable.
		return !isPg || !(strings.HasPrefix(pg.Code, "28") || pg.Code == "3D000" || pg.Code == "42501")
	}
	if isPg {
		return strings.HasPrefix(pg.Code, "08") || pg.Code == "57P01" || pg.Code == "57P02" || pg.Code == "57P03"
	}
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Missing reports whether err, from OpenExisting, is the database not
// existing (SQLSTATE 3D000).
func Missing(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "3D000"
}

// unreachableError is a failure to connect to Postgres.
type unreachableError struct{ err error }

func (u *unreachableError) Error() string { return u.err.Error() }
func (u *unreachableError) Unwrap() error { return u.err }

// IdleInTransactionTimeout is the idle_in_transaction_session_timeout the
// ledger's sessions run with, unless the url sets one: Postgres ends a
// session that holds a transaction open and sends nothing for this long.
// No transaction of the ledger waits on anything but Postgres, so only a
// stalled process (stopped, frozen, cut off) does; the rows it locked (a
// customer's balance, a rollup) otherwise stopped every other meter
// worker writing that customer's events for as long as it stalled (a crash
// review: 70 s of a SIGSTOPped worker, and the ledger with it).
const IdleInTransactionTimeout = "60s"

// DefaultMaxConns is the least size of the ledger's connection pool when
// the url does not set pool_max_conns: pgxpool's own default (the larger
// of 4 and the CPUs) leaves, on a small machine, 4 connections for the
// meter workers, the key sync, the admin API and the customer API's reads
// together, of which the customer API may take half (api.Self).
const DefaultMaxConns = 8

// poolSize raises cfg's pool to DefaultMaxConns unless url sets its own
// pool_max_conns. Connections open as they are needed: an idle process
// holds few.
func poolSize(cfg *pgxpool.Config, url string) {
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, DefaultMaxConns)
	}
}

// sessionParams sets what every ledger session runs with: opts, the UTC
// time zone as a startup parameter, and IdleInTransactionTimeout with a
// SET once connected (a startup parameter of that name is refused by
// PgBouncer, which passes on only a few), unless the url sets its own.
func sessionParams(cfg *pgxpool.Config, opts []Option) {
	for _, o := range opts {
		o(cfg)
	}
	p := cfg.ConnConfig.RuntimeParams
	p["timezone"] = "UTC"
	if _, set := p["idle_in_transaction_session_timeout"]; set {
		return
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET idle_in_transaction_session_timeout = '"+IdleInTransactionTimeout+"'")
		return err
	}
}

func open(ctx context.Context, url string, create bool, opts []Option) (*Store, error) {
	cfg, err := parseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	sessionParams(cfg, opts)
	poolSize(cfg, url)
	if create {
		if err := createDatabase(ctx, cfg.ConnConfig); err != nil {
			return nil, &unreachableError{err}
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.ConnConfig.Database, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, &unreachableError{fmt.Errorf("connect to database %q on %s:%d: %w",
			cfg.ConnConfig.Database, cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)}
	}
	return newStore(pool), nil
}

// createDatabase creates cfg's database if it is missing.
func createDatabase(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return conn.Close(ctx)
	}
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != "3D000" { // invalid_catalog_name
		return fmt.Errorf("connect to database %q on %s:%d: %w", cfg.Database, cfg.Host, cfg.Port, err)
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err = pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to create database %q: %w", cfg.Database, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.Database}.Sanitize())
	// Created meanwhile by another process: duplicate_database when it had
	// committed, a unique violation on pg_database's names when both
	// inserted the name at once.
	if err != nil && !isCode(err, "42P04") && !isCode(err, "23505") {
		return fmt.Errorf("create database %q: %w", cfg.Database, err)
	}
	return nil
}

func isCode(err error, code string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == code
}

// migrationLockWait is how long Migrate and MigrateDown wait for another
// process's migrations to end (goose's session lock, polled each second).
const migrationLockWait = 10 * time.Minute

// migrator is goose's provider of the embedded migrations over db; with
// locked, it holds a session-level advisory lock while it migrates, so
// that two processes migrating at once (two `tollgate serve` replicas
// starting, or `serve` beside `tollgate migrate`) take turns: the second
// finds nothing left to do. Without it, one of the two failed on the
// other's half-made tables (an upgrade review: "relation … already
// exists", one try in four).
func migrator(db *sql.DB, locked bool) (*goose.Provider, error) {
	var opts []goose.ProviderOption
	if locked {
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, uint64(migrationLockWait/time.Second)))
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// Migrate applies every pending goose migration embedded in the binary and
// returns how many it applied. It waits (up to 10 minutes) while another
// process migrates the same database.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := migrator(db, true)
	if err != nil {
		return 0, err
	}
	res, err := p.Up(ctx)
	if err != nil {
		return len(res), fmt.Errorf("migrate: %w", err)
	}
	return len(res), nil
}

// CheckMigrated returns an error saying to run `tollgate migrate` when the
// database's schema is older than this binary's migrations, or when it
// holds no ledger tables (a process of one role never migrates: `tollgate
// migrate` or `tollgate serve` does). It writes nothing: goose makes its
// version table where it reads a version, so a database without one
// (a new one, or another application's) is refused before goose reads it.
// A database at a newer release's version is taken (its binaries roll one
// at a time). It returns the database's error when it does not answer.
func (s *Store) CheckMigrated(ctx context.Context) error {
	var versioned bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&versioned); err != nil {
		return fmt.Errorf("read the migration version: %w", err)
	}
	if !versioned {
		return errors.New("the database has no migrations applied: run `tollgate migrate`")
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := migrator(db, false)
	if err != nil {
		return err
	}
	have, err := p.GetDBVersion(ctx)
	if Down(err) {
		return fmt.Errorf("read the migration version: %w", err)
	}
	if err != nil {
		return fmt.Errorf("the database has no migrations applied (%v): run `tollgate migrate`", err)
	}
	sources := p.ListSources()
	want := sources[len(sources)-1].Version
	if have < want {
		return fmt.Errorf("the database is at migration %d and this binary needs %d: run `tollgate migrate`", have, want)
	}
	if err := s.CheckTables(ctx); err != nil {
		if Down(err) {
			return fmt.Errorf("read the ledger's tables: %w", err)
		}
		return fmt.Errorf("the database is at migration %d: %w", have, err)
	}
	return nil
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// CheckTables reports whether the database answers and holds the ledger's
// tables: an error when it does not answer, or when a database dropped and
// created again under the same name (it answers, empty) has none, which
// Ping took for a working ledger.
func (s *Store) CheckTables(ctx context.Context) error {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('usage_events') IS NOT NULL AND to_regclass('prices') IS NOT NULL`).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return errors.New("the database has no ledger tables (dropped and created again?): run `tollgate migrate`")
	}
	return nil
}

// Close closes the connection pool.
func (s *Store) Close() { s.pool.Close() }

// MaxConns is the most connections the store's pool opens: the database
// URL's pool_max_conns, else DefaultMaxConns or the number of CPUs,
// whichever is larger.
func (s *Store) MaxConns() int { return int(s.pool.Config().MaxConns) }

// MigrateDown rolls migrations back to version (0 removes every table).
// It is for operators undoing an upgrade, and for tests. It returns the
// version the database was at and how many migrations it rolled back:
// none when version is not below the database's (goose's DownTo then does
// nothing, without an error). A negative version is refused, and so is a
// database at a version this binary does not hold (a newer release's: only
// its binary has the Down of its migrations), and so is a database without
// goose's version table or, above version, without the ledger's tables
// (not Tollgate's: a wrong database URL), to which nothing is written.
func (s *Store) MigrateDown(ctx context.Context, version int64) (from int64, rolledBack int, err error) {
	if version < 0 {
		return 0, 0, errorf(EInvalid, "migrate down to %d: the version must be 0 or more", version)
	}
	var versioned bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&versioned); err != nil {
		return 0, 0, fmt.Errorf("migrate down to %d: the database's version: %w", version, err)
	}
	if !versioned { // goose would make its table, and report nothing rolled back
		return 0, 0, errorf(EInvalid, "migrate down to %d: the database has no migrations applied (check TOLLGATE_DATABASE_URL)", version)
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := migrator(db, true)
	if err != nil {
		return 0, 0, err
	}
	if from, err = p.GetDBVersion(ctx); err != nil {
		return 0, 0, fmt.Errorf("migrate down to %d: the database's version: %w", version, err)
	}
	sources := p.ListSources()
	if newest := sources[len(sources)-1].Version; from > newest && version < from {
		return from, 0, errorf(EInvalid, "migrate down to %d: the database is at migration %d, a newer release's, and this binary's migrations end at %d: run `tollgate migrate --down-to %d` with the release that added migration %d, then roll the binaries back",
			version, from, newest, version, from)
	}
	if version < from {
		// Another application's goose database is not Tollgate's to roll back.
		if err := s.CheckTables(ctx); err != nil {
			if Down(err) {
				return from, 0, fmt.Errorf("migrate down to %d: %w", version, err)
			}
			return from, 0, errorf(EInvalid, "migrate down to %d: the database is at migration %d but holds no ledger tables: it is not Tollgate's (check TOLLGATE_DATABASE_URL)", version, from)
		}
	}
	res, err := p.DownTo(ctx, version)
	if err != nil {
		return from, len(res), fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return from, len(res), nil
}
