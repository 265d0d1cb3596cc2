package storage

import "context"

// DeployedAmong returns the deployed entry among entries (the highest
// revision, should an interrupted transition have left two).
func DeployedAmong(entries []Entry) (Entry, bool) {
	var out Entry
	found := false
	for _, e := range entries {
		if e.Status == StatusDeployed && (!found || e.Revision > out.Revision) {
			out, found = e, true
		}
	}
	return out, found
}

// RevisionAmong returns the entry of revision among entries.
func RevisionAmong(entries []Entry, revision int) (Entry, bool) {
	for _, e := range entries {
		if e.Revision == revision {
			return e, true
		}
	}
	return Entry{}, false
}

// Select reads the record a command about one revision shows (get):
// revision's when it is not 0, else the deployed revision's, else the
// last one's. A release without records, or a revision it does not have,
// is a *NotFoundError (listing the revisions it has).
func Select(ctx context.Context, s Store, name string, revision int) (*Release, error) {
	entries, err := listExisting(ctx, s, name)
	if err != nil {
		return nil, err
	}
	if revision != 0 {
		e, ok := RevisionAmong(entries, revision)
		if !ok {
			return nil, &NotFoundError{Namespace: s.Namespace(), Name: name, Revision: revision, Existing: Revisions(entries)}
		}
		return e.Release()
	}
	if e, ok := DeployedAmong(entries); ok {
		return e.Release()
	}
	return entries[len(entries)-1].Release()
}
