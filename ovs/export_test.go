package ovs

// TxnCount is the number of transactions this client has sent.
func (c *Client) TxnCount() int64 { return c.txns.Load() }

// SetBeforeCommit makes every write transaction first run f, between the read
// it was computed from and the write: another client's change in that window.
func (c *Client) SetBeforeCommit(f func()) { c.beforeCommit = f }
