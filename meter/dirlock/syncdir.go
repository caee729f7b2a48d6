package dirlock

import "os"

// SyncDir fsyncs the directory dir, so that the files created, renamed or
// removed in it last are on disk (the spool's and the crash journal's
// segments). It returns the open's or the sync's error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
