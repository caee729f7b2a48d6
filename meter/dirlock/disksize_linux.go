package dirlock

import "golang.org/x/sys/unix"

// DiskSize is the size in bytes of the file system holding dir (statfs),
// 0 when it cannot be known. The crash journal and the spool size their
// segments to it: on a disk smaller than a segment, the records sent or
// ended stayed on it until they filled it.
func DiskSize(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Blocks) * st.Bsize
}
