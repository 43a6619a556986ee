//go:build !nocluster

package daemon

import (
	"crypto/ed25519"
	"fmt"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/remote"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
)

// natsUsers is who may connect to the daemon's embedded NATS server
// (natsembed.Users): the daemon, by the key it started with or the one
// the home's workers.json holds now (a node given the cluster's copy of
// the file keeps its connection), with every permission; and each worker
// with a token, by its key, held to its own subjects
// (remote.WorkerSubjects). A worker may answer the requests made to it
// for as long as a turn may run. Nobody else: a client without a key, or
// with one the file does not list, is refused (the server logs it).
func natsUsers(boot ed25519.PrivateKey, keys func() (remote.Keys, error), log hclog.Logger) natsembed.Users {
	bootKey := natsembed.NkeyOf(boot.Public().(ed25519.PublicKey))
	return func(nkey string) (string, *server.Permissions, bool) {
		if nkey == bootKey {
			return "daemon", nil, true
		}
		k, err := keys()
		if err != nil {
			log.Error("cannot read the workers' keys; refusing a NATS client", "err", err)
			return "", nil, false
		}
		if k.Daemon != nil && nkey == natsembed.NkeyOf(k.Daemon.Public().(ed25519.PublicKey)) {
			return "daemon", nil, true
		}
		for id, pub := range k.Workers {
			if nkey == natsembed.NkeyOf(pub) {
				pubs, subs := remote.WorkerSubjects(id)
				return "worker " + id, &server.Permissions{
					Publish:   &server.SubjectPermission{Allow: pubs},
					Subscribe: &server.SubjectPermission{Allow: subs},
					Response:  &server.ResponsePermission{MaxMsgs: 1, Expires: workerAnswerFor},
				}, true
			}
		}
		return "", nil, false // the server logs the refusal (natsembed: once a minute)
	}
}

// workerAnswerFor is how long a worker may take to answer a request
// made to it: a send is answered when its turn ends.
const workerAnswerFor = 24 * time.Hour

// keysPoll is how often watchKeys looks at the keys file.
const keysPoll = 2 * time.Second

// watchKeys drops the clients of srv whose key the keys file at path no
// longer lets in (natsembed.DropRefused), each time the file changes
// (looked at every keysPoll): a worker whose token was issued again, or
// taken out, loses the permissions of its old connection then, not at
// its next reconnection. The file is read once per change, and a file
// that cannot be read drops nobody (it is read again at the next look).
// boot is the key the daemon started with, which stays let in. stop ends
// the watch.
func watchKeys(srv *server.Server, fsys faultfs.FS, path string, boot ed25519.PrivateKey, log hclog.Logger) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		last := keysStamp(fsys, path)
		t := time.NewTicker(keysPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			now := keysStamp(fsys, path)
			if now == last {
				continue
			}
			k, err := remote.LoadKeys(fsys, path)
			if err != nil {
				log.Warn("cannot read the workers' keys; no NATS client is dropped until they can be read", "err", err)
				continue
			}
			last = now
			// Who the server lets in now, with the keys read once.
			users := natsUsers(boot, func() (remote.Keys, error) { return k, nil }, log)
			n, err := natsembed.DropRefused(srv, func(nkey string) bool { _, _, ok := users(nkey); return ok })
			if err != nil {
				log.Warn("cannot list the NATS clients to drop the ones whose key was taken out", "err", err)
			} else if n > 0 {
				log.Info("dropped NATS clients whose key the workers' keys no longer hold (a token issued again, or taken out)", "clients", n)
			}
		}
	}()
	return func() { close(done); <-ended }
}

// keysStamp tells a change of the keys file: its time, size and inode (a
// token's write replaces the file).
func keysStamp(fsys faultfs.FS, path string) string {
	fi, err := fsys.Stat(path)
	if err != nil {
		return ""
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprint(fi.ModTime().UnixNano(), fi.Size(), ino)
}
