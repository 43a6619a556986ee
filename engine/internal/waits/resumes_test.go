package waits

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// The zero Resumes keeps a secret per run until it is taken or dropped.
func TestResumesSecrets(t *testing.T) {
	var r Resumes[int]
	if r.Secret("run-1") != "" || r.Take("run-1") != "" {
		t.Fatal("a zero Resumes holds a secret")
	}
	r.Drop("run-1") // nothing to drop: no effect
	r.Mint("run-1", "s1")
	r.Mint("run-2", "s2")
	if r.Secret("run-1") != "s1" || r.Secret("run-1") != "s1" {
		t.Fatal("Secret does not keep the secret")
	}
	r.Drop("run-2")
	if r.Secret("run-2") != "" {
		t.Fatal("a dropped secret is kept")
	}
	if r.Take("run-1") != "s1" || r.Take("run-1") != "" || r.Secret("run-1") != "" {
		t.Fatal("a secret is handed out more than once")
	}
}

// Every repeat of a resume, however many and whenever they come, gets the
// result the first resume's turn finished with; a resume this process
// never ran is not shared.
func TestResumesShareTheFirstResult(t *testing.T) {
	var r Resumes[int]
	if _, live, _ := r.Shared(context.Background(), "tok"); live {
		t.Fatal("a resume that never ran is shared")
	}
	r.Open("tok")
	var wg sync.WaitGroup
	got := make([]int, 8)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, live, err := r.Shared(context.Background(), "tok")
			if !live || err != nil {
				t.Errorf("live %v, err %v", live, err)
			}
			got[i] = res
		}(i)
	}
	r.Finish("tok", 42)
	wg.Wait()
	for i, res := range got {
		if res != 42 {
			t.Fatalf("repeat %d got %d", i, res)
		}
	}
	if res, live, err := r.Shared(context.Background(), "tok"); res != 42 || !live || err != nil {
		t.Fatalf("a repeat after the result: %d, %v, %v", res, live, err)
	}
	r.Finish("tok", 42) // a second Finish does not close twice
}

// A repeat stops waiting when its context ends, with the context's error.
func TestResumesSharedBoundedByContext(t *testing.T) {
	var r Resumes[int]
	r.Open("tok")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, live, err := r.Shared(ctx, "tok")
	if res != 0 || !live || !errors.Is(err, context.Canceled) {
		t.Fatalf("%d, %v, %v", res, live, err)
	}
}
