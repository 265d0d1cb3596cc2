package release

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAdoptHistoryNote: adopting more revisions than --history-max's
// default says that the next deploy deletes the older ones.
func TestAdoptHistoryNote(t *testing.T) {
	cases := []struct {
		n    int
		says string
	}{
		{n: 1},
		{n: DefaultHistoryMax},
		{n: 50, says: "50 revisions adopted: the next deploy or rollback with the default --history-max 10 keeps the newest 10 records and deletes the 40 older ones"},
	}
	for _, tc := range cases {
		got := historyNote(tc.n)
		if tc.says == "" {
			assert.Empty(t, got, "%d revisions", tc.n)
			continue
		}
		assert.Contains(t, got, tc.says)
	}
}
