package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/nats-io/nats.go/jetstream"
)

// Holder returns the node that holds id's lease ("" when none does: the
// key is absent, deleted or lapsed), read from the owners bucket's leader.
func (s *Store) Holder(ctx context.Context, id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	e, err := s.leaderGetFrom(ctx, "KV_"+OwnersBucket, msgGetRequest{LastFor: "$KV." + OwnersBucket + "." + id})
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return "", nil
		}
		return "", unavailable(fmt.Errorf("store/jetstream: reading the holder of %s: %w", id, err))
	}
	if e.Header.Get("KV-Operation") != "" || s.o.Now().Sub(e.Time) > s.o.OwnerTTL {
		return "", nil
	}
	var ov ownerValue
	if err := json.Unmarshal(e.Data, &ov); err != nil {
		return "", fmt.Errorf("store/jetstream: the owners key of %s holds %.100q: %w", id, e.Data, err)
	}
	return ov.Node, nil
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
