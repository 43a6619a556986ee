package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The two ways the store reads messages without a consumer (doc.go,
// "Reads"): the stream leader's API, which is authoritative, and a batch
// direct get, which any current replica may answer.
const (
	leaderGetPrefix  = "$JS.API.STREAM.MSG.GET."
	directGetSubject = "$JS.API.DIRECT.GET." + StreamName
)

// msgGetRequest is JetStream's message get request (both subjects).
type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	Batch   int    `json:"batch,omitempty"`
	// MaxBytes bounds a batch's bytes (direct get only; the leader's get
	// refuses it).
	MaxBytes int `json:"max_bytes,omitempty"`
}

// msgGetResponse is the stream leader's answer to a message get.
type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// leaderGet asks the stream leader for one message
// ($JS.API.STREAM.MSG.GET, which only the leader answers in a cluster):
// jetstream.ErrMsgNotFound when there is none. Unlike nats.go's
// Stream.GetMsg it never goes to a replica, whatever the stream's
// AllowDirect. A ctx without a deadline is bounded by Options.Timeout.
func (s *Store) leaderGet(ctx context.Context, req msgGetRequest) (*jetstream.RawStreamMsg, error) {
	return s.leaderGetFrom(ctx, StreamName, req)
}

// leaderGetFrom is leaderGet on the named stream (a bucket's: "KV_" + its
// name).
func (s *Store) leaderGetFrom(ctx context.Context, stream string, req msgGetRequest) (*jetstream.RawStreamMsg, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.o.Timeout)
		defer cancel()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	m, err := s.nc.RequestWithContext(ctx, leaderGetPrefix+stream, body)
	if err != nil {
		return nil, err
	}
	var resp msgGetResponse
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("the stream leader's answer to a message get: %w", err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, resp.Error
	}
	if resp.Message == nil {
		return nil, jetstream.ErrInvalidJetStreamResponse
	}
	var hdr nats.Header
	if len(resp.Message.Header) > 0 {
		if hdr, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("the stream leader's answer to a message get: %w", err)
		}
	}
	return &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence, Header: hdr,
		Data: resp.Message.Data, Time: resp.Message.Time}, nil
}

// leaderNext asks the stream leader for subj's first message at stream
// seq >= from, retrying while the servers do not answer (retrying).
func (s *Store) leaderNext(ctx context.Context, subj string, from uint64) (*jetstream.RawStreamMsg, error) {
	return retried(s, ctx, "next entry of "+subj, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return s.leaderGet(ctx, msgGetRequest{Seq: from, NextFor: subj})
	})
}

// directBatchSize is how many messages one batch direct get asks for,
// and directBatchBytes how many bytes at most (the replica ends the batch
// early past it; the reader asks again). The bound keeps a batch of large
// lines well within the subscription's pending limit (64 MiB).
const (
	directBatchSize  = 512
	directBatchBytes = 8 << 20
)

// directBatch asks any replica that serves direct gets for up to
// directBatchSize messages (maxBytes at most) of subj from stream seq from on, on the
// reader's subscription (reply subject inbox). It returns what the replica
// had: nothing if it had no such message (404), fewer than asked, or up to
// its own last message if it lags. The caller checks every message and
// goes to the leader for what is missing (doc.go, "Reads").
func (s *Store) directBatch(ctx context.Context, sub *nats.Subscription, inbox, subj string, from uint64, maxBytes int) ([]*jetstream.RawStreamMsg, error) {
	body, err := json.Marshal(msgGetRequest{Seq: from, NextFor: subj, Batch: directBatchSize, MaxBytes: maxBytes})
	if err != nil {
		return nil, err
	}
	if err := s.nc.PublishRequest(directGetSubject, inbox, body); err != nil {
		return nil, err
	}
	var out []*jetstream.RawStreamMsg
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return out, err
		}
		if m.Subject != inbox {
			continue // a late answer to an earlier batch of this reader
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			switch m.Header.Get("Status") {
			case "204": // end of the batch
				return out, nil
			case "404": // no message at or after from
				return out, nil
			default:
				return out, fmt.Errorf("direct get refused: %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
			}
		}
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return out, fmt.Errorf("direct get refused: a message without a valid %s header", jetstream.SequenceHeader)
		}
		out = append(out, &jetstream.RawStreamMsg{Subject: m.Header.Get(jetstream.SubjectHeader), Sequence: seq, Header: m.Header, Data: m.Data})
	}
}
