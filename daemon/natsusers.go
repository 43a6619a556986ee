//go:build !nocluster

package daemon

import (
	"crypto/ed25519"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"

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
