//go:build unix

package gateway

import "syscall"

// openFilesLimit is the process's soft RLIMIT_NOFILE, in descriptors; an
// unreadable or unbounded one counts as 1<<20.
func openFilesLimit() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		return 1 << 20
	}
	return int(lim.Cur)
}
