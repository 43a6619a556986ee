package engine

func notFound(ref string) error {
	return failf(ErrNotFound, "agent %q not found; list agents with `warren agent list`", ref)
}
