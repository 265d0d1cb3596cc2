package storage

import (
	"context"
	"strconv"
	"sync"
)

// Memory is a Store kept in memory, for unit tests. It stores records in
// their encoded form, so that reads return copies and sizes are realistic,
// and it enforces the same concurrency rules as the Secrets store.
type Memory struct {
	db        *memoryDB
	namespace string
}

var _ Store = (*Memory)(nil)

type memoryKey struct {
	namespace, name string
	revision        int
}

type memoryRecord struct {
	status  Status
	data    []byte
	version string
}

type memoryDB struct {
	mu      sync.Mutex
	records map[memoryKey]memoryRecord
	seq     int64
}

// NewMemory returns an empty in-memory Store for namespace.
func NewMemory(namespace string) *Memory {
	return &Memory{db: &memoryDB{records: map[memoryKey]memoryRecord{}}, namespace: namespace}
}

// InNamespace returns a Store for namespace sharing m's records, as Secrets
// stores of one cluster share the cluster.
func (m *Memory) InNamespace(namespace string) *Memory {
	return &Memory{db: m.db, namespace: namespace}
}

// Namespace is the namespace records are read and written in.
func (m *Memory) Namespace() string { return m.namespace }

func (m *Memory) key(name string, revision int) memoryKey {
	return memoryKey{m.namespace, name, revision}
}

// nextVersion returns a fresh concurrency token; m.db.mu must be held.
func (m *Memory) nextVersion() string {
	m.db.seq++
	return strconv.FormatInt(m.db.seq, 10)
}

// encode checks that a write may go ahead (ctx live, r of this store's
// namespace) and encodes r.
func (m *Memory) encode(ctx context.Context, r *Release) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ownNamespace(m.namespace, r); err != nil {
		return nil, err
	}
	return Encode(r)
}

// Create stores a new record.
func (m *Memory) Create(ctx context.Context, r *Release) error {
	data, err := m.encode(ctx, r)
	if err != nil {
		return err
	}
	m.db.mu.Lock()
	defer m.db.mu.Unlock()
	k := m.key(r.Name, r.Revision)
	if _, ok := m.db.records[k]; ok {
		return &existsError{namespace: m.namespace, name: r.Name, revision: r.Revision}
	}
	v := m.nextVersion()
	m.db.records[k] = memoryRecord{status: r.Status, data: data, version: v}
	r.version = v
	return nil
}

// Update overwrites a record, refusing if it changed since r was read.
func (m *Memory) Update(ctx context.Context, r *Release) error {
	data, err := m.encode(ctx, r)
	if err != nil {
		return err
	}
	m.db.mu.Lock()
	k := m.key(r.Name, r.Revision)
	old, ok := m.db.records[k]
	switch {
	case !ok:
		m.db.mu.Unlock()
		return notFound(ctx, m, r.Name, r.Revision)
	case r.version != "" && r.version != old.version:
		m.db.mu.Unlock()
		return &ConflictError{Namespace: m.namespace, Name: r.Name, Revision: r.Revision}
	}
	v := m.nextVersion()
	m.db.records[k] = memoryRecord{status: r.Status, data: data, version: v}
	m.db.mu.Unlock()
	r.version = v
	return nil
}

// Get reads one revision.
func (m *Memory) Get(ctx context.Context, name string, revision int) (*Release, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	m.db.mu.Lock()
	rec, ok := m.db.records[m.key(name, revision)]
	m.db.mu.Unlock()
	if !ok {
		return nil, notFound(ctx, m, name, revision)
	}
	return m.entry(m.key(name, revision), rec, new(decoder)).Release()
}

// List returns the records of release name.
func (m *Memory) List(ctx context.Context, name string) ([]Entry, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return m.list(ctx, func(k memoryKey) bool { return k.namespace == m.namespace && k.name == name })
}

// ListAll returns the records of every release in namespace ("" for all).
func (m *Memory) ListAll(ctx context.Context, namespace string) ([]Entry, error) {
	return m.list(ctx, func(k memoryKey) bool { return namespace == "" || k.namespace == namespace })
}

func (m *Memory) list(ctx context.Context, match func(memoryKey) bool) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.db.mu.Lock()
	var entries []Entry
	d := new(decoder)
	for k, rec := range m.db.records {
		if match(k) {
			entries = append(entries, m.entry(k, rec, d))
		}
	}
	m.db.mu.Unlock()
	sortEntries(entries)
	return entries, nil
}

// entry makes the lazily decoded Entry of a stored record.
func (m *Memory) entry(k memoryKey, rec memoryRecord, d *decoder) Entry {
	return Entry{
		Namespace: k.namespace,
		Name:      k.name,
		Revision:  k.revision,
		Status:    rec.status,
		decode: func() (*Release, error) {
			r, err := d.decode(rec.data)
			if err != nil {
				return nil, err
			}
			r.Namespace, r.Name, r.Revision, r.Status = k.namespace, k.name, k.revision, rec.status
			r.version = rec.version
			return r, nil
		},
	}
}

// Delete removes one revision's record.
func (m *Memory) Delete(ctx context.Context, name string, revision int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateName(name); err != nil {
		return err
	}
	m.db.mu.Lock()
	k := m.key(name, revision)
	_, ok := m.db.records[k]
	delete(m.db.records, k)
	m.db.mu.Unlock()
	if !ok {
		return notFound(ctx, m, name, revision)
	}
	return nil
}

// existsError is Memory's counterpart of the API server's AlreadyExists.
type existsError struct {
	namespace, name string
	revision        int
}

func (e *existsError) Error() string {
	return "create record " + e.namespace + "/" + SecretName(e.name, e.revision) + ": " + ErrExists.Error()
}

func (e *existsError) Is(target error) bool { return target == ErrExists }
