package anthropic

import "github.com/warren-dev/warren/provider/llm"

// Defaults of the built-in "anthropic" entry (SPEC 7).
const (
	DefaultBaseURL = "https://api.anthropic.com"
	DefaultKeyEnv  = "ANTHROPIC_API_KEY"
)

// New returns a provider for one entry of type anthropic.
func New(opts llm.Options) *llm.Provider {
	opts.Wire = Wire{}
	return llm.New(opts)
}
