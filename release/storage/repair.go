package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// Repair replaces every unreadable record of release name by a readable
// one that says so: same revision, status failed (superseded or
// uninstalled kept as they were), no manifest (the objects only that
// revision had are no longer pruned by vllmctl), description naming the
// repair. It returns the revisions it repaired. It is `vllmctl history
// RELEASE --repair`; deleting the record's Secret is the other way out.
func Repair(ctx context.Context, s Store, name string, clk clock.PassiveClock) ([]int, error) {
	entries, err := listExisting(ctx, s, name)
	if err != nil {
		return nil, err
	}
	now := Stamp(clk)
	var repaired []int
	for _, e := range entries {
		_, err := e.Release()
		var unreadable *UnreadableError
		if !errors.As(err, &unreadable) {
			continue
		}
		status := StatusFailed
		if e.Status == StatusSuperseded || e.Status == StatusUninstalled {
			status = e.Status
		}
		why := fmt.Sprintf("unreadable record replaced by vllmctl history --repair (was %s): %v", e.Status, unreadable.Err)
		if err := replaceRecord(ctx, s, e, status, why, now); err != nil {
			return repaired, err
		}
		repaired = append(repaired, e.Revision)
	}
	return repaired, nil
}

// replaceRecord replaces the record of e, which cannot be read, by a
// readable one with status and description and no manifest.
func replaceRecord(ctx context.Context, s Store, e Entry, status Status, description string, now time.Time) error {
	r := &Release{
		Name: e.Name, Namespace: s.Namespace(), Revision: e.Revision, Status: status,
		Description: description, Created: now, Updated: now,
	}
	if err := s.Delete(ctx, e.Name, e.Revision); err != nil {
		return fmt.Errorf("release %s: replace the unreadable record of revision %d: delete it: %w", e.Name, e.Revision, err)
	}
	if err := s.Create(ctx, r); err != nil {
		return fmt.Errorf("release %s: replace the unreadable record of revision %d: write it: %w", e.Name, e.Revision, err)
	}
	return nil
}
