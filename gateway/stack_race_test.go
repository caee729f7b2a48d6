//go:build race

package gateway_test

// streamStackLimit is the stack TestStreamStack holds a stream's handler
// to. The race detector's instrumentation makes every frame bigger, so a
// race build checks against twice the 8 KiB of a normal one.
const streamStackLimit = 16 << 10
