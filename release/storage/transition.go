package storage

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/internal/rollout"
)

// MarkDeployed finishes r as the deployed revision of its release and
// supersedes every other deployed one, so that exactly one stays deployed.
// r is written first: should the process die in between, the newest revision
// is still deployed (Deployed picks the highest) and the next MarkDeployed
// repairs the rest. An empty description keeps r's.
func MarkDeployed(ctx context.Context, s Store, r *Release, clk clock.PassiveClock, description string) error {
	return MarkDeployedAmong(ctx, s, r, clk, description, nil)
}

// MarkDeployedAmong is MarkDeployed for a caller holding the lock, which
// may know the release's other records (entries, as listed under the
// lock; nil: unknown, listed): they are not listed again.
func MarkDeployedAmong(ctx context.Context, s Store, r *Release, clk clock.PassiveClock, description string, entries []Entry) error {
	r.Status = StatusDeployed
	r.Failure = nil
	if description != "" {
		r.Description = description
	}
	r.Updated = Stamp(clk)
	if err := updateHeld(ctx, s, r); err != nil {
		return err
	}
	if entries == nil {
		return supersedeDeployed(ctx, s, r)
	}
	return supersedeAmong(ctx, s, r, entries)
}

// updateHeld writes r, a record the caller holds (pending, its holder
// r.Holder). An earlier write of the caller may have reached the store
// although its answer was lost (an interrupt mid-request), leaving r's
// concurrency token behind: on a conflict the record is read again and,
// when it is still pending and held by r.Holder, written with the fresh
// token. Any other change is another operation's (a lock taken over), and
// the conflict stands.
func updateHeld(ctx context.Context, s Store, r *Release) error {
	err := s.Update(ctx, r)
	var conflict *ConflictError
	if !errors.As(err, &conflict) || r.Holder == "" {
		return err
	}
	cur, gerr := s.Get(ctx, r.Name, r.Revision)
	if gerr != nil || !cur.Status.IsPending() || cur.Holder != r.Holder {
		return err
	}
	r.version = cur.version
	return s.Update(ctx, r)
}

// MarkFailed finishes r as failed, with the diagnosis f (may be nil). The
// deployed revision, if any, stays deployed. An empty description keeps r's.
func MarkFailed(ctx context.Context, s Store, r *Release, clk clock.PassiveClock, description string, f *rollout.Diagnosis) error {
	r.Status = StatusFailed
	r.Failure = f
	if description != "" {
		r.Description = description
	}
	r.Updated = Stamp(clk)
	return updateHeld(ctx, s, r)
}

// MarkUninstalled finishes r as uninstalled (uninstall --keep-history) and
// supersedes the deployed revision: nothing is deployed any more. An empty
// description keeps r's.
func MarkUninstalled(ctx context.Context, s Store, r *Release, clk clock.PassiveClock, description string) error {
	r.Status = StatusUninstalled
	if description != "" {
		r.Description = description
	}
	r.Updated = Stamp(clk)
	if err := updateHeld(ctx, s, r); err != nil {
		return err
	}
	return supersedeDeployed(ctx, s, r)
}

// supersedeDeployed marks every deployed revision of r's release other than
// r superseded. Their Updated time is kept, so that history shows when each
// revision's own operation finished.
func supersedeDeployed(ctx context.Context, s Store, r *Release) error {
	entries, err := s.List(ctx, r.Name)
	if err != nil {
		return err
	}
	return supersedeAmong(ctx, s, r, entries)
}

// supersedeAmong is supersedeDeployed over the records entries.
func supersedeAmong(ctx context.Context, s Store, r *Release, entries []Entry) error {
	for _, e := range entries {
		if e.Status != StatusDeployed || e.Revision == r.Revision {
			continue
		}
		old, err := e.Release()
		var unreadable *UnreadableError
		switch {
		case errors.As(err, &unreadable):
			// Its objects were replaced by r's: say so in a record that
			// can be read.
			desc := fmt.Sprintf("unreadable record superseded by revision %d: %v", r.Revision, unreadable.Err)
			if err := replaceRecord(ctx, s, e, StatusSuperseded, desc, r.Updated); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		}
		old.Status = StatusSuperseded // Updated stays: when it was deployed
		if err := s.Update(ctx, old); err != nil {
			return err
		}
	}
	return nil
}
