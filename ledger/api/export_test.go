package api

import "time"

// SetExportWait sets how long an export's write may wait for its client
// (ExportWriteTimeout by default), for tests that cannot wait a minute.
func SetExportWait(a *Admin, d time.Duration) { a.exportWait = d }
