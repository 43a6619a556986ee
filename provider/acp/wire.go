package acp

import (
	"encoding/json"
	"runtime/debug"
	"strings"
)

// ProtocolVersion is the ACP version warren speaks.
const ProtocolVersion = 1

// The ACP subset warren uses (provider/acp/doc.go lists it).

// implInfo names a client or an agent. Some agents (OpenCode) refuse an
// initialize whose clientInfo has no version.
type implInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// clientVersion is warren's version as clientInfo gives it: the module
// version the binary was built from, else "dev".
func clientVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

type initializeParams struct {
	ProtocolVersion    int        `json:"protocolVersion"`
	ClientCapabilities clientCaps `json:"clientCapabilities"`
	ClientInfo         implInfo   `json:"clientInfo"`
}

type clientCaps struct {
	FS       fsCaps `json:"fs"`
	Terminal bool   `json:"terminal"`
}

type fsCaps struct {
	ReadTextFile  bool `json:"readTextFile"`
	WriteTextFile bool `json:"writeTextFile"`
}

type initializeResult struct {
	ProtocolVersion   int `json:"protocolVersion"`
	AgentCapabilities struct {
		LoadSession         bool `json:"loadSession"`
		SessionCapabilities struct {
			Resume json.RawMessage `json:"resume"`
		} `json:"sessionCapabilities"`
	} `json:"agentCapabilities"`
	AgentInfo *implInfo `json:"agentInfo"`
}

// canResume reports whether the agent advertises session/resume (an
// object, or true).
func (r initializeResult) canResume() bool {
	v := strings.TrimSpace(string(r.AgentCapabilities.SessionCapabilities.Resume))
	return v != "" && v != "null" && v != "false"
}

// envVar is one entry of an MCP server's env (ACP: a list of name/value).
type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// mcpServer is a stdio MCP server the agent starts for the session.
type mcpServer struct {
	Name    string   `json:"name"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Env     []envVar `json:"env"`
}

type newSessionParams struct {
	Cwd        string      `json:"cwd"`
	MCPServers []mcpServer `json:"mcpServers"`
}

type sessionModes struct {
	CurrentModeID  string `json:"currentModeId"`
	AvailableModes []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"availableModes"`
}

type newSessionResult struct {
	SessionID string        `json:"sessionId"`
	Modes     *sessionModes `json:"modes"`
}

type loadSessionParams struct {
	SessionID  string      `json:"sessionId"`
	Cwd        string      `json:"cwd"`
	MCPServers []mcpServer `json:"mcpServers"`
}

type loadSessionResult struct {
	Modes *sessionModes `json:"modes"`
}

type setModeParams struct {
	SessionID string `json:"sessionId"`
	ModeID    string `json:"modeId"`
}

type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

type promptParams struct {
	SessionID string         `json:"sessionId"`
	Prompt    []contentBlock `json:"prompt"`
}

type promptResult struct {
	StopReason string `json:"stopReason"`
	Usage      *struct {
		InputTokens       int `json:"inputTokens"`
		OutputTokens      int `json:"outputTokens"`
		CachedReadTokens  int `json:"cachedReadTokens"`
		CachedWriteTokens int `json:"cachedWriteTokens"`
	} `json:"usage"`
}

type cancelParams struct {
	SessionID string `json:"sessionId"`
}

type sessionNotification struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		SessionUpdate string          `json:"sessionUpdate"`
		Content       json.RawMessage `json:"content"`
		// tool_call and tool_call_update (see warrentool.go).
		ToolCallID string          `json:"toolCallId"`
		RawInput   json.RawMessage `json:"rawInput"`
		// codex-acp's session_info_update: threadStatus "systemError"
		// when the model request failed (codexerr.go).
		Meta struct {
			Codex struct {
				ThreadStatus struct {
					Type string `json:"type"`
				} `json:"threadStatus"`
			} `json:"codex"`
		} `json:"_meta"`
	} `json:"update"`
}

type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

type permissionParams struct {
	SessionID string `json:"sessionId"`
	ToolCall  struct {
		ToolCallID string          `json:"toolCallId"`
		Title      string          `json:"title"`
		Kind       string          `json:"kind"`
		RawInput   json.RawMessage `json:"rawInput"`
		Meta       struct {
			ClaudeCode struct {
				ToolName  string `json:"toolName"`
				MCPServer *struct {
					Name string `json:"name"`
				} `json:"mcpServer"`
			} `json:"claudeCode"`
		} `json:"_meta"`
	} `json:"toolCall"`
	Options []permissionOption `json:"options"`
	Meta    struct {
		// codex-acp marks an MCP tool's approval (warrentool.go).
		IsMCPToolApproval bool `json:"is_mcp_tool_approval"`
	} `json:"_meta"`
}

type permissionOutcome struct {
	Outcome  string `json:"outcome"`
	OptionID string `json:"optionId,omitempty"`
}

type permissionResult struct {
	Outcome permissionOutcome `json:"outcome"`
}

func cancelledOutcome() permissionResult {
	return permissionResult{Outcome: permissionOutcome{Outcome: "cancelled"}}
}

// pickOption returns the first option of the kinds given, in that order.
func pickOption(opts []permissionOption, kinds ...string) (string, bool) {
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return o.OptionID, true
			}
		}
	}
	return "", false
}
