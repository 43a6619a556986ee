package jetstream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/nats-io/nats.go/jetstream"
)

// Holder returns the node that holds id's lease ("" when none does: the
// key is absent, deleted or lapsed), read from the owners bucket's
// leader; released is true when its holder gave it up (Release deleted
// the key), rather than letting it lapse.
func (s *Store) Holder(ctx context.Context, id string) (node string, released bool, err error) {
	if err := checkID(id); err != nil {
		return "", false, err
	}
	e, err := s.ownerKey(ctx, id)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return "", false, nil
		}
		return "", false, unavailable(fmt.Errorf("store/jetstream: reading the holder of %s: %w", id, err))
	}
	if e.Header.Get("KV-Operation") != "" {
		return "", true, nil
	}
	if s.o.Now().Sub(e.Time) > s.o.OwnerTTL {
		return "", false, nil
	}
	var ov ownerValue
	if err := json.Unmarshal(e.Data, &ov); err != nil {
		return "", false, fmt.Errorf("store/jetstream: the owners key of %s holds %.100q: %w", id, e.Data, err)
	}
	return ov.Node, false, nil
}

// Peers returns the names of the servers that hold the log stream (its
// leader first), as the stream's cluster information lists them; one
// server without a cluster is listed alone.
func (s *Store) Peers(ctx context.Context) ([]string, error) {
	st, err := s.js.Stream(ctx, StreamName)
	if err != nil {
		return nil, unavailable(fmt.Errorf("store/jetstream: stream %s: %w", StreamName, err))
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, unavailable(fmt.Errorf("store/jetstream: stream %s: %w", StreamName, err))
	}
	if info.Cluster == nil {
		return nil, nil
	}
	var peers []string
	if info.Cluster.Leader != "" {
		peers = append(peers, info.Cluster.Leader)
	}
	var rest []string
	for _, r := range info.Cluster.Replicas {
		rest = append(rest, r.Name)
	}
	sort.Strings(rest)
	return append(peers, rest...), nil
}

// PutNode records what node tells the other daemons (daemon.status: the
// hash of its provider entries), replacing what it told before.
func (s *Store) PutNode(ctx context.Context, node string, info []byte) error {
	if node == "" {
		return errors.New("store/jetstream: a node needs a name")
	}
	if _, err := s.nodes.Put(ctx, nodeKey(node), info); err != nil {
		return unavailable(fmt.Errorf("store/jetstream: recording node %s: %w", node, err))
	}
	return nil
}

// Nodes returns what every node recorded with PutNode, by node name.
func (s *Store) Nodes(ctx context.Context) (map[string][]byte, error) {
	keys, err := s.nodes.ListKeys(ctx)
	if err != nil {
		return nil, unavailable(fmt.Errorf("store/jetstream: listing the nodes: %w", err))
	}
	out := map[string][]byte{}
	for k := range keys.Keys() {
		name, err := base64.RawURLEncoding.DecodeString(k)
		if err != nil {
			continue // not a key PutNode wrote
		}
		e, err := s.nodes.Get(ctx, k)
		if err != nil {
			continue // deleted meanwhile
		}
		out[string(name)] = e.Value()
	}
	return out, nil
}

// nodeKey is node's key in the nodes bucket: any name, in the characters
// a key may hold.
func nodeKey(node string) string { return base64.RawURLEncoding.EncodeToString([]byte(node)) }
