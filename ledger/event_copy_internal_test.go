package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// pgxRows is a staged batch as pgx's CopyFrom reads it (a
// pgx.CopyFromSource): how batches were sent before appendCopy, kept as
// its reference. Values hands out pointers into the events and ratings.
type pgxRows struct {
	*stagedRows
	i   int
	row []any
}

func newPGXRows(s *stagedRows) *pgxRows {
	return &pgxRows{stagedRows: s, i: -1, row: make([]any, len(stagingColumns))}
}

func (s *pgxRows) Next() bool { s.i++; return s.i < len(s.keep) }

func (s *pgxRows) Err() error { return nil }

func (s *pgxRows) Values() ([]any, error) {
	k := s.keep[s.i]
	e, r, v := &s.events[k], &s.rates[k], s.row
	u := &e.Usage
	ids := &s.ids[k]
	v[0], v[1], v[2], v[3], v[4], v[5], v[6] = &ids[0], &e.Time, &ids[1], &ids[2], &e.Provider, &e.Model, &e.ServedModel
	v[7], v[8], v[9], v[10], v[11] = &e.Endpoint, &e.Stream, &e.Status, &e.HTTPStatus, &e.FinishReason
	v[12], v[13], v[14], v[15], v[16], v[17] = &u.PromptTokens, &u.CachedTokens, &u.CacheWriteTokens, &u.CompletionTokens, &u.ReasoningTokens, &u.WebSearchRequests
	v[18], v[19], v[20], v[21] = &e.UsageSource, &e.TTFTMillis, &e.DurationMillis, &e.Error
	v[22], v[23], v[24], v[25], v[26], v[27] = r.PriceID, r.OverrideID, &r.Currency, &r.CostE12, &r.DiscountBP, &r.Unpriced
	v[28], v[29], v[30] = &e.Corrections, &e.EndUser, metadataJSON(e.Metadata)
	x := &s.extra[k]
	v[31], v[32], v[33], v[34] = &e.Deployment, &x.attempt, &x.charged, &x.requestID
	return v, nil
}

// ratedRows makes a staged batch of events with the ratings given, index
// for index (no price book read), through newStagedRows.
func ratedRows(events []usage.Event, rates []usage.Rating) (*stagedRows, error) {
	byID := make(map[string]usage.Rating, len(events))
	for i := range events {
		byID[events[i].ID] = rates[i]
	}
	rows, _, err := newStagedRows(events, func(e *usage.Event) (usage.Rating, error) { return byID[e.ID], nil })
	return rows, err
}

// StagingCopiesForTest copies oddBatch into the staging table twice in
// one transaction it rolls back: as writeStagedBatch sends it (appendCopy)
// and through pgx's CopyFrom. It returns each copy's rows as Postgres
// prints them (row to text), sorted.
func (s *Store) StagingCopiesForTest(ctx context.Context, tb testing.TB) (ours, pgxs []string, err error) {
	rows := oddBatch(tb)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, stagingTable); err != nil {
		return nil, nil, err
	}
	read := func() ([]string, error) {
		r, err := tx.Query(ctx, `SELECT s::text FROM usage_staging s ORDER BY 1`)
		if err != nil {
			return nil, err
		}
		out, err := pgx.CollectRows(r, pgx.RowTo[string])
		if err == nil {
			_, err = tx.Exec(ctx, `DELETE FROM usage_staging`)
		}
		return out, err
	}
	if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(rows.appendCopy(nil)), stagingCopy); err != nil {
		return nil, nil, fmt.Errorf("appendCopy: %w", err)
	}
	if ours, err = read(); err != nil {
		return nil, nil, err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"usage_staging"}, stagingColumns, newPGXRows(rows)); err != nil {
		return nil, nil, fmt.Errorf("pgx: %w", err)
	}
	pgxs, err = read()
	return ours, pgxs, err
}

// benchRows is a batch of n events as the meter benchmark makes them: 50
// customers, a price and no override, an attempt not charged in ten.
func benchRows(tb testing.TB, n int) *stagedRows {
	tb.Helper()
	events, rates := make([]usage.Event, n), make([]usage.Rating, n)
	customers := make([]string, 50)
	for i := range customers {
		customers[i] = uuid.NewString()
	}
	price := int64(7)
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for i := range events {
		c := customers[i%len(customers)]
		events[i] = usage.Event{Version: 1, ID: uuid.NewString(), Time: t0.Add(time.Duration(i) * 20 * time.Microsecond),
			CustomerID: c, KeyID: c, Provider: "openai", Model: fmt.Sprintf("model-%02d", i%20), Endpoint: "/v1/chat/completions",
			Stream: true, Status: usage.StatusOK, HTTPStatus: 200, FinishReason: "stop", UsageSource: usage.SourceUpstream,
			Usage: usage.Tokens{PromptTokens: int64(100 + i%900), CachedTokens: int64(i % 64), CompletionTokens: int64(50 + i%500),
				ReasoningTokens: int64(i % 7)}, TTFTMillis: 120, DurationMillis: 900, NotCharged: i%10 == 9}
		rates[i] = usage.Rating{PriceID: &price, Currency: "USD", CostE12: int64(i) * 1_234_567}
	}
	rows, err := ratedRows(events, rates)
	if err != nil {
		tb.Fatal(err)
	}
	return rows
}

// stagingOIDs is the staging table's column types, in stagingColumns' order.
var stagingOIDs = []uint32{pgtype.UUIDOID, pgtype.TimestamptzOID, pgtype.UUIDOID, pgtype.UUIDOID, pgtype.TextOID,
	pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.BoolOID, pgtype.TextOID, pgtype.Int4OID, pgtype.TextOID,
	pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.TextOID,
	pgtype.Int8OID, pgtype.Int8OID, pgtype.TextOID, pgtype.Int8OID, pgtype.Int8OID, pgtype.TextOID, pgtype.Int8OID,
	pgtype.Int4OID, pgtype.BoolOID, pgtype.TextOID, pgtype.TextOID, pgtype.JSONBOID, pgtype.TextOID, pgtype.Int4OID,
	pgtype.BoolOID, pgtype.UUIDOID}

// pgxCopy appends rows to buf in COPY's binary format as pgx's CopyFrom
// builds it (copyFrom.buildCopyBuf and encodeCopyValue, pgx v5): each
// value through m.Encode in the binary format, after its length.
func pgxCopy(m *pgtype.Map, rows *stagedRows, buf []byte) ([]byte, error) {
	buf = append(buf, copyHeader...)
	src := newPGXRows(rows)
	for src.Next() {
		vals, err := src.Values()
		if err != nil {
			return nil, err
		}
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(vals)))
		for i, v := range vals {
			at := len(buf)
			buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) // NULL unless encoded
			out, err := m.Encode(stagingOIDs[i], pgtype.BinaryFormatCode, v, buf)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", stagingColumns[i], err)
			}
			if out != nil {
				buf = out
				binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
			}
		}
	}
	return binary.BigEndian.AppendUint16(buf, math.MaxUint16), nil
}

// TestAppendCopyIsPgxBytes: appendCopy encodes the benchmark's batch, and
// one of every odd value a column takes, to the very bytes pgx's CopyFrom
// sends for them.
func TestAppendCopyIsPgxBytes(t *testing.T) {
	rows := oddBatch(t)
	want, err := pgxCopy(pgtype.NewMap(), rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := rows.appendCopy(nil); !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("appendCopy differs from pgx at byte %d of %d/%d:\nours %q\npgx  %q", i, len(got), len(want),
			got[max(i-40, 0):min(i+40, len(got))], want[max(i-40, 0):min(i+40, len(want))])
	}
}

// oddBatch is 200 events of benchRows and then oddEvents, those rated
// unpriced with a discount and a negative cost.
func oddBatch(tb testing.TB) *stagedRows {
	tb.Helper()
	rows := benchRows(tb, 200)
	events, rates := append(rows.events, oddEvents()...), rows.rates
	override := int64(-3)
	for len(rates) < len(events) {
		rates = append(rates, usage.Rating{OverrideID: &override, Currency: "EUR", CostE12: -5, DiscountBP: 1500, Unpriced: true})
	}
	rows, err := ratedRows(events, rates)
	if err != nil {
		tb.Fatal(err)
	}
	return rows
}

// oddEvents are events with a value of every kind a column can hold at
// its edges: metadata (with quotes, non-ASCII text), a request id, times
// before 2000, before 1970 and with sub-microsecond digits in another
// zone, the largest counts, an attempt and status of zero.
func oddEvents() []usage.Event {
	zone := time.FixedZone("UTC-7", -7*3600)
	base := usage.Event{Version: 1, CustomerID: uuid.NewString(), KeyID: uuid.NewString(), Provider: "anthropic",
		Model: "claude-ünïcode-☃", Endpoint: "/v1/messages", Status: usage.StatusClientCancelled, UsageSource: usage.SourceEstimated}
	times := []time.Time{
		time.Date(1999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(1969, 7, 20, 20, 17, 40, 123_456_789, time.UTC),
		time.Date(2026, 11, 26, 8, 0, 0, 1, zone),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	var out []usage.Event
	for i, at := range times {
		e := base
		e.ID, e.Time = uuid.NewString(), at
		switch i {
		case 0:
			e.Metadata = map[string]string{"team": `a "quoted" \\ value`, "ünï": "☃\n"}
			e.RequestID, e.Deployment, e.Attempt, e.NotCharged = uuid.NewString(), "east-2", 3, true
		case 1:
			e.Usage = usage.Tokens{PromptTokens: math.MaxInt64, CompletionTokens: math.MaxInt64 - 1, WebSearchRequests: 1}
			e.ServedModel, e.EndUser, e.Corrections, e.Error = "served", "user@example.com", "cached_tokens>prompt_tokens", "upstream: 502"
		case 2:
			e.HTTPStatus, e.TTFTMillis, e.DurationMillis, e.Stream = 999, -1, 1<<40, true
		}
		out = append(out, e)
	}
	return out
}

// BenchmarkStagingEncode: a 6,000-event batch encoded for COPY by
// appendCopy, against pgx's encoding of the same rows (pgxCopy). ns/event.
func BenchmarkStagingEncode(b *testing.B) {
	rows := benchRows(b, 6000)
	b.Run("appendCopy", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = rows.appendCopy(buf[:0])
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows.keep)), "ns/event")
	})
	b.Run("pgx", func(b *testing.B) {
		m := pgtype.NewMap()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = pgxCopy(m, rows, buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows.keep)), "ns/event")
	})
}
