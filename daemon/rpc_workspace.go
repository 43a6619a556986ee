package daemon

import (
	"context"
	"path/filepath"
	"time"

	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
)

// workspaceParam reads agent.create's workspace: true, or {repo?, base?,
// copy?} (SPEC 12); nil when absent or false.
func workspaceParam(p protocol.Params) (*engine.WorkspaceRequest, error) {
	if !p.Has("workspace") {
		return nil, nil
	}
	if b, err := p.OptBool("workspace", false); err == nil {
		if !b {
			return nil, nil
		}
		return &engine.WorkspaceRequest{}, nil
	}
	m, err := p.OptMap("workspace")
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalid, "param workspace: expected true or {repo?, base?, copy?}")
	}
	w := &engine.WorkspaceRequest{}
	sub := protocol.Params(m)
	for k := range m {
		if k != "repo" && k != "base" && k != "copy" {
			return nil, protocol.Errorf(protocol.CodeInvalid, "param workspace.%s: unknown (the keys are repo, base and copy)", k)
		}
	}
	if w.Repo, err = sub.OptString("repo", ""); err != nil {
		return nil, err
	}
	if w.Repo != "" && !filepath.IsAbs(w.Repo) {
		return nil, protocol.Errorf(protocol.CodeInvalid, "param workspace.repo: %q must be an absolute path", w.Repo)
	}
	if w.Base, err = sub.OptString("base", ""); err != nil {
		return nil, err
	}
	if list, ok := m["copy"].([]any); ok {
		for _, x := range list {
			s, isStr := x.(string)
			if !isStr {
				return nil, protocol.Errorf(protocol.CodeInvalid, "param workspace.copy: a list of paths relative to the repository")
			}
			w.Copy = append(w.Copy, s)
		}
	} else if m["copy"] != nil {
		return nil, protocol.Errorf(protocol.CodeInvalid, "param workspace.copy: a list of paths relative to the repository")
	}
	return w, nil
}

// workspaceLog answers workspace.log: the agent's workspace and its
// snapshots (SPEC 8.1), oldest first.
func (h *handler) workspaceLog(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	id, err := h.ref(p, "agent_id")
	if err != nil {
		return nil, err
	}
	v, err := h.c.WorkspaceLog(ctx, id)
	if err != nil {
		return nil, err
	}
	snaps := make([]any, len(v.Snapshots))
	for i, s := range v.Snapshots {
		snaps[i] = map[string]any{"run_id": s.RunID, "turn": s.Turn, "at": s.At, "commit": s.Commit,
			"ts": s.TS.UTC().Format(time.RFC3339Nano), "files_changed": s.FilesChanged}
	}
	return map[string]any{"snapshots": snaps, "repo": v.Repo, "path": v.Path, "branch": v.Branch, "base": v.Base, "closed": v.Closed}, nil
}

// workspaceRestore answers workspace.restore: one of the agent's
// snapshots back in its worktree (the agent at rest).
func (h *handler) workspaceRestore(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	id, err := h.ref(p, "agent_id")
	if err != nil {
		return nil, err
	}
	commit, err := p.String("commit")
	if err != nil {
		return nil, err
	}
	if err := h.c.RestoreWorkspace(ctx, id, commit); err != nil {
		return nil, err
	}
	return map[string]any{"agent_id": id, "commit": commit}, nil
}

// workspaceMerge answers workspace.merge: the child's branch merged into
// its parent's worktree; conflicts are code 2 naming the paths.
func (h *handler) workspaceMerge(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	id, err := h.refAny(p, "agent_id")
	if err != nil {
		return nil, err
	}
	res, err := h.c.MergeChild(ctx, id)
	if err != nil {
		return nil, err
	}
	return map[string]any{"agent_id": id, "branch": res.Branch, "commit": res.Commit}, nil
}
