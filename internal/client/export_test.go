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
	_, ok := c.pages.get(pageKey(bucket, key, m.ETag, ps, off/ps))
	return ok
}
