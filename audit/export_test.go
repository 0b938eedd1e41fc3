package audit

// Queued returns how many events wait for the next group's write. For tests
// only, which use it to know that appends have joined a group.
func (l *Log) Queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next == nil {
		return 0
	}
	return l.next.n
}
