package storage

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/vllmctl/vllmctl/internal/rollout"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	full := sampleRecord(t, "chat", 3, StatusFailed)
	full.Namespace = "ml"
	full.RollbackOf = 2
	full.Failure = &rollout.Diagnosis{
		Reason: "CrashLoopBackOff", Object: "Deployment/chat-vllm", Pod: "chat-vllm-6d9f7c8b5-abcde",
		Container: "vllm", ExitCode: 137, RestartCount: 4, Message: "OOMKilled",
		Events:  []string{"Back-off restarting failed container"},
		LogTail: []string{"torch.OutOfMemoryError: CUDA out of memory"},
	}
	tests := []struct {
		name string
		rel  *Release
	}{
		{"full record", full},
		{"minimal record", &Release{Name: "a", Namespace: "ns", Revision: 1, Status: StatusPendingInstall}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := Encode(tt.rel)
			require.NoError(t, err)
			got, err := Decode(data)
			require.NoError(t, err)
			assert.Equal(t, tt.rel, got)
		})
	}
}

func TestEncodeIsGzipJSON(t *testing.T) {
	r := sampleRecord(t, "chat", 1, StatusDeployed)
	data, err := Encode(r)
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(data))
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	for _, key := range []string{"name", "namespace", "revision", "status", "description", "chart", "values",
		"manifest", "replicaSets", "created", "updated"} {
		assert.Contains(t, doc, key)
	}
	assert.Equal(t, map[string]any{"name": "vllm", "version": "0.3.0", "appVersion": "v0.11.0"}, doc["chart"])
	assert.Equal(t, map[string]any{
		"deployment": "chat-vllm", "name": "chat-vllm-6d9f7c8b5", "podTemplateHash": "6d9f7c8b5", "revision": float64(1),
	}, doc["replicaSets"].([]any)[0])
	assert.Less(t, len(data), len(raw)/2, "the record is compressed")
}

func TestDecodeRejectsGarbage(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"not gzip", []byte("{}")},
		{"gzip of not JSON", gzipString(t, "nope")},
		{"empty", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.data)
			require.Error(t, err)
		})
	}
}

// TestDecodeBoundsTheDecompressedSize: a record that decompresses to more
// than MaxDecodedBytes fails with an error saying so; valid JSON padded to
// exactly MaxDecodedBytes still decodes.
func TestDecodeBoundsTheDecompressedSize(t *testing.T) {
	r := sampleRecord(t, "chat", 1, StatusDeployed)
	doc, err := json.Marshal(r)
	require.NoError(t, err)
	t.Run("at the limit", func(t *testing.T) {
		got, err := Decode(gzipPadded(t, doc, MaxDecodedBytes))
		require.NoError(t, err)
		assert.Equal(t, r.Manifest, got.Manifest)
	})
	t.Run("one byte over", func(t *testing.T) {
		_, err := Decode(gzipPadded(t, doc, MaxDecodedBytes+1))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "decompresses to more than 67108864 bytes")
	})
	t.Run("a bomb", func(t *testing.T) {
		bomb := gzipZeros(t, MaxDecodedBytes+1)
		assert.Less(t, len(bomb), MaxRecordBytes, "it fits in a record Secret")
		_, err := Decode(bomb)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "decompresses to more than 67108864 bytes")
	})
}

// TestDecoderIsReusable: one decoder, as the entries of one list share it,
// decodes each record right whatever came before it, failures included, and
// may be used from several goroutines.
func TestDecoderIsReusable(t *testing.T) {
	d := new(decoder)
	records := make([]*Release, 4)
	data := make([][]byte, 4)
	for i := range records {
		records[i] = sampleRecord(t, "chat", i+1, StatusSuperseded)
		var err error
		data[i], err = Encode(records[i])
		require.NoError(t, err)
	}
	bomb := gzipZeros(t, MaxDecodedBytes+1)
	sequence := []struct {
		data []byte
		want *Release // nil: an error
	}{
		{data[0], records[0]},
		{[]byte("garbage, not gzip"), nil},
		{data[1], records[1]},
		{bomb, nil},
		{data[2], records[2]},
		{gzipString(t, `{"name": "chat", "revision": `), nil},
		{data[3], records[3]},
		{data[0], records[0]},
	}
	for i, s := range sequence {
		got, err := d.decode(s.data)
		if s.want == nil {
			assert.Error(t, err, "record %d", i)
			continue
		}
		require.NoError(t, err, "record %d", i)
		assert.Equal(t, s.want, got, "record %d", i)
	}

	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				got, err := d.decode(data[g])
				if assert.NoError(t, err) {
					assert.Equal(t, records[g].Revision, got.Revision)
					assert.Equal(t, records[g].Values, got.Values)
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkDecodeList: decoding the latest records of 100 releases, as
// `list` does, with one decoder shared by the list or a new one per record.
func BenchmarkDecodeList(b *testing.B) {
	data := make([][]byte, 100)
	for i := range data {
		var err error
		data[i], err = Encode(sampleRecord(b, "r"+strconv.Itoa(i), 1, StatusDeployed))
		require.NoError(b, err)
	}
	b.Run("shared", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d := new(decoder)
			for _, p := range data {
				if _, err := d.decode(p); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("one per record", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, p := range data {
				if _, err := Decode(p); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func gzipBytes(t *testing.T, p []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(p)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// gzipZeros returns gzip data that decompresses to n zero bytes.
func gzipZeros(t *testing.T, n int) []byte {
	t.Helper()
	return gzipRepeated(t, 0, n)
}

// gzipPadded returns gzip data that decompresses to doc followed by spaces,
// n bytes in all.
func gzipPadded(t *testing.T, doc []byte, n int) []byte {
	t.Helper()
	return append(gzipBytes(t, doc), gzipRepeated(t, ' ', n-len(doc))...)
}

// gzipRepeated returns gzip data that decompresses to n bytes c, made
// cheaply: one member of 1 MiB, repeated (a gzip stream may hold several
// members, which a reader reads as one), and one member for the rest.
func gzipRepeated(t *testing.T, c byte, n int) []byte {
	t.Helper()
	const mib = 1 << 20
	out := bytes.Repeat(gzipBytes(t, bytes.Repeat([]byte{c}, mib)), n/mib)
	return append(out, gzipBytes(t, bytes.Repeat([]byte{c}, n%mib))...)
}

func gzipString(t *testing.T, s string) []byte {
	t.Helper()
	return gzipBytes(t, []byte(s))
}

func TestToSecretFollowsContract(t *testing.T) {
	tests := []struct {
		name     string
		release  string
		revision int
		status   Status
		wantName string
	}{
		{"deployed", "chat", 1, StatusDeployed, "vllmctl.release.v1.chat.v1"},
		{"pending", "chat", 12, StatusPendingUpgrade, "vllmctl.release.v1.chat.v12"},
		{"dashes", "my-llm-2", 300, StatusSuperseded, "vllmctl.release.v1.my-llm-2.v300"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleRecord(t, tt.release, tt.revision, tt.status)
			r.Namespace = "ml"
			sec, err := ToSecret(r)
			require.NoError(t, err)
			assert.Equal(t, tt.wantName, sec.Name)
			assert.Equal(t, tt.wantName, SecretName(tt.release, tt.revision))
			assert.Equal(t, "ml", sec.Namespace)
			assert.Equal(t, corev1.SecretType("vllmctl.io/release.v1"), sec.Type)
			assert.Equal(t, map[string]string{
				"app.kubernetes.io/managed-by": "vllmctl",
				"vllmctl.io/release":           tt.release,
				"vllmctl.io/revision":          strconv.Itoa(tt.revision),
				"vllmctl.io/status":            string(tt.status),
			}, sec.Labels)
			assert.Equal(t, []string{"release"}, dataKeys(sec.Data))
			back, err := FromSecret(sec)
			require.NoError(t, err)
			assert.Equal(t, r, back)
		})
	}
}

func TestFromSecretRejectsForeignSecrets(t *testing.T) {
	good, err := ToSecret(&Release{Name: "chat", Namespace: "ml", Revision: 1, Status: StatusDeployed})
	require.NoError(t, err)
	tests := []struct {
		name   string
		mutate func(s *corev1.Secret)
	}{
		{"wrong type", func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }},
		{"no revision label", func(s *corev1.Secret) { delete(s.Labels, LabelRevision) }},
		{"bad revision label", func(s *corev1.Secret) { s.Labels[LabelRevision] = "x" }},
		{"corrupt data", func(s *corev1.Secret) { s.Data[DataKey] = []byte("garbage") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good.DeepCopy()
			tt.mutate(s)
			_, err := FromSecret(s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "Secret ml/vllmctl.release.v1.chat.v1")
		})
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"chat", true},
		{"llama-3-8b", true},
		{"", false},
		{"Chat", false},
		{"chat_1", false},
		{"chat.v1", false},
		{"-chat", false},
		{string(bytes.Repeat([]byte("a"), 53)), true},
		{string(bytes.Repeat([]byte("a"), 54)), false}, // Helm's limit, as charts.ValidateReleaseName
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateName(tt.name)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			var inv *InvalidNameError
			require.ErrorAs(t, err, &inv)
			assert.Equal(t, 2, inv.ExitCode())
			assert.Contains(t, err.Error(), "invalid release name")
			assert.Contains(t, err.Error(), strconv.Quote(tt.name))
			if tt.name != "" {
				assert.Contains(t, err.Error(), "DNS-1123 label of at most 53 characters")
			}
		})
	}
}

func TestStatus(t *testing.T) {
	pending := map[Status]bool{StatusPendingInstall: true, StatusPendingUpgrade: true, StatusPendingRollback: true}
	for _, s := range []Status{StatusPendingInstall, StatusPendingUpgrade, StatusPendingRollback, StatusDeployed,
		StatusSuperseded, StatusFailed, StatusUninstalled} {
		t.Run(string(s), func(t *testing.T) {
			assert.True(t, s.IsValid())
			assert.Equal(t, pending[s], s.IsPending())
		})
	}
	assert.False(t, Status("uninstalling").IsValid())
}

func TestErrorMessages(t *testing.T) {
	tests := []struct {
		name string
		err  interface {
			error
			ExitCode() int
		}
		want string
		code int
	}{
		{"revision not found", &NotFoundError{Namespace: "ml", Name: "chat", Revision: 7, Existing: []int{1, 2, 3}},
			"revision 7 of release chat not found; revisions: 1, 2, 3", 2},
		{"release not found", &NotFoundError{Namespace: "ml", Name: "chat"},
			"release chat not found in namespace ml", 2},
		{"locked", &LockedError{Namespace: "ml", Name: "chat", Revision: 4, Status: StatusPendingUpgrade,
			Holder: "bob@ci pid 7", Description: "Upgrade in progress", Age: 125e9, Timeout: 600e9},
			"release chat in namespace ml is locked by another operation: revision 4 is pending-upgrade (Upgrade in progress), " +
				"held by bob@ci pid 7 for 2m5s; it is taken over once watched unrenewed for its lease of 10m0s, or now with --force-unlock", 5},
		{"conflict", &ConflictError{Namespace: "ml", Name: "chat", Revision: 4},
			"release chat revision 4 (Secret ml/vllmctl.release.v1.chat.v4) was changed by another operation since it was read (lock taken over?)", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.err.Error())
			assert.Equal(t, tt.code, tt.err.ExitCode())
		})
	}
}

func dataKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestHelmRevision: the Helm revision a record was adopted from, from its
// field, or from the description of records adopted before the field.
func TestHelmRevision(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Release
		want int
	}{
		{"field", Release{Revision: 3, AdoptedFrom: 3, Description: AdoptedDescription(3)}, 3},
		{"old record", Release{Revision: 3, Description: AdoptedDescription(3)}, 3},
		{"old record with Helm's description", Release{Revision: 1, Description: AdoptedDescription(1) + ": Install complete"}, 1},
		{"another revision's number", Release{Revision: 1, Description: AdoptedDescription(10)}, 0},
		{"not adopted", Release{Revision: 2, Description: "Upgrade complete"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.r.HelmRevision())
		})
	}
}
