package storage

import (
	"context"
	"testing"
)

// BenchmarkHistory300 measures `history` of a release with 300 revisions:
// one list by label selector and the decoding of every record. The
// "list-only" variants measure listing without decoding (what the lock,
// pruning and NextRevision need).
func BenchmarkHistory300(b *testing.B) {
	const n = 300
	for _, be := range storeBackends() {
		ctx := context.Background()
		s, _ := be.new(b, "ml")
		for i := 1; i <= n; i++ {
			if err := s.Create(ctx, sampleRecord(b, "chat", i, StatusSuperseded)); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(be.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				hist, err := History(ctx, s, "chat")
				if err != nil || len(hist) != n {
					b.Fatalf("history: %d records, %v", len(hist), err)
				}
			}
		})
		b.Run(be.name+"/list-only", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				entries, err := s.List(ctx, "chat")
				if err != nil || len(entries) != n {
					b.Fatalf("list: %d entries, %v", len(entries), err)
				}
			}
		})
	}
}
