package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// Store keeps the records of the releases of one namespace (plus ListAll,
// which can look at other namespaces). Implementations are safe for
// concurrent use.
type Store interface {
	// Namespace is the namespace the store reads and writes records in.
	Namespace() string
	// Create writes a new record. r.Namespace must be empty (it is then set)
	// or the store's namespace. When the revision's record exists already
	// the error matches ErrExists. On success r carries the record's
	// concurrency token, for a later Update.
	Create(ctx context.Context, r *Release) error
	// Update overwrites an existing record. If r was read from (or written
	// to) the store and the record changed since, Update fails with a
	// *ConflictError. A missing record is a *NotFoundError.
	Update(ctx context.Context, r *Release) error
	// Get reads one revision; a missing one is a *NotFoundError listing the
	// revisions that exist.
	Get(ctx context.Context, name string, revision int) (*Release, error)
	// List returns the records of release name, lowest revision first,
	// without decoding them; none is not an error.
	List(ctx context.Context, name string) ([]Entry, error)
	// ListAll returns the records of every release in namespace ("" for all
	// namespaces), ordered by namespace, release name, then revision.
	ListAll(ctx context.Context, namespace string) ([]Entry, error)
	// Delete removes one revision's record; a missing one is a
	// *NotFoundError.
	Delete(ctx context.Context, name string, revision int) error
}

// Entry is a listed record: its identity and status, read from the record's
// labels, and its body, decoded only when Release is called.
type Entry struct {
	Namespace string
	Name      string
	Revision  int
	Status    Status
	decode    func() (*Release, error)
}

// Release decodes the entry's record. Each call decodes afresh and returns a
// value the caller owns.
// A record that cannot be decoded is an *UnreadableError.
func (e Entry) Release() (*Release, error) {
	if e.decode == nil {
		return nil, &UnreadableError{Namespace: e.Namespace, Name: e.Name, Revision: e.Revision, Err: errors.New("entry has no record")}
	}
	r, err := e.decode()
	if err != nil {
		var unreadable *UnreadableError
		if errors.As(err, &unreadable) {
			return nil, err
		}
		return nil, &UnreadableError{Namespace: e.Namespace, Name: e.Name, Revision: e.Revision, Err: err}
	}
	return r, nil
}

// CheckReadable decodes every entry and returns the first
// *UnreadableError: operations that need the release's history refuse
// with it before they write a record.
func CheckReadable(entries []Entry) error {
	for _, e := range entries {
		if _, err := e.Release(); err != nil {
			return err
		}
	}
	return nil
}

// HistoryEntries returns the records of release name, lowest revision
// first, undecoded: each can be read (or found unreadable) on its own. A
// release without records is a *NotFoundError.
func HistoryEntries(ctx context.Context, s Store, name string) ([]Entry, error) {
	return listExisting(ctx, s, name)
}

// Revisions returns the revisions of entries, in order (nil for none).
func Revisions(entries []Entry) []int {
	var revs []int
	for _, e := range entries {
		revs = append(revs, e.Revision)
	}
	return revs
}

// DecodeAll decodes every entry, in order.
func DecodeAll(entries []Entry) ([]*Release, error) {
	out := make([]*Release, 0, len(entries))
	for _, e := range entries {
		r, err := e.Release()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// History returns every revision of release name, lowest first, decoded. A
// release without records is a *NotFoundError.
func History(ctx context.Context, s Store, name string) ([]*Release, error) {
	entries, err := listExisting(ctx, s, name)
	if err != nil {
		return nil, err
	}
	return DecodeAll(entries)
}

// Last returns the highest revision of release name. A release without
// records is a *NotFoundError.
func Last(ctx context.Context, s Store, name string) (*Release, error) {
	entries, err := listExisting(ctx, s, name)
	if err != nil {
		return nil, err
	}
	return entries[len(entries)-1].Release()
}

// Deployed returns the deployed revision of release name (the highest one,
// should an interrupted transition have left two). When none is deployed the
// error matches ErrNoDeployed; a release without records is a
// *NotFoundError.
func Deployed(ctx context.Context, s Store, name string) (*Release, error) {
	entries, err := listExisting(ctx, s, name)
	if err != nil {
		return nil, err
	}
	if e, ok := DeployedAmong(entries); ok {
		return e.Release()
	}
	return nil, fmt.Errorf("release %s in namespace %s: %w", name, s.Namespace(), ErrNoDeployed)
}

// Pending returns the pending records of release name (normally at most
// one), lowest revision first.
func Pending(ctx context.Context, s Store, name string) ([]*Release, error) {
	entries, err := s.List(ctx, name)
	if err != nil {
		return nil, err
	}
	return DecodeAll(slices.DeleteFunc(entries, func(e Entry) bool { return !e.Status.IsPending() }))
}

func nextRevision(entries []Entry) int {
	next := 1
	for _, e := range entries {
		next = max(next, e.Revision+1)
	}
	return next
}

// LatestPerRelease keeps, of entries, the highest revision of each release,
// in the order of the input (which ListAll sorts by namespace and name).
func LatestPerRelease(entries []Entry) []Entry {
	type key struct{ ns, name string }
	idx := map[key]int{}
	var out []Entry
	for _, e := range entries {
		k := key{e.Namespace, e.Name}
		if i, ok := idx[k]; ok {
			if e.Revision > out[i].Revision {
				out[i] = e
			}
			continue
		}
		idx[k] = len(out)
		out = append(out, e)
	}
	return out
}

// listExisting lists release name and reports a release without records as
// a *NotFoundError.
func listExisting(ctx context.Context, s Store, name string) ([]Entry, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	entries, err := s.List(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, &NotFoundError{Namespace: s.Namespace(), Name: name}
	}
	return entries, nil
}

// notFound builds the *NotFoundError for a missing revision, listing the
// revisions that exist.
func notFound(ctx context.Context, s Store, name string, revision int) error {
	entries, err := s.List(ctx, name)
	if err != nil {
		return err
	}
	return &NotFoundError{Namespace: s.Namespace(), Name: name, Revision: revision, Existing: Revisions(entries)}
}

// sortEntries orders entries by namespace, release name, then revision.
func sortEntries(entries []Entry) {
	slices.SortFunc(entries, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Revision, b.Revision))
	})
}

// Plan is what a release's records imply for its next revision: the
// revision number and whether it is an upgrade (a revision is deployed).
// It is the one rule for both, used by deploy (before and under the lock),
// the lock itself and diff.
type Plan struct {
	Revision int
	Upgrade  bool
}

// PlanOf returns the plan of the next revision after entries.
func PlanOf(entries []Entry) Plan {
	p := Plan{Revision: nextRevision(entries)}
	for _, e := range entries {
		if e.Status == StatusDeployed {
			p.Upgrade = true
		}
	}
	return p
}

// Rewriting returns a Store over s that writes rewrite(r), a copy, in place
// of each record r it creates or updates; r gets the copy's namespace and
// concurrency token, so the caller goes on with its own record. Wrapping a
// Rewriting store again replaces its rewrite rather than stacking another.
func Rewriting(s Store, rewrite func(*Release) *Release) Store {
	if rs, ok := s.(*rewritingStore); ok {
		s = rs.Store
	}
	return &rewritingStore{Store: s, rewrite: rewrite}
}

type rewritingStore struct {
	Store
	rewrite func(*Release) *Release
}

func (s *rewritingStore) Create(ctx context.Context, r *Release) error {
	c := s.rewrite(r)
	err := s.Store.Create(ctx, c)
	r.Namespace, r.version = c.Namespace, c.version
	return err
}

func (s *rewritingStore) Update(ctx context.Context, r *Release) error {
	c := s.rewrite(r)
	err := s.Store.Update(ctx, c)
	r.version = c.version
	return err
}
