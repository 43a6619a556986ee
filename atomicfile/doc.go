// Package atomicfile replaces whole files crash-safely: after a crash at any
// point (process kill or power loss) a file written with Write holds exactly
// its old content or exactly its new content, never a mix, a prefix or
// nothing. Readers just read the file; they never see a temp.
//
// # Protocol
//
// Write(fsys, path, data, perm) does, in this order:
//
//  1. create a unique temp file "<base>.tmp-<16 random hex digits>" in the
//     same directory as path, with O_CREATE|O_EXCL (so two writers, or a
//     stale temp from an earlier crash, are never shared or truncated; on the
//     rare name collision it draws a new name);
//  2. write all of data to it;
//  3. fsync it, so its content is durable before its name can be;
//  4. close it;
//  5. rename it over path (atomic: readers see old or new);
//  6. fsync the directory, so the rename itself is durable.
//
// Write returns nil only after step 6: the new content is then durable. If a
// step before the rename fails, the temp is removed (best effort) and path is
// untouched. If the directory fsync fails, path already shows the new
// content but it may not survive a power loss; the error says so.
//
// A crash can leave a temp behind (its name was never renamed). Temps are
// never read; CleanTemps(fsys, dir) removes them and fsyncs the directory.
// Call it at startup, before any Write into that directory runs, since it
// cannot tell a stale temp from one a concurrent Write is filling.
//
// The directory itself must already exist durably; Write does not create it.
package atomicfile
