//go:build !linux

package journal

import "os"

// reserve reserves nothing where fallocate is not there (see
// reserve_linux.go).
func reserve(*os.File, int64) {}
