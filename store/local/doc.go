// Package local is the default store.Store: the files of a warren home,
// written exactly as before the store package existed.
//
// # Layout (unchanged)
//
//	<home>/daemon.lock                the flock owning the home (Lock)
//	<home>/daemon.pid                 the pid of the lock's holder (written by the daemon)
//	<home>/user.jsonl                 the USER inbox log (store.UserID)
//	<home>/agents/<id>/events.jsonl   an agent's log (eventlog's format, eventlog/doc.go)
//	<home>/agents/<id>/events.pending its pending-file WAL while busy
//	<home>/agents/<id>/session.json   its snapshot (session.Store, atomicfile)
//
// Every log operation is eventlog's, every snapshot operation session's
// (through atomicfile), all through the faultfs.FS the store is given, so
// the crash tests that cut power at any file operation cover this store
// unchanged. Position hints (eventlog.Entry.Off, Resume.Off) are byte
// offsets in the log file.
//
// # Ownership
//
// One daemon owns the whole home through the exclusive flock on
// daemon.lock (Lock). Own therefore claims nothing: every lease has the
// constant epoch 1, never expires and is never lost. A second daemon on
// the same home fails at Lock (ErrLocked), which is this store's fence.
package local
