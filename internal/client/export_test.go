package client

// PageCached says whether the page holding byte off of version m is in
// the page cache, without fetching it (a View of a page smaller than a
// chunk would).
func (c *Client) PageCached(bucket, key string, m Meta, off int64) bool {
	cs := c.chunkSize.Load()
	if c.pages == nil || cs <= 0 {
		return false
	}
	ps := c.pageSize(cs)
	return c.pages.has(pageKey(bucket, key, m.ETag, ps, off/ps))
}

// PagePool says how many page buffers of the client's pool are held now
// (by the page cache, fills and readers), how many fills found them all
// held and took fresh memory, and the memory the pool holds.
func (c *Client) PagePool() (inUse int, refused, bytes int64) {
	c.fillMu.Lock()
	defer c.fillMu.Unlock()
	inUse, refused = c.pool.Stats()
	return inUse, refused, c.pool.Bytes()
}

// DropPages empties the page cache, as if every page were evicted.
func (c *Client) DropPages() { c.pages.c.Clear() }

// FillsInFlight is the number of pages being fetched into the page cache.
func (c *Client) FillsInFlight() int {
	c.fillMu.Lock()
	defer c.fillMu.Unlock()
	return len(c.fills)
}
