package eventlog

import (
	"container/list"
	"sync"
)

// Files caps how many logs hold open file handles at once. Logs opened with
// the same Files (Options.Files) share the cap: when a log needs its
// handles and the cap is reached, the least recently used idle log closes
// its own (its pending file is removed as on idle retirement) and keeps
// only what it needs to reopen cheaply: its last seq and the byte size of
// its acknowledged entries. Its next append reopens the file, checks that
// the size is unchanged and that the last line is that seq's entry with a
// valid CRC, and goes on; nothing else is read.
//
// Each log with handles holds at most two descriptors (the log and, while
// it is busy, its pending file). The cap is exact while fewer than Max logs
// are committing at the same moment: a log in the middle of a commit is
// never closed under it, and a commit never waits for another log, so when
// every log holding handles is committing, a newcomer opens its own anyway
// and the count exceeds Max by at most the number of concurrent commits.
//
// A Files is safe for concurrent use. The zero value is not usable; call
// NewFiles.
type Files struct {
	max int

	mu  sync.Mutex
	lru *list.List // *Log, most recently used first; Log.elem points into it
}

// NewFiles returns a cap of max logs with open handles (max < 1 means 1).
func NewFiles(max int) *Files {
	if max < 1 {
		max = 1
	}
	return &Files{max: max, lru: list.New()}
}

// Max is the cap.
func (c *Files) Max() int { return c.max }

// Open is the number of logs holding open handles now.
func (c *Files) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// acquire records that l is about to hold handles, first closing the
// handles of least recently used idle logs while the cap is reached. If l
// holds handles already it only becomes the most recently used. The caller
// is l's leader (l.leading is set), so no other log can close l's handles
// meanwhile.
func (c *Files) acquire(l *Log) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.elem != nil {
		c.lru.MoveToFront(l.elem)
		return
	}
	// Try each log at most once: a busy one goes to the front and the next
	// least recently used is tried.
	for tries := c.lru.Len(); c.lru.Len() >= c.max && tries > 0; tries-- {
		v := c.lru.Back().Value.(*Log)
		c.lru.MoveToFront(v.elem)
		c.mu.Unlock()
		v.release()
		c.mu.Lock()
	}
	l.elem = c.lru.PushFront(l)
}

// touch makes l the most recently used, if it holds handles.
func (c *Files) touch(l *Log) {
	c.mu.Lock()
	if l.elem != nil {
		c.lru.MoveToFront(l.elem)
	}
	c.mu.Unlock()
}

// forget records that l holds no handles any more.
func (c *Files) forget(l *Log) {
	c.mu.Lock()
	if l.elem != nil {
		c.lru.Remove(l.elem)
		l.elem = nil
	}
	c.mu.Unlock()
}
