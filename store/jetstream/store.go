package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/warren-dev/warren/store"
)

// Names of the stream and buckets (doc.go).
const (
	StreamName    = "WARREN_LOG"
	SubjectPrefix = "warren.log."
	OwnersBucket  = "warren-owners"
	SessionBucket = "warren-sessions"
	BlobBucket    = "warren-session-blobs"
	NodesBucket   = "warren-nodes"
	CkptBucket    = "warren-checkpoints"
)

// DefaultOwnerTTL is the default Options.OwnerTTL.
const DefaultOwnerTTL = 10 * time.Second

// ErrLazyFsync is returned by New for a server whose JetStream does not
// fsync every write (sync_interval other than "always"): acknowledged
// appends could be lost in a power cut (Jepsen, NATS 2.12.1).
var ErrLazyFsync = errors.New("the NATS server does not fsync every JetStream write (sync_interval is not \"always\")")

// ErrSyncUnknown is returned by New when the servers' fsync setting cannot
// be read: the connection is not allowed to ask the system account
// ($SYS.REQ.SERVER.PING.JSZ) and no embedded server was given.
var ErrSyncUnknown = errors.New("cannot verify that the NATS servers fsync every JetStream write")

// Options configures a Store. Conn is required.
type Options struct {
	// Conn is the connection to the cluster. The store does not close it.
	Conn *nats.Conn
	// Replicas of the stream and buckets: 3 in a cluster, 1 on one node.
	// Zero keeps what an existing stream has (1 for a new one), so that a
	// reader (warren export) never rescales the stream.
	Replicas int
	// Node names this daemon in leases and agent.claimed; BootID is its
	// boot id.
	Node   string
	BootID string
	// OwnerTTL is how long a lease lives unless renewed (renewed every
	// third of it). Zero keeps the existing bucket's TTL (DefaultOwnerTTL
	// for a new one), so that every daemon renews on the bucket's cadence.
	OwnerTTL time.Duration
	// Embedded lists the servers running in this process; when set, their
	// configuration proves sync-always. Otherwise the store asks every
	// server over the system account's JSZ request, which needs a user of
	// the system account.
	Embedded []*server.Server
	// UnsafeLazyFsync accepts servers that do not fsync every write (or
	// whose setting cannot be read): `--unsafe-lazy-fsync`.
	UnsafeLazyFsync bool
	// Timeout bounds each request to the servers (default 5 s).
	Timeout time.Duration
	Logger  hclog.Logger
	Now     func() time.Time
}

// Store is a store.Store on NATS JetStream.
type Store struct {
	o      Options
	nc     *nats.Conn
	js     jetstream.JetStream
	owners jetstream.KeyValue
	// user is the USER inbox's lease this Store claimed last (lease.go):
	// the claim every agent claim of this Store rests on once it is set.
	userMu sync.Mutex
	user   *lease
	nodes  jetstream.KeyValue
	ckpts  jetstream.KeyValue
	snaps  *snapshots
	// hints are the logs' ends HintEnds read ahead, by subject, each
	// taken by the next OpenLog of its log (ends.go).
	hintMu sync.Mutex
	hints  map[string]*jetstream.RawStreamMsg
	// listed is the last list of logs (Agents).
	listMu sync.Mutex
	listed *listing
	// epochs counts the logs of each epoch a release depends on (lazy.go).
	logsMu sync.Mutex
	epochs map[uint64]*epochLogs
}

var _ store.Store = (*Store)(nil)

// New checks the servers' fsync setting, then creates (or updates) the
// stream and buckets the store uses.
func New(ctx context.Context, o Options) (*Store, error) {
	if o.Conn == nil {
		return nil, errors.New("store/jetstream: Options.Conn is required")
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := checkSync(ctx, o); err != nil {
		if !o.UnsafeLazyFsync {
			return nil, err
		}
		o.Logger.Warn("running on NATS servers that may lose acknowledged writes in a power cut, as asked (--unsafe-lazy-fsync)", "reason", err)
	}
	js, err := jetstream.New(o.Conn, jetstream.WithDefaultTimeout(o.Timeout))
	if err != nil {
		return nil, fmt.Errorf("store/jetstream: %w", err)
	}
	if o.Replicas == 0 {
		o.Replicas = 1
		if st, err := js.Stream(ctx, StreamName); err == nil {
			o.Replicas = st.CachedInfo().Config.Replicas
		}
	}
	if o.OwnerTTL == 0 {
		o.OwnerTTL = DefaultOwnerTTL
		if kv, err := js.KeyValue(ctx, OwnersBucket); err == nil {
			if st, err := kv.Status(ctx); err == nil && st.TTL() > 0 {
				o.OwnerTTL = st.TTL()
			}
		}
	}
	s := &Store{o: o, nc: o.Conn, js: js, hints: map[string]*jetstream.RawStreamMsg{}}
	// Each create is idempotent (create or update with the same config), so
	// one the servers did not answer in time, say a busy disk under
	// SyncAlways or a leader election, is sent again (retrying).
	err = s.retrying(ctx, "create stream "+StreamName, func(ctx context.Context) error {
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:               StreamName,
			Description:        "warren event logs: one subject per agent, one SPEC 3 line per message",
			Subjects:           []string{SubjectPrefix + ">"},
			Storage:            jetstream.FileStorage,
			Replicas:           o.Replicas,
			Duplicates:         2 * time.Minute,
			AllowAtomicPublish: true,
			AllowDirect:        true, // batch reads by direct get; ends, fences and checks by the leader (doc.go, "Reads")
			DenyDelete:         true,
			DenyPurge:          true,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store/jetstream: create stream %s: %w", StreamName, err)
	}
	if s.owners, err = s.bucket(ctx, OwnersBucket, "warren agent leases: value {node,boot_id}, revision = epoch", o.OwnerTTL); err != nil {
		return nil, err
	}
	if s.nodes, err = s.bucket(ctx, NodesBucket, "warren daemons: one key per node, what it tells the others (cluster.go)", 0); err != nil {
		return nil, err
	}
	if s.ckpts, err = s.bucket(ctx, CkptBucket, "warren checkpoints: each agent's fold at one of its entries, checked against the log before use", 0); err != nil {
		return nil, err
	}
	kv, err := s.bucket(ctx, SessionBucket, "warren session snapshots (session.json)", 0)
	if err != nil {
		return nil, err
	}
	obj, err := retried(s, ctx, "create object store "+BlobBucket, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket: BlobBucket, Description: "warren session snapshots too large for one message",
			Storage: jetstream.FileStorage, Replicas: o.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store/jetstream: create object store %s: %w", BlobBucket, err)
	}
	s.snaps = &snapshots{kv: kv, obj: obj, inlineMax: int(o.Conn.MaxPayload()) - 64<<10, timeout: o.Timeout}
	return s, nil
}

// bucket creates (or updates) a KV bucket of the store: history 1, file
// storage, the store's replicas, keys lapsing after ttl (0: never).
func (s *Store) bucket(ctx context.Context, name, desc string, ttl time.Duration) (jetstream.KeyValue, error) {
	kv, err := retried(s, ctx, "create bucket "+name, func(ctx context.Context) (jetstream.KeyValue, error) {
		return s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: name, Description: desc, TTL: ttl, History: 1, Storage: jetstream.FileStorage, Replicas: s.o.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store/jetstream: create bucket %s: %w", name, err)
	}
	return kv, nil
}

// checkSync returns nil when every server fsyncs each JetStream write.
func checkSync(ctx context.Context, o Options) error {
	if len(o.Embedded) > 0 {
		for _, srv := range o.Embedded {
			c := srv.JetStreamConfig()
			if c == nil {
				return fmt.Errorf("store/jetstream: embedded server %s has JetStream disabled", srv.Name())
			}
			if !c.SyncAlways {
				return fmt.Errorf("store/jetstream: embedded server %s: %w; start it with SyncAlways, or accept the risk with --unsafe-lazy-fsync", srv.Name(), ErrLazyFsync)
			}
		}
		return nil
	}
	type jsz struct {
		Server struct {
			Name string `json:"name"`
		} `json:"server"`
		Data struct {
			Config struct {
				SyncAlways bool `json:"sync_always"`
			} `json:"config"`
		} `json:"data"`
	}
	inbox := o.Conn.NewRespInbox()
	sub, err := o.Conn.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("store/jetstream: %w", err)
	}
	defer sub.Unsubscribe()
	if err := o.Conn.PublishRequest("$SYS.REQ.SERVER.PING.JSZ", inbox, []byte(`{"config":true}`)); err != nil {
		return fmt.Errorf("store/jetstream: asking the servers for their JetStream settings: %w", err)
	}
	var lazy []string
	n := 0
	wait := o.Timeout
	for {
		m, err := sub.NextMsg(wait)
		if err != nil {
			break
		}
		wait = 250 * time.Millisecond // the others answer about together
		var r jsz
		if json.Unmarshal(m.Data, &r) != nil {
			continue
		}
		n++
		if !r.Data.Config.SyncAlways {
			lazy = append(lazy, r.Server.Name)
		}
	}
	if n == 0 {
		return fmt.Errorf("store/jetstream: %w: connect as a user of the system account, or accept the risk with --unsafe-lazy-fsync", ErrSyncUnknown)
	}
	if len(lazy) > 0 {
		return fmt.Errorf("store/jetstream: servers %s: %w; set `jetstream { sync_interval: always }` on every server, or accept the risk with --unsafe-lazy-fsync", strings.Join(lazy, ", "), ErrLazyFsync)
	}
	return nil
}

// Subject is the subject of id's log.
func Subject(id string) string { return SubjectPrefix + id }

// checkID refuses ids that are not one subject token.
func checkID(id string) error {
	if id == "" || strings.ContainsAny(id, ".*> \t\r\n") {
		return fmt.Errorf("store/jetstream: %q cannot name a log (one subject token: no dots, wildcards or spaces)", id)
	}
	return nil
}

// Agents lists the subjects of the stream that hold messages. The list
// of subjects (one stream info naming each, about 50 bytes a log) is
// asked again only when the set may have changed since the last one
// (streamAt): a takeover scan, every 250 ms, thus costs one small request
// while no log is created, not a list of every log.
func (s *Store) Agents(ctx context.Context) ([]string, error) {
	// A handle of its own: Info rewrites a handle's cached stream info,
	// which other users of a shared handle could look at concurrently.
	// Making it reads the stream's state (no subjects).
	st, err := s.js.Stream(ctx, StreamName)
	if err != nil {
		return nil, fmt.Errorf("store/jetstream: list logs: %w", err)
	}
	at := stateAt(st.CachedInfo())
	s.listMu.Lock()
	if l := s.listed; l != nil && l.at == at {
		ids := slices.Clone(l.ids)
		s.listMu.Unlock()
		return ids, nil
	}
	s.listMu.Unlock()
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(SubjectPrefix+"*"))
	if err != nil {
		return nil, fmt.Errorf("store/jetstream: list logs: %w", err)
	}
	var ids []string
	for subj := range info.State.Subjects {
		if id := strings.TrimPrefix(subj, SubjectPrefix); id != store.UserID {
			ids = append(ids, id)
		}
	}
	s.listMu.Lock()
	// Keyed by the state read before the list: the list holds at least
	// those subjects (they only grow), so a log created while the list
	// was read (the server pages a long one) moves the count the next
	// scan sees, never hides from it.
	s.listed = &listing{at: at, ids: slices.Clone(ids)}
	s.listMu.Unlock()
	return ids, nil
}

// listing is the last list of logs Agents read, with the stream state it
// was read at.
type listing struct {
	at  streamAt
	ids []string
}

// streamAt is what of a stream's state tells whether its subjects
// changed. While no message was ever removed (the stream refuses deletes
// and purges, and has no limits: its first seq is 1 and it holds every
// seq up to the last), the subjects only grow, so their count is enough,
// and appends to existing logs do not send Agents to the list again.
// Otherwise any message added (the last seq) or removed (the count) does.
// The stream's creation time is part of the key (a stream made again
// starts over).
type streamAt struct {
	created   time.Time
	subjects  uint64
	msgs      uint64
	last      uint64
	onlyGrown bool
}

func stateAt(info *jetstream.StreamInfo) streamAt {
	st := info.State
	if st.FirstSeq <= 1 && st.Msgs == st.LastSeq {
		return streamAt{created: info.Created, subjects: st.NumSubjects, onlyGrown: true}
	}
	return streamAt{created: info.Created, subjects: st.NumSubjects, msgs: st.Msgs, last: st.LastSeq}
}

// UserLog opens the USER log.
func (s *Store) UserLog(ctx context.Context, o store.LogOptions) (store.Log, error) {
	return s.OpenLog(ctx, store.UserID, o)
}

// Snapshots stores session snapshots in the KV bucket.
func (s *Store) Snapshots() store.Snapshots { return s.snaps }

// Close closes nothing of the connection (the caller's).
func (s *Store) Close() error { return nil }

// pubAck is the answer to a publish (or a batch commit).
type pubAck struct {
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate,omitempty"`
	Batch     string `json:"batch,omitempty"`
	Count     int    `json:"count,omitempty"`
	Error     *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error,omitempty"`
}

// errCodeWrongLastSeq is JetStream's "wrong last sequence" (10071): the
// fence refused the publish.
const errCodeWrongLastSeq = 10071

// errCodeSubjectBusy is JetStream's "wrong last sequence" without a
// number (10164): a clustered stream refused a fenced publish because an
// earlier publish to the subject is still in process. Nothing was stored.
const errCodeSubjectBusy = 10164
