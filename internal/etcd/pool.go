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
	creds   map[string]*Credentials
	// dial is New, replaceable in tests.
	dial func(endpoints []string, creds *Credentials) (*Client, error)
}

// NewPool returns an empty pool.
func NewPool() *Pool {
	return &Pool{clients: map[string]*Client{}, creds: map[string]*Credentials{}, dial: New}
}

// Credentials returns the cluster's TLS credentials, created empty on first use. Updating them
// reaches every cached connection of the cluster on its next handshake.
func (p *Pool) Credentials(key string) *Credentials {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.creds[key]
	if !ok {
		c = &Credentials{}
		p.creds[key] = c
	}
	return c
}

// Get returns the cluster's client, pointed at endpoints (the voters' client URLs). With secure,
// it uses the cluster's Credentials; a cluster's TLS setting never changes (it is locked at
// creation), so the cached client is always of the right kind.
func (p *Pool) Get(key string, endpoints []string, secure bool) (*Client, error) {
	var creds *Credentials
	if secure {
		creds = p.Credentials(key)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[key]; ok {
		c.SetEndpoints(endpoints)
		return c, nil
	}
	c, err := p.dial(endpoints, creds)
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
	delete(p.creds, key)
	p.mu.Unlock()
	if ok {
		_ = c.Close()
	}
}

// Release closes the cluster's connections and drops its client, keeping its credentials: the next
// Get dials again. For a settled cluster between reconciles (30 s apart): each client holds a gRPC
// connection per member and one for the cluster, with their goroutines and buffers, which at a
// hundred clusters were most of the operator's heap; dialling them again costs a few TLS
// handshakes per cluster every 30 s.
func (p *Pool) Release(key string) {
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
