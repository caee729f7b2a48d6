//go:build !race

package gateway_test

// streamStackLimit is the stack TestStreamStack holds a stream's handler
// to: 8 KiB, the runtime's smallest but one, which an idle stream keeps
// for its whole life.
const streamStackLimit = 8 << 10
