//go:build !unix

package gateway

// openFilesLimit is the descriptors a process may hold where there is no
// RLIMIT_NOFILE (Windows: handles are bounded by memory): 1<<20, as for
// an unbounded limit on Unix.
func openFilesLimit() int { return 1 << 20 }
