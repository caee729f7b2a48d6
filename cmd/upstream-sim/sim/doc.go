// Package sim is a deterministic LLM provider for demos, tests and
// benchmarks. It speaks three wire protocols natively: OpenAI Chat
// Completions, Anthropic Messages and Gemini generateContent. Everything it
// reports follows from the request, so a test can compute the usage a correct
// gateway must record, and GET /stats gives the ground truth of what the
// simulator billed. One protocol-neutral core (request figures, chunk plan,
// pacing, faults, billing) drives one encoder per protocol.
//
// Use it in-process with httptest.NewServer(sim.New()) or run
// cmd/upstream-sim.
//
// # Endpoints
//
//   - POST /v1/chat/completions: OpenAI, streamed ("stream":true) or not.
//   - POST /v1/messages, also as /anthropic/v1/messages: Anthropic,
//     streamed ("stream":true) or not.
//   - POST /v1beta/models/{model}:generateContent and
//     /v1beta/models/{model}:streamGenerateContent?alt=sse, also under
//     /gemini: Gemini, not streamed and streamed (only alt=sse streams; a
//     stream without it is a 400; other methods are a 404).
//   - GET /v1/models and GET /v1/models/{model}: sim-small, sim-cache,
//     sim-reasoning, sim-pro; any other model name is accepted too.
//   - POST /v1/responses: OpenAI's Responses API, streamed or not (see
//     [ResponsesUsage]).
//   - POST /v1/embeddings (OpenAI) and :embedContent / :batchEmbedContents
//     (Gemini): deterministic vectors, billed by input words (see
//     [EmbeddingTokens]).
//   - POST /v1/completions: OpenAI's legacy completions, streamed or not
//     (see [CompletionUsage]).
//   - POST /v1/messages/count_tokens (Anthropic) and :countTokens
//     (Gemini): the prompt's tokens, not counted in /stats.
//   - Any of these under /d/{name}/ (e.g. /d/east/v1/chat/completions): a
//     deployment of a gateway's, counted apart in Stats.ByDeployment and
//     subject to its [Faults], set with POST /d/{name}/faults or
//     [Server.SetFaults].
//   - GET /stats: [Stats]; POST /stats/reset zeroes the counters.
//
// # Deterministic rules
//
// Prompt tokens: 3, plus for each message 4 plus the number of
// whitespace-separated words of its text. Text is a string content, or the
// "text" of every {"type":"text"} part or block of a content array (other
// parts, blocks, names and tool calls count 0); for Gemini, the text of every
// part of a content's parts except {"thought":true} parts. Anthropic's
// "system" (a string or text blocks; counted when present and not null) and
// Gemini's "systemInstruction" count as one more message. See
// [PromptTokens], [ExpectedUsage], [ExpectedAnthropicUsage] and
// [ExpectedGeminiUsage].
//
// Completion tokens:
//
//   - OpenAI: max_completion_tokens if set, else max_tokens if set, else
//     [DefaultCompletionTokens] (16); finish_reason "length" when a cap set
//     the length (the simulated model always wants to say more than any
//     cap), "stop" when the default applied.
//   - Anthropic: max_tokens is required (400 without it) and is a ceiling:
//     the model wants to write 16 tokens, so the completion is
//     min(max_tokens, 16), with stop_reason "max_tokens" when max_tokens < 16
//     and "end_turn" otherwise. Anthropic streams are thus at most 16 tokens.
//   - Gemini: generationConfig.maxOutputTokens if set (finishReason
//     "MAX_TOKENS"), else 16 ("STOP").
//
// Profiles, by case-insensitive substring of the model name: "cache" (and
// "sim-pro") read prompt/2 tokens from the cache; "reason" (and "sim-pro")
// spend completion/2 tokens on reasoning, which count in the completion and
// come before the content. Integer division throughout. The content is
// [TokenText] ("tok ") repeated completion - reasoning times; reasoning
// text, where a protocol shows it, is TokenText repeated reasoning times.
//
// How [Usage] appears on the wire:
//
//   - OpenAI: prompt_tokens, prompt_tokens_details.cached_tokens,
//     completion_tokens, completion_tokens_details.reasoning_tokens,
//     total_tokens. Reasoning is not streamed.
//   - Anthropic: input_tokens = prompt - cached, cache_read_input_tokens =
//     cached, cache_creation_input_tokens = 0, output_tokens = completion.
//     Reasoning is a thinking block whose words are the reasoning tokens;
//     output_tokens includes them and nothing reports them apart.
//   - Gemini: promptTokenCount = prompt, cachedContentTokenCount = cached,
//     thoughtsTokenCount = reasoning, candidatesTokenCount = completion -
//     reasoning, totalTokenCount = prompt + completion. Thought parts
//     ({"text":...,"thought":true}) are sent only when
//     generationConfig.thinkingConfig.includeThoughts is true; the counts
//     are the same either way. thinkingBudget is ignored.
//
// Ids ([ResponseID]): the first 24 hex digits of the SHA-256 of the request
// body, after "chatcmpl-" (OpenAI) or "msg_" (Anthropic), bare as Gemini's
// responseId. OpenAI's "created" is the server clock in Unix seconds
// ([WithClock]).
//
// # Stream shapes
//
// Content-Type is text/event-stream and every frame is flushed. The frames
// that open a stream (below) are written at once.
//
// OpenAI: a first chunk with delta {"role":"assistant","content":"",
// "refusal":null}, the content chunks, a finish chunk with an empty delta
// and finish_reason, then, only when stream_options.include_usage is true, a
// usage chunk with "choices":[]; then data: [DONE]. When include_usage is
// true every earlier chunk carries "usage":null; otherwise no chunk has a
// usage key.
//
// Anthropic ("event: X\ndata: {...}\n\n"): opening message_start (usage with
// output_tokens 1), ping, then for reasoning models a thinking block at index
// 0 (content_block_start, one thinking_delta with all the reasoning, a
// signature_delta of [ThinkingSignature], content_block_stop), then
// content_block_start of the text block; then one text_delta per content
// chunk; then content_block_stop, message_delta (stop_reason and the final
// usage: input, cache and cumulative output_tokens) and message_stop.
//
// Gemini ("data: {GenerateContentResponse}\r\n\r\n", no [DONE]): opening
// with one thought chunk when thoughts are shown, else nothing (the stream
// opens with its headers); then one chunk per content chunk, the last with
// finishReason. Every chunk carries the cumulative usageMetadata
// (candidatesTokenCount absent while 0), modelVersion and responseId.
//
// # Controls
//
// Per request, from headers or from the body, the header winning: OpenAI's
// metadata object (string values, so they pass through a gateway);
// Anthropic's metadata.user_id, as "sim_chunks=3;sim_fault=error_after:2"
// (";"-separated key=value pairs; pairs whose key does not start with "sim_"
// are ignored, so an ordinary user id carries no controls); Gemini's
// "labels" map (it has no metadata).
//
//   - sim_chunks / X-Sim-Chunks: number of content chunks (default: one per
//     content token; capped at the number of content tokens). Tokens are
//     spread evenly, the first chunks taking one extra.
//   - sim_delay_ms / X-Sim-Delay-Ms: milliseconds slept before each content
//     chunk and before the finish frames (OpenAI's finish chunk, Anthropic's
//     content_block_stop; Gemini has none).
//   - sim_served_model / X-Sim-Served-Model: the model name the response
//     reports instead of the one asked for (OpenAI's "model" on every chunk
//     and completion, Anthropic's message "model", Gemini's "modelVersion"):
//     any non-empty string, written by encoding/json, so a NUL goes out as
//     \u0000 and invalid UTF-8 as U+FFFD (a header cannot carry a NUL; the
//     body's controls can). The usage profile still follows the model asked
//     for, and /stats bills as without it.
//   - sim_status / X-Sim-Status: respond with this HTTP status (400-599) and
//     the protocol's error envelope, before anything else (it wins over
//     faults). 429 and 503 also get Retry-After: 1.
//   - sim_tool_call / X-Sim-Tool-Call (Chat Completions): answer with a
//     call of this function ("1" or "true": the request's first tool)
//     instead of content; its arguments are {"text":"tok tok …"}, one "tok "
//     per content token, so the usage is as without it; finish_reason
//     "tool_calls".
//   - sim_fault / X-Sim-Fault: comma-separated fault modes, at most one of
//     the first four. N is capped at the number of content chunks.
//     Non-streamed requests honour only stall and stall_before.
//
// Fault modes:
//
//   - disconnect_after:N: abort the connection after N content chunks, with
//     no finish frames (and, for Gemini, no finishReason).
//   - error_after:N: after N content chunks, end with an error. OpenAI:
//     data: {"error":{...,"type":"server_error","code":null}} then [DONE].
//     Anthropic: event: error with an overloaded_error (no message_delta or
//     message_stop). Gemini: a pretty-printed {"error":{"code":503,
//     "status":"UNAVAILABLE",...}} body with no data: framing, then the end
//     of the response (no chunk has a finishReason).
//   - stall: send the opening frames, then block until the request context
//     ends. stall_before: block before the response headers.
//   - no_usage: no usage anywhere (OpenAI: no usage key, even if asked;
//     Anthropic: no usage in message_start or message_delta; Gemini: no
//     usageMetadata).
//   - usage_in_finish: OpenAI: full usage on the finish chunk and no usage
//     chunk, whatever include_usage says. Gemini: usageMetadata on the last
//     chunk only. Anthropic: no effect (it reports the final usage in
//     message_delta anyway).
//   - cumulative_usage: OpenAI: every chunk carries the usage so far, the
//     finish chunk the final one; the usage chunk still follows when asked.
//     Gemini: no effect (it does so anyway). Anthropic: a 400.
//   - no_done: omit OpenAI's data: [DONE] or Anthropic's message_stop;
//     Gemini: no effect (it has no end marker).
//   - usage_in_error: OpenAI: error_after's error frame also carries a
//     top-level "usage" (as OpenRouter's does): the usage /stats bills for
//     the request (prompt and cached in full, completion = reasoning + the
//     content tokens written), whatever include_usage says; no_usage wins.
//     Anthropic and Gemini: no effect.
//   - negative_usage: OpenAI: every usage object the response carries (the
//     usage chunk, the finish chunk under usage_in_finish, every chunk under
//     cumulative_usage, the non-streamed body, usage_in_error's frame)
//     reports each count negated: prompt_tokens, completion_tokens,
//     total_tokens, cached_tokens and reasoning_tokens, as a hostile
//     upstream might. /stats bills what the request really produced, as
//     without it. Anthropic and Gemini: no effect.
//
// # Errors
//
// Invalid JSON, a missing model, missing messages or contents, a missing
// Anthropic max_tokens, a non-positive or too large token cap and invalid
// control values get a 400 in the protocol's envelope: OpenAI's
// {"error":{"message","type","param","code"}}, Anthropic's
// {"type":"error","error":{"type","message"}} (type by status:
// invalid_request_error, authentication_error, permission_error,
// not_found_error, request_too_large, rate_limit_error, api_error,
// overloaded_error for 529), Gemini's pretty-printed
// {"error":{"code","message","status"}} (INVALID_ARGUMENT, UNAUTHENTICATED,
// PERMISSION_DENIED, NOT_FOUND, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE,
// ...). Unknown URLs get a 404 in the envelope their prefix suggests.
//
// # Stats semantics
//
// /stats counts the three protocols together ([Stats] embeds [Counts]) and
// apart (Stats.ByProtocol, whose parts sum to the whole). Tokens are in the
// neutral terms of [Usage], whatever the protocol reported. A request is
// counted once, when it ends, under one outcome of [RequestStats]:
//
//   - ok (streamed or not, any of no_usage, usage_in_finish,
//     cumulative_usage, no_done, negative_usage, sim_served_model): the
//     full usage, reported or not, and whatever the figures reported.
//   - stream_error (error_after), disconnected (disconnect_after), canceled
//     (client went away mid-stream), stalled (stall): once the opening
//     frames were written (for Gemini without thought parts, once the 200
//     headers were flushed), the prompt and cached tokens in full, the
//     reasoning tokens in full (reasoning precedes content), and completion
//     = reasoning + the content tokens in chunks actually written.
//   - bad_request, status (sim_status), stalled before the stream opened
//     (stall_before, non-streamed stall), canceled before it opened: zero
//     tokens.
//
// Stats.HTTP2Requests counts the requests that came over HTTP/2 (the
// command serves cleartext HTTP/2 with prior knowledge beside HTTP/1.1), so
// that a test or benchmark can tell how a gateway reached the simulator.
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
// cached_tokens=4, completion_tokens=8, reasoning_tokens=4. The same request
// to /v1/messages (with "max_tokens":8) reports input_tokens=5,
// cache_read_input_tokens=4, output_tokens=8 and streams the 4 reasoning
// tokens as a thinking block; to
// /v1beta/models/sim-pro:streamGenerateContent?alt=sse (contents
// [{"parts":[{"text":"say hi"}]}], generationConfig {"maxOutputTokens":8})
// it reports promptTokenCount=9, cachedContentTokenCount=4,
// candidatesTokenCount=4, thoughtsTokenCount=4, totalTokenCount=17.
package sim
