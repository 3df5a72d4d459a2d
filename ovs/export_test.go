package ovs

// TxnCount is the number of transactions this client has sent.
func (c *Client) TxnCount() int64 { return c.txns.Load() }
