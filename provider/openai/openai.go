package openai

import "github.com/warren-dev/warren/provider/llm"

// Defaults of the built-in "openai" entry (SPEC 7).
const (
	DefaultBaseURL = "https://api.openai.com/v1"
	DefaultKeyEnv  = "OPENAI_API_KEY"
	OllamaBaseURL  = "http://127.0.0.1:11434/v1"
)

// New returns a provider for one entry of type openai.
func New(opts llm.Options) *llm.Provider {
	opts.Wire = Wire{}
	return llm.New(opts)
}
