package inbox

import (
	"fmt"
	"strings"
)

// FormatPrompt renders the prompt of a wake turn from the messages it
// consumes (SPEC 6). One message gives "Message from <name>:\n<text>";
// several give numbered lines "N. From <name>: <text>", oldest first. name
// maps a sender to its display name (nil shows the sender as stored). No
// messages give "".
func FormatPrompt(msgs []Message, name func(sender string) string) string {
	if name == nil {
		name = func(s string) string { return s }
	}
	switch len(msgs) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("Message from %s:\n%s", name(msgs[0].Sender), msgs[0].Payload)
	}
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%d. From %s: %s", i+1, name(m.Sender), m.Payload)
	}
	return b.String()
}
