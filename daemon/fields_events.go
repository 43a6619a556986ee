package daemon

import "encoding/json"

// Fast decoders for the events a long log holds most of. Each reports
// false when the data is not what this package writes; the caller then
// decodes with encoding/json.

func fastTurnStart(data []byte, d *turnStartData) bool {
	ok := true
	str := func(v []byte, dst *string) {
		s, good := jsonString(v)
		ok = ok && good
		*dst = s
	}
	if !objectMembers(data, func(k string, v []byte) {
		switch k {
		case "run_id":
			str(v, &d.RunID)
		case "turn":
			n, good := jsonInt(v)
			ok = ok && good
			d.Turn = n
		case "boot_id":
			str(v, &d.BootID)
		case "prompt":
			str(v, &d.Prompt)
		case "provider":
			str(v, &d.Provider)
		case "model":
			str(v, &d.Model)
		case "message_ids":
			ids, good := jsonStrings(v)
			ok = ok && good
			d.MessageIDs = ids
		}
	}) {
		return false
	}
	return ok
}

// fastRunField decodes the run_id (and error) of turn.complete,
// turn.failed and turn.cancelled.
func fastRunField(data []byte, runID, errText *string) bool {
	ok := true
	if !objectMembers(data, func(k string, v []byte) {
		switch k {
		case "run_id":
			s, good := jsonString(v)
			ok = ok && good
			*runID = s
		case "error":
			if errText != nil {
				s, good := jsonString(v)
				ok = ok && good
				*errText = s
			}
		}
	}) {
		return false
	}
	return ok
}

func fastMessageID(data []byte, id *string) bool {
	ok := true
	if !objectMembers(data, func(k string, v []byte) {
		if k == "message_id" {
			s, good := jsonString(v)
			ok = ok && good
			*id = s
		}
	}) {
		return false
	}
	return ok
}

// toolCallFields is what the fold keeps of a tool.call.
type toolCallFields struct {
	Tool     string
	Args     json.RawMessage
	Result   json.RawMessage
	Error    string
	RunID    string
	Messages []json.RawMessage
}

func fastToolCall(data []byte, d *toolCallFields) bool {
	ok := true
	if !objectMembers(data, func(k string, v []byte) {
		switch k {
		case "tool":
			s, good := jsonString(v)
			ok = ok && good
			d.Tool = s
		case "args":
			d.Args = v
		case "result":
			d.Result = v
		case "error":
			s, good := jsonString(v)
			ok = ok && good
			d.Error = s
		case "run_id":
			s, good := jsonString(v)
			ok = ok && good
			d.RunID = s
		case "messages":
			if string(v) != "null" && !arrayElements(v, func(m []byte) { d.Messages = append(d.Messages, m) }) {
				ok = false
			}
		}
	}) {
		return false
	}
	return ok
}
