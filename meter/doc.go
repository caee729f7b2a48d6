// Package meter moves usage events from the gateways into the ledger,
// exactly once, through NATS JetStream:
//
//   - Publisher (publish.go) publishes an event on the usage stream
//     (TOLLGATE_USAGE, subject tollgate.usage.v1) with its id as
//     Nats-Msg-Id and waits for the PubAck, or, while another publish
//     waits for its own, in the next message with the events that came
//     meanwhile (a group, group.go); when JetStream does not answer
//     it writes the event to a local Spool, which a Republisher drains once
//     NATS is back. The gateway reaches it through its event sink, wired
//     in cmd/tollgate (the event is meter/usage's), and answers its client
//     only once the event is durable.
//   - Worker (worker.go, pull.go, grouped.go) consumes the stream with a durable pull
//     consumer, writes each batch into a Store (the ledger) in one
//     transaction per write lane, and acknowledges the events only after
//     the commit. An event no retry can store goes to the dead-letter
//     stream (TOLLGATE_USAGE_DLQ, dlq.go) with its reason; nothing is
//     dropped. Crashed estimates are held back until the exact events
//     before them are written (estimates.go); the stream is trimmed below
//     the consumer's ack floor (trim.go).
//   - Service (service.go) runs the workers and sets the stream and
//     consumer up again when NATS loses its store; Embedded
//     (embedded_server.go) runs a JetStream server in process for tollgate serve.
//
// Each long-lived component has a stop that waits for its goroutines.
// Settings and their defaults are in Config (config.go), documented in
// docs/configuration.md.
package meter
