package suggest

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"recipient", "text", "max_retries"}
	cases := map[string]string{"recipent": "recipient", "TEXT": "text", "max_retry": "max_retries", "zzzzzz": ""}
	for in, want := range cases {
		if got := Closest(in, known, 3); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
	if d := Distance("kitten", "sitting"); d != 3 {
		t.Fatalf("Distance = %d, want 3", d)
	}
}
