package etcd

import (
	"sync"
)

// Pool keeps one client per cluster, so reconciles reuse connections instead of dialing every
// member each time. Keys should include the cluster's UID: a recreated cluster of the same name
// gets a fresh client.
type Pool struct {
	mu      sync.Mutex
	clients map[string]*Client
	// dial is New, replaceable in tests.
	dial func(endpoints []string) (*Client, error)
}

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{clients: map[string]*Client{}, dial: New} }

// Get returns the cluster's client, pointed at endpoints (the voters' client URLs).
func (p *Pool) Get(key string, endpoints []string) (*Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[key]; ok {
		c.SetEndpoints(endpoints)
		return c, nil
	}
	c, err := p.dial(endpoints)
	if err != nil {
		return nil, err
	}
	p.clients[key] = c
	return c, nil
}

// Forget closes and drops the cluster's client; call it when the cluster is deleted.
func (p *Pool) Forget(key string) {
	p.mu.Lock()
	c, ok := p.clients[key]
	delete(p.clients, key)
	p.mu.Unlock()
	if ok {
		_ = c.Close()
	}
}

// Len is the number of cached clients.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.clients)
}
