// Package sim is a deterministic OpenAI-compatible Chat Completions provider
// for demos, tests and benchmarks. Everything it reports follows from the
// request, so a test can compute the usage a correct gateway must record, and
// GET /stats gives the ground truth of what the simulator billed.
//
// Use it in-process with httptest.NewServer(sim.New()) or run
// cmd/upstream-sim.
//
// # Endpoints
//
//   - POST /v1/chat/completions: streamed ("stream":true, SSE) or not.
//   - GET /v1/models and GET /v1/models/{model}: sim-small, sim-cache,
//     sim-reasoning, sim-pro; any other model name is accepted too.
//   - GET /stats: the counters in [Stats]; POST /stats/reset zeroes them.
//
// # Deterministic rules
//
// Prompt tokens ([PromptTokens]): each message counts 4 plus the number of
// whitespace-separated words in its text content (a string, or the "text"
// of every {"type":"text"} part of a content array; other parts, names and
// tool calls count 0); the request adds 3.
//
// Completion tokens: max_completion_tokens if set, else max_tokens if set,
// else [DefaultCompletionTokens] (16). finish_reason is "length" when the
// length came from max_completion_tokens or max_tokens (the simulated model
// always wants to say more than any cap) and "stop" when the default applied.
//
// Content: one token is the word "tok " (4 bytes, trailing space), so the
// content is "tok " repeated completion_tokens - reasoning_tokens times.
//
// Profiles, by case-insensitive substring of the model name: "cache" (and
// "sim-pro") report prompt_tokens_details.cached_tokens = prompt_tokens/2;
// "reason" (and "sim-pro") report completion_tokens_details.reasoning_tokens
// = completion_tokens/2, which are counted in completion_tokens but not
// streamed. Integer division throughout.
//
// The completion id is "chatcmpl-" plus the first 24 hex digits of the
// SHA-256 of the request body ([CompletionID]): identical bodies get
// identical ids. "created" is the server clock in Unix seconds ([WithClock]).
//
// # Stream shape
//
// As OpenAI sends it: a first chunk with delta {"role":"assistant",
// "content":"","refusal":null}, the content chunks, a finish chunk with an
// empty delta and finish_reason, then, only when stream_options.include_usage
// is true, a usage chunk with "choices":[]; then data: [DONE]. When
// include_usage is true every earlier chunk carries "usage":null; otherwise
// no chunk has a usage key. Content-Type is text/event-stream and every frame
// is flushed.
//
// # Controls
//
// Per request, from the body's metadata object (string values, so they pass
// through a gateway) or from headers (the header wins when both are set):
//
//   - sim_chunks / X-Sim-Chunks: number of content chunks (default: one per
//     token; capped at the number of content tokens). Tokens are spread
//     evenly, the first chunks taking one extra.
//   - sim_delay_ms / X-Sim-Delay-Ms: milliseconds slept before each content
//     chunk and before the finish chunk.
//   - sim_status / X-Sim-Status: respond with this HTTP status (400-599) and
//     an OpenAI error envelope, before anything else (it wins over faults).
//   - sim_fault / X-Sim-Fault: comma-separated fault modes, at most one of
//     the first four:
//     disconnect_after:N (abort the connection after N content chunks: no
//     finish chunk, usage or [DONE]); error_after:N (after N content chunks
//     send data: {"error":{...,"type":"server_error","code":null}} then
//     [DONE]); stall (send the first chunk, then block until the request
//     context ends); stall_before (block before the response headers);
//     no_usage (never any usage key, even if asked); usage_in_finish (full
//     usage on the finish chunk and no usage chunk, whatever include_usage
//     says); cumulative_usage (every chunk carries the usage so far, the
//     finish chunk the final one; the usage chunk still follows when asked);
//     no_done (omit data: [DONE]). N is capped at the number of content
//     chunks. Non-streamed requests honour only stall and stall_before.
//
// Invalid JSON, a missing model, missing messages, a non-positive or too
// large token cap and invalid control values get a 400 error envelope.
//
// # Stats semantics
//
// A request is counted once, when it ends, under one outcome of
// [RequestStats]. Tokens are what the simulator billed:
//
//   - ok (streamed or not, any of no_usage, usage_in_finish,
//     cumulative_usage, no_done): the full usage, reported or not.
//   - stream_error (error_after), disconnected (disconnect_after), canceled
//     (client went away mid-stream), stalled (stall): once the first chunk
//     was written, prompt_tokens and cached_tokens in full, reasoning_tokens
//     in full (reasoning precedes content), and completion_tokens =
//     reasoning_tokens + the content tokens in chunks actually written.
//   - bad_request, status (sim_status), stalled before the first chunk
//     (stall_before, non-streamed stall), canceled before the first chunk:
//     zero tokens.
//
// # Example
//
//	curl -N localhost:9090/v1/chat/completions -H 'X-Sim-Chunks: 4' \
//	  -d '{"model":"sim-pro","stream":true,"stream_options":{"include_usage":true},
//	       "max_tokens":8,"messages":[{"role":"user","content":"say hi"}],
//	       "metadata":{"sim_delay_ms":"50"}}'
//
// streams 4 content tokens ("tok tok tok tok ") in 4 chunks, 50 ms apart,
// with finish_reason "length" and usage prompt_tokens=9 (4+2+3),
// cached_tokens=4, completion_tokens=8, reasoning_tokens=4.
package sim
