package release

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/release/storage"
)

// TestRedactAnalysis: an analysis' reason and measurements' messages
// (providers' errors and answers) lose a Secret's value in the record
// and in the result; the figures and the original stay as they were.
func TestRedactAnalysis(t *testing.T) {
	red := diff.NewRedactor()
	red.AddValues("s3cr3t-token-value")
	v := 0.5
	report := &storage.AnalysisReport{Provider: "prometheus", Outcome: storage.AnalysisInconclusive,
		Reason: "query failed: bad token s3cr3t-token-value",
		Measurements: []storage.AnalysisMeasurement{
			{Metric: "errorRatio", Value: &v, Condition: "value <= 0.05", Outcome: storage.AnalysisError,
				Message: "401 from prometheus: Authorization: Bearer s3cr3t-token-value"},
		}}
	rec := diff.RedactCopy(red, &storage.Release{Name: "chat", Analysis: report})
	res := diff.RedactCopy(red, &Result{Analysis: report})
	for name, got := range map[string]*storage.AnalysisReport{"record": rec.Analysis, "result": res.Analysis} {
		require.NotNil(t, got, name)
		assert.Equal(t, "query failed: bad token (redacted)", got.Reason, name)
		require.Len(t, got.Measurements, 1, name)
		assert.Equal(t, "401 from prometheus: Authorization: Bearer (redacted)", got.Measurements[0].Message, name)
		assert.Equal(t, &v, got.Measurements[0].Value, name)
	}
	assert.Contains(t, report.Reason, "s3cr3t-token-value", "the original is not changed")
}
