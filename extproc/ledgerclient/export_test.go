package ledgerclient

// Queued is how many operations wait in c for an Apply.
func Queued(c *Client) int {
	c.co.mu.Lock()
	defer c.co.mu.Unlock()
	return len(c.co.queue)
}
