package store

// HoldGroupCommit stops s's writer from starting, so that the operations callers submit
// meanwhile queue up; queued counts them, and release starts the writer, which then
// decides them together (up to MaxBatch). Tests only; s must be idle when called.
func HoldGroupCommit(s *Store) (queued func() int, release func()) {
	b := s.batch
	b.mu.Lock()
	b.running = true
	b.mu.Unlock()
	queued = func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue)
	}
	return queued, func() { go b.write() }
}

// SetWriterLockWait changes how long s's group-commit batches wait for a row lock (a
// PostgreSQL interval, "10ms" by default). Tests only; s must be idle when called.
func SetWriterLockWait(s *Store, wait string) { s.writerLockWait = wait }
