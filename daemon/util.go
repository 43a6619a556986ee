package daemon

func copyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func notFound(ref string) error {
	return failf(ErrNotFound, "agent %q not found; list agents with `warren agent list`", ref)
}
