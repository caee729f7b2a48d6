// Package web serves Tollgate's two browser interfaces, rendered on the
// server with html/template and embedded with go:embed (no script, nothing
// fetched from elsewhere):
//
//   - Console, the operators' console at /console/ on the admin listener:
//     sign in with the admin token; every read and write goes through the
//     admin API (ledger/api) in-process, with the token the operator
//     signed in with, as the CLI's calls do.
//   - Portal, the customers' portal at /portal/ on the LLM listener: sign in
//     with one of the customer's API keys; every read goes through the
//     customer API (GET /v1/usage, /v1/balance, /v1/requests,
//     /v1/statements/{period}) in-process with that key, so a customer sees
//     what the API shows it and nothing else.
//
// Sessions live in the server's memory (a restart signs everyone out): the
// browser holds only a random session id in an HttpOnly, SameSite=Strict
// cookie; the token or key stays on the server. Every form that writes
// carries the session's CSRF token, compared in constant time, and a POST
// whose Origin names another host is refused. docs/console.md describes
// the pages and the security model.
package web
