package usage

import (
	"reflect"
	"testing"
)

// TestBestSuggestionsPrefersATransposition: of cobra's suggestions, the
// closest is kept, a swap of two letters counting as one edit.
func TestBestSuggestionsPrefersATransposition(t *testing.T) {
	if got := bestSuggestions("lsit", []string{"last", "list"}); !reflect.DeepEqual(got, []string{"list"}) {
		t.Errorf("bestSuggestions(lsit) = %v, want [list]", got)
	}
	if got := bestSuggestions("stat", []string{"start", "status"}); !reflect.DeepEqual(got, []string{"start"}) {
		t.Errorf("bestSuggestions(stat) = %v, want [start]", got)
	}
	if got := bestSuggestions("x", []string{"only"}); !reflect.DeepEqual(got, []string{"only"}) {
		t.Errorf("bestSuggestions with one candidate = %v, want it", got)
	}
}
