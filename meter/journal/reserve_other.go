//go:build !linux

package journal

import "os"

// reserve reserves nothing where fallocate is not there (see
// reserve_linux.go).
func reserve(*os.File, int64) {}

// diskSize is 0, unknown, where statfs is not used (see reserve_linux.go):
// segments are compacted at maxSegment.
func diskSize(string) int64 { return 0 }
