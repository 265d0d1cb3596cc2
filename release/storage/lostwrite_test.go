package storage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lossyStore performs a write and then loses its answer once: the record
// is written, the caller sees an error (an interrupt mid-request).
type lossyStore struct {
	Store
	loseCreate, loseUpdate bool
}

var errLostAnswer = errors.New(`Post "https://127.0.0.1/api/v1/namespaces/ml/secrets": context canceled`)

func (s *lossyStore) Create(ctx context.Context, r *Release) error {
	if err := s.Store.Create(ctx, r); err != nil || !s.loseCreate {
		return err
	}
	s.loseCreate = false
	return errLostAnswer
}

func (s *lossyStore) Update(ctx context.Context, r *Release) error {
	if !s.loseUpdate {
		return s.Store.Update(ctx, r)
	}
	s.loseUpdate = false
	c := *r // the write lands; r keeps its old token, as when the answer is lost
	if err := s.Store.Update(ctx, &c); err != nil {
		return err
	}
	return errLostAnswer
}

func deployedRecord(t *testing.T, s Store) {
	t.Helper()
	rec := &Release{Name: "chat", Revision: 1, Status: StatusDeployed, Chart: Chart{Name: "c", Version: "1"}, Manifest: "", Created: time.Now(), Updated: time.Now()}
	require.NoError(t, s.Create(context.Background(), rec))
}

// TestLockCreateAnswerLost: the pending record's create reached the store
// but its answer was lost: Acquire fails, and the record it wrote does not
// stay behind holding the lock.
func TestLockCreateAnswerLost(t *testing.T) {
	mem := NewMemory("ml")
	deployedRecord(t, mem)
	s := &lossyStore{Store: mem, loseCreate: true}
	_, err := Acquire(context.Background(), s, "chat", OpDeploy, LockOptions{Holder: "me pid 1"})
	require.ErrorIs(t, err, errLostAnswer)
	pending, err := Pending(context.Background(), mem, "chat")
	require.NoError(t, err)
	assert.Empty(t, pending, "no pending record left holding the lock")

	rec, err := Acquire(context.Background(), mem, "chat", OpDeploy, LockOptions{Holder: "next pid 2"})
	require.NoError(t, err, "the next operation takes the lock at once")
	assert.Equal(t, 2, rec.Revision)
}

// TestFinishAfterLostUpdate: an update of the held record landed but its
// answer was lost (its token is stale): finishing the record still works,
// so it never stays pending.
func TestFinishAfterLostUpdate(t *testing.T) {
	for _, finish := range []string{"failed", "deployed"} {
		t.Run(finish, func(t *testing.T) {
			mem := NewMemory("ml")
			deployedRecord(t, mem)
			rec, err := Acquire(context.Background(), mem, "chat", OpDeploy, LockOptions{Holder: "me pid 1"})
			require.NoError(t, err)
			s := &lossyStore{Store: mem, loseUpdate: true}
			rec.ReplicaSets = []ReplicaSetRef{{Deployment: "chat", Name: "chat-abc"}}
			require.ErrorIs(t, s.Update(context.Background(), rec), errLostAnswer)

			if finish == "failed" {
				require.NoError(t, MarkFailed(context.Background(), s, rec, nil, "Upgrade failed: Interrupted", nil))
			} else {
				require.NoError(t, MarkDeployed(context.Background(), s, rec, nil, "Upgrade complete"))
			}
			got, err := mem.Get(context.Background(), "chat", rec.Revision)
			require.NoError(t, err)
			assert.Equal(t, Status(finish), got.Status)
		})
	}
	t.Run("a record another operation took over is not overwritten", func(t *testing.T) {
		mem := NewMemory("ml")
		deployedRecord(t, mem)
		rec, err := Acquire(context.Background(), mem, "chat", OpDeploy, LockOptions{Holder: "me pid 1"})
		require.NoError(t, err)
		other, err := mem.Get(context.Background(), "chat", rec.Revision)
		require.NoError(t, err)
		other.Status, other.Description = StatusFailed, "interrupted: lock taken over by other pid 2"
		require.NoError(t, mem.Update(context.Background(), other))
		var conflict *ConflictError
		require.ErrorAs(t, MarkFailed(context.Background(), mem, rec, nil, "x", nil), &conflict)
	})
}
