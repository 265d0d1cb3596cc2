package storage

import "context"

// NextRevision returns the revision number a new record of release name
// takes: one more than the highest existing, or 1.
func NextRevision(ctx context.Context, s Store, name string) (int, error) {
	entries, err := s.List(ctx, name)
	if err != nil {
		return 0, err
	}
	return nextRevision(entries), nil
}
