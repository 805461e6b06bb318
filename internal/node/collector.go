package node

// collector cuts a write-through body into chunks as it streams to S3, keeping
// at most limit bytes; chunks past the limit are dropped and fill on read.
type collector struct {
	size   int64
	limit  int64
	total  int64
	full   [][]byte
	cur    []byte
	capped bool
}

func newCollector(chunkSize, limit int64) *collector {
	return &collector{size: chunkSize, limit: limit}
}

func (c *collector) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	for len(p) > 0 && !c.capped {
		if c.cur == nil {
			if int64(len(c.full)+1)*c.size > c.limit {
				c.capped = true
				break
			}
			c.cur = make([]byte, 0, c.size)
		}
		take := min(int64(len(p)), c.size-int64(len(c.cur)))
		c.cur = append(c.cur, p[:take]...)
		p = p[take:]
		if int64(len(c.cur)) == c.size {
			c.full = append(c.full, c.cur)
			c.cur = nil
		}
	}
	return n, nil
}

// chunks returns the leading chunks collected, in order. The final partial
// chunk is included only when nothing was dropped.
func (c *collector) chunks() [][]byte {
	if c.capped || len(c.cur) == 0 {
		return c.full
	}
	return append(c.full, c.cur)
}
