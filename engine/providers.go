package engine

import (
	"github.com/warren-dev/warren/provider"
)

// checkRunChoice validates the provider and model a send asks for: an
// unknown provider, or a model the provider says it does not serve, is
// invalid input (code 2). The run would only fail, and a failed run changes
// nothing, so nothing is logged.
func (c *Core) checkRunChoice(a *agent, provName, model string) error {
	if provName == "" && model == "" {
		return nil
	}
	name := provName
	if name == "" {
		name = a.Inherit().Provider
	}
	prov, err := c.provider(name)
	if err != nil {
		return err
	}
	if model == "" {
		return nil
	}
	if mc, ok := prov.(provider.ModelChecker); ok {
		if err := mc.CheckModel(model); err != nil {
			return failf(ErrInvalid, "--model %q: %w", model, err)
		}
	}
	return nil
}
