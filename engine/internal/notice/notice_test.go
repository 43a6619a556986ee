package notice

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The texts agents and the operator read, pinned.
func TestTexts(t *testing.T) {
	dl := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	cases := []struct{ got, want string }{
		{WaitBegan("lead/w1", "", "ok?", "tid", dl),
			"Agent lead/w1 is waiting for your input: ok?\n(token id tid, deadline 2026-01-02T02:04:05Z)\nAnswer it with: warren agent resume lead/w1 --token-id tid RESPONSE"},
		{WaitBegan("a", "approval", "p", "t", dl)[:35], "Agent a is waiting for your approva"},
		{ChildFailed("w1", "boom", 0, nil), "Agent w1 failed its turn: boom.\nUse poke(agent_name=\"w1\") to retry, or terminate it."},
		{ChildFailed("w1", "boom", 3, []Pending{{From: "lead", Text: strings.Repeat("x", 201)}}),
			"Agent w1 failed its turn: boom. Its 3 pending message(s) are kept:\n- from lead: " + strings.Repeat("x", 200) + "…\n- and 2 more\nUse poke(agent_name=\"w1\") to retry, or terminate it."},
		{Reminder("r1", "check", 0), "Reminder: check"},
		{Reminder("r1", "check", time.Minute), "Reminder: check\n(This reminder repeats every 1m0s; cancel it with cancel_reminder(reminder_id=\"r1\").)"},
		{StateChange("w1", "busy", "idle"), "[state] w1: busy -> idle"},
		{SpawnFailed("w2", errors.New("no room")), "spawning \"w2\" failed: no room"},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d:\ngot  %q\nwant %q", i, c.got, c.want)
		}
	}
	if ID("wait", "t") != ID("wait", "t") || ID("wait", "t") == ID("wai", "tt") || len(ID("x")) != 32 {
		t.Fatal("ID: the same parts give the same 32-hex id; other parts another")
	}
}

// A notice cut to its bound stays valid UTF-8 whatever the text it quotes
// (it was cut on a byte count, mid-rune).
func TestNoticesCutOnRuneBoundaries(t *testing.T) {
	long := strings.Repeat("日本語のエラー", 200)
	texts := []string{
		ChildFailed("w1", long, 3, []Pending{{From: "lead", Text: long}}),
		WaitBegan("lead/w1", "approval", long, "tok_1", time.Unix(0, 0)),
		SpawnFailed("child", errors.New(long)),
	}
	for i, s := range texts {
		if !utf8.ValidString(s) {
			t.Errorf("notice %d is not valid UTF-8: %q", i, s[len(s)-20:])
		}
	}
}
