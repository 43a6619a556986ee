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
	return checkServed(prov, name, model)
}

// checkModel fills spec's model from the entry's default and refuses an HTTP
// entry with neither (SPEC 7, code 2).
func (c *Core) checkModel(provName string, model *string) error {
	if *model != "" {
		return nil
	}
	*model = c.providers.DefaultModel(provName)
	if *model == "" && c.providers.IsHTTP(provName) {
		return failf(ErrInvalid,
			"provider entry %q has no default model and none was given: pass --model (e.g. --model gpt-4o-mini), or set \"providers\": {%q: {\"model\": \"...\"}} in config.json",
			provName, provName)
	}
	return nil
}

// checkServed refuses a model the provider can know is invalid before any
// run (an unknown inproc program, a missing script): SPEC 7, code 2 naming
// the model.
func checkServed(prov provider.Provider, provName, model string) error {
	if model == "" {
		return nil
	}
	if mc, ok := prov.(provider.ModelChecker); ok {
		if err := mc.CheckModel(model); err != nil {
			return failf(ErrInvalid, "provider %q does not serve model %q: %w", provName, model, err)
		}
	}
	return nil
}
