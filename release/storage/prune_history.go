package storage

import (
	"context"
	"errors"
)

// PruneHistory deletes the oldest records of release name beyond keep
// (--history-max; 0 or less: unlimited) and returns the deleted revisions.
// The deployed revision and pending ones (a lock in use) are never deleted;
// they count towards keep, so when they are among the oldest more than keep
// records may remain.
func PruneHistory(ctx context.Context, s Store, name string, keep int) ([]int, error) {
	if keep <= 0 {
		return nil, nil
	}
	entries, err := s.List(ctx, name)
	if err != nil {
		return nil, err
	}
	return PruneHistoryAmong(ctx, s, name, keep, entries)
}

// PruneHistoryAmong is PruneHistory over the records entries (every record
// of the release, oldest first, as a caller holding the lock knows them).
func PruneHistoryAmong(ctx context.Context, s Store, name string, keep int, entries []Entry) ([]int, error) {
	if keep <= 0 {
		return nil, nil
	}
	excess := len(entries) - keep
	var deleted []int
	for _, e := range entries { // oldest first
		if excess <= 0 {
			break
		}
		if e.Status == StatusDeployed || e.Status.IsPending() {
			continue
		}
		if err := s.Delete(ctx, name, e.Revision); err != nil {
			var nf *NotFoundError
			if errors.As(err, &nf) {
				excess-- // deleted meanwhile
				continue
			}
			return deleted, err
		}
		deleted = append(deleted, e.Revision)
		excess--
	}
	return deleted, nil
}
