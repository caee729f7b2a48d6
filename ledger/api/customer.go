package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Self is the customer API: a customer's own usage and balance, with the
// customer's own API key. A customer sees only its own data, whatever it
// asks for.
type Self struct {
	keys KeyLookup
	// reads serves the queries, as the admin API does.
	reads *Admin

	// QueryTimeout bounds each request's reads; 0 means SelfQueryTimeout.
	// QueueTimeout bounds a request's wait for one of its customer's
	// SelfQueriesPerCustomer slots; 0 means SelfQueueTimeout.
	QueryTimeout, QueueTimeout time.Duration

	mu    sync.Mutex
	slots map[string]*customerSlots // by customer id, while any request of theirs is here
	// all bounds the requests answered at once, whatever their customers
	// (see selfQueriesAll).
	all chan struct{}
}

// customerSlots are the requests of one customer being answered (sem)
// and the requests holding them or waiting for one (users).
type customerSlots struct {
	sem   chan struct{}
	users int
}

// The customer API's reads are bounded per customer, since any key holder
// can ask for them and they share the ledger database with the meter
// workers, and a pool of a few connections (ledger.DefaultMaxConns) with
// the other customers (and across customers: selfQueriesAll): at
// most SelfQueriesPerCustomer are answered at once, the others waiting
// their turn (as the portal's parallel reads of a page do) for up to
// SelfQueueTimeout, then answered 429 rate_limit_exceeded (Retry-After 1
// s); and each is cut off after SelfQueryTimeout (503 unavailable, asking
// for a narrower range).
const (
	SelfQueriesPerCustomer = 2
	SelfQueueTimeout       = 10 * time.Second
	SelfQueryTimeout       = 30 * time.Second
)

// selfQueriesAll is how many customer API requests are answered at once
// across customers, on a ledger pool of poolConns connections: half of
// them (at least one), so that however many customers ask at once the
// meter workers, the key sync and the admin API keep the other half. A
// review: two customers each asking twice for a grouping that reads all
// their events took all 4 of the pool's connections, another customer's
// balance took 6.8 s instead of 3 ms and its requests reached the ledger
// 9.4 s late. A request beyond it waits as one beyond its customer's
// slots does.
func selfQueriesAll(poolConns int) int { return max(1, poolConns/2) }

// KeyLookup authenticates customer API keys (the gateway's key cache).
type KeyLookup interface {
	// LookupKey returns the state of an active key secret, or ok=false for
	// an unknown or revoked one.
	LookupKey(secret string) (usage.KeyState, bool)
}

// NewSelf returns the customer API, authenticating keys with keys.
func NewSelf(store *ledger.Store, keys KeyLookup, log *slog.Logger) *Self {
	conns := ledger.DefaultMaxConns // a Self that only lists its routes has no store
	if store != nil {
		conns = store.MaxConns()
	}
	return &Self{keys: keys, reads: &Admin{store: store, log: log}, slots: map[string]*customerSlots{},
		all: make(chan struct{}, selfQueriesAll(conns))}
}

// Routes adds GET /v1/usage, GET /v1/balance, GET /v1/key, GET /v1/keys, GET
// /v1/requests, GET /v1/requests/{id} and GET /v1/statements/{period} to r,
// and HEAD of each, answered as GET without the body.
// A query parameter a route does not take (openapi.json's, and key, which
// may carry the API key) is refused with 400 (checkQuery; customer_id, the
// admin API's, before it, with a sentence of its own: refuseCustomerID),
// and so, before
// the key is looked for, is a query string that does not parse whole
// (QueryStringError).
func (c *Self) Routes(r chi.Router) {
	get := func(pattern string, h http.HandlerFunc, mw ...func(http.Handler) http.Handler) {
		mw = append([]func(http.Handler) http.Handler{private, checkQueryString, c.authenticate, refuseCustomerID,
			checkQuery("GET "+pattern, "key")}, mw...)
		r.With(mw...).Get(pattern, h)
		r.With(mw...).Head(pattern, h) // as GET, the body dropped by net/http (RFC 9110, 9.3.2)
	}
	get("/v1/usage", c.usage)
	get("/v1/balance", c.balance)
	get("/v1/key", c.key)
	get("/v1/keys", c.listKeys)
	get("/v1/statements/{period}", c.statement)
	get("/v1/requests", c.requests)
	get("/v1/requests/{id}", c.request, c.reads.validID("request"))
}

// selfKey is the context key of the caller's customer id; selfKeyID of
// the id of the key it sent.
type (
	selfKey   struct{}
	selfKeyID struct{}
)

// refuseCustomerID refuses (400, ledger.EInvalid) a customer API request
// naming a customer_id: the admin API's parameter, which a customer
// might send expecting it to choose whose data it reads; the customer
// API reads only its caller's.
func refuseCustomerID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("customer_id") {
			writeError(w, ledger.EInvalid, "customer_id: not taken here: this API shows your own usage and requests, those of the customer whose key you send")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// customerSecret is the key a request to the customer API sends, read as
// the LLM routes read it (gateway: customerKey), so that the key a client
// already sends works here too: "Authorization: Bearer <key>" (the scheme
// in any case, RFC 9110 section 11.1), else the first of x-api-key
// (Anthropic's SDKs), x-goog-api-key or ?key= (Google's) that is present.
// It returns "" when there is none.
func customerSecret(r *http.Request) string {
	if k, ok := bearer(r); ok && k != "" {
		return k
	}
	for _, k := range []string{r.Header.Get("X-Api-Key"), r.Header.Get("X-Goog-Api-Key"), r.URL.Query().Get("key")} {
		if k = strings.TrimSpace(k); k != "" {
			return k
		}
	}
	return ""
}

func (c *Self) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, ok := c.keys.LookupKey(customerSecret(r))
		customer := k.CustomerID
		if !ok || k.ExpiredAt(time.Now()) {
			writeEnvelope(w, http.StatusUnauthorized, "invalid_api_key",
				"incorrect, revoked, expired or missing API key (send it as Authorization: Bearer tg-…, x-api-key, x-goog-api-key or ?key=)")
			return
		}
		slots, held := c.begin(r.Context(), customer)
		if held != heldBoth {
			c.end(customer, slots, held)
			w.Header().Set("Retry-After", "1")
			msg := fmt.Sprintf("%d requests of this customer to the customer API are being answered; retry when one has ended", SelfQueriesPerCustomer)
			if held == heldOwn {
				msg = "the customer API is answering as many requests as the ledger database can spare; retry shortly"
			}
			writeEnvelope(w, http.StatusTooManyRequests, "rate_limit_exceeded", msg)
			return
		}
		limit := c.QueryTimeout
		if limit <= 0 {
			limit = SelfQueryTimeout
		}
		ctx, cancel := context.WithTimeoutCause(context.WithValue(contextWith(r, selfKey{}, customer), selfKeyID{}, k.KeyID), limit, &ledger.Error{Code: ledger.EUnavailable,
			Message: fmt.Sprintf("the query did not finish within %s: ask for a narrower range (from, to) or a coarser group_by", limit)})
		// The answer is made in memory under the slots, which bound reads
		// of the ledger, and written to the client after they are given
		// back, within SelfWriteTimeout: written under them, a client that
		// read nothing held them for as long as it kept its connection, and
		// two customers doing so kept every other one out (429).
		ans := NewRecorder(w.Header())
		func() {
			defer c.end(customer, slots, held)
			defer cancel()
			next.ServeHTTP(ans, r.WithContext(ctx))
		}()
		sendAnswer(w, ans)
	})
}

// SelfWriteTimeout bounds the write of a customer API answer to its
// client: one that takes nothing for this long is taken as gone.
const SelfWriteTimeout = 60 * time.Second

// sendAnswer writes ans, a customer API answer made in memory (the
// answers are bounded: a page of at most 1000 requests, a month's
// statement), to w, the connection's write deadline SelfWriteTimeout from
// now (then cleared, for the connection's next request).
func sendAnswer(w http.ResponseWriter, ans *Recorder) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(SelfWriteTimeout))
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	if ans.Status != 0 { // else net/http's 200, with the body or none
		w.WriteHeader(ans.Status)
	}
	if ans.Body.Len() > 0 {
		_, _ = w.Write(ans.Body.Bytes())
	}
}

// held is what begin obtained: nothing (the customer's slots were all
// taken), the customer's slot only (the slots of all customers were), or
// both.
type held int

const (
	heldNone held = iota
	heldOwn
	heldBoth
)

// begin waits for one of customer's slots, then for one of all customers'
// (c.all), for up to the queue timeout in all or until ctx ends; heldBoth
// says it has both. end gives back what it holds, whatever begin returned.
func (c *Self) begin(ctx context.Context, customer string) (slots *customerSlots, h held) {
	c.mu.Lock()
	slots = c.slots[customer]
	if slots == nil {
		slots = &customerSlots{sem: make(chan struct{}, SelfQueriesPerCustomer)}
		c.slots[customer] = slots
	}
	slots.users++
	c.mu.Unlock()
	wait := c.QueueTimeout
	if wait <= 0 {
		wait = SelfQueueTimeout
	}
	var t *time.Timer // started only when a wait is needed
	take := func(sem chan struct{}) bool {
		select {
		case sem <- struct{}{}:
			return true
		default:
		}
		if t == nil {
			t = time.NewTimer(wait)
		}
		select {
		case sem <- struct{}{}:
			return true
		case <-ctx.Done():
		case <-t.C:
		}
		return false
	}
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	if !take(slots.sem) {
		return slots, heldNone
	}
	if !take(c.all) {
		return slots, heldOwn
	}
	return slots, heldBoth
}

func (c *Self) end(customer string, slots *customerSlots, h held) {
	if h == heldBoth {
		<-c.all
	}
	if h >= heldOwn {
		<-slots.sem
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if slots.users--; slots.users == 0 {
		delete(c.slots, customer)
	}
}

// selfGroupings are the group_by values of GET /v1/usage: the admin API's
// but customer, deployment and provider.
var selfGroupings = []string{"model", "key", "hour", "day", "month", "end_user"}

// usage serves GET /v1/usage: the admin usage query, pinned to the key's
// customer (customer_id may not be given, and key_id filters within it).
func (c *Self) usage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch g := q.Get("group_by"); {
	case g == "customer" || g == "deployment" || g == "provider":
		// customer_id is refused before (refuseCustomerID).
		writeError(w, ledger.EInvalid, "group_by: customer, deployment and provider are not available here: this API shows your own usage")
		return
	case g != "" && !slices.Contains(selfGroupings, g):
		// The ledger's own message would list the admin-only groupings too.
		writeError(w, ledger.EInvalid, fmt.Sprintf("group_by: %q is not one of %s", g, strings.Join(selfGroupings, ", ")))
		return
	}
	q.Set("customer_id", r.Context().Value(selfKey{}).(string))
	r.URL.RawQuery = q.Encode()
	c.reads.usage(w, r)
}

func (c *Self) balance(w http.ResponseWriter, r *http.Request) {
	b, err := c.reads.store.Balance(r.Context(), r.Context().Value(selfKey{}).(string))
	c.reads.respond(w, r, http.StatusOK, b, err)
}

// key serves GET /v1/key: the key the request was sent with (ledger.Key,
// as GET /v1/keys lists it): its limits and, when it has a daily or
// monthly limit, what it has spent of them today and this month (UTC).
// The portal reads it for the signed-in key's cards.
func (c *Self) key(w http.ResponseWriter, r *http.Request) {
	k, err := c.reads.store.Key(r.Context(), r.Context().Value(selfKeyID{}).(string))
	c.reads.respond(w, r, http.StatusOK, k, err)
}

// listKeys serves GET /v1/keys: the caller's customer's keys, oldest first,
// a page at a time (limit 1 to ledger.MaxKeyLimit, 1000 by default;
// cursor is the previous page's next_cursor), as the admin API's
// GET /admin/v1/customers/{id}/keys answers them: names, prefixes,
// limits and a limited key's spend of them (ledger.Key), never a secret
// (the ledger keeps only their hashes).
func (c *Self) listKeys(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	kq := ledger.KeyQuery{Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		var err error
		if kq.Limit, err = intParam("limit", l, 1, ledger.MaxKeyLimit); err != nil {
			c.reads.fail(w, r, err)
			return
		}
	}
	page, err := c.reads.store.KeysPage(r.Context(), r.Context().Value(selfKey{}).(string), kq)
	c.reads.respond(w, r, http.StatusOK, page, err)
}

// request serves GET /v1/requests/{id}: one of the customer's requests
// (its id is the X-Request-Id it was answered with) as the ledger stored
// it. Another customer's request is not found, as an unknown one is:
// both are "request <id> not found" (ledger.ENotFound).
func (c *Self) request(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	e, err := c.reads.store.Event(r.Context(), id)
	var le *ledger.Error
	if (err == nil && e.CustomerID != r.Context().Value(selfKey{}).(string)) || (errors.As(err, &le) && le.Code == ledger.ENotFound) {
		err = &ledger.Error{Code: ledger.ENotFound, Message: "request " + id + " not found"}
	}
	c.reads.respond(w, r, http.StatusOK, customerRequest{RatedEvent: e}, err)
}

// customerRequest is a request as its customer sees it (OpenAPI
// CustomerRequest): the ledger's RatedEvent without the operator's routing.
// The empty fields below, with omitempty, hide the event's own of the same
// JSON names (encoding/json takes the least nested).
type customerRequest struct {
	ledger.RatedEvent
	Provider   string `json:"provider,omitempty"`
	Deployment string `json:"deployment,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
}

// customerRequestPage is ledger.RequestPage as its customer sees it.
type customerRequestPage struct {
	Data       []customerRequest `json:"data"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

// requests serves GET /v1/requests?from=&to=&key_id=&model=&end_user=
// &limit=&cursor=: the customer's requests, newest first
// (ledger.Store.Requests). A key_id of another customer's finds nothing.
func (c *Self) requests(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rq := ledger.RequestQuery{CustomerID: r.Context().Value(selfKey{}).(string), KeyID: q.Get("key_id"),
		Model: q.Get("model"), EndUser: q.Get("end_user"), Cursor: q.Get("cursor")}
	var err error
	if q.Get("limit") != "" {
		if rq.Limit, err = intParam("limit", q.Get("limit"), 1, 1000); err != nil {
			c.reads.fail(w, r, err)
			return
		}
	}
	if rq.From, rq.To, err = optionalRange(r); err != nil {
		c.reads.fail(w, r, err)
		return
	}
	page, err := c.reads.store.Requests(r.Context(), rq)
	out := customerRequestPage{Data: make([]customerRequest, len(page.Data)), NextCursor: page.NextCursor}
	for i, e := range page.Data {
		out.Data[i].RatedEvent = e
	}
	c.reads.respond(w, r, http.StatusOK, out, err)
}

// statement serves GET /v1/statements/{period}?format=json|csv: the key's
// customer's statement for a UTC month ("2026-01"), as the admin API
// answers it for that customer.
func (c *Self) statement(w http.ResponseWriter, r *http.Request) {
	c.reads.writeStatement(w, r, r.Context().Value(selfKey{}).(string), chi.URLParam(r, "period"))
}
