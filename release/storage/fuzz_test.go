package storage

import (
	"testing"
	"time"
)

// FuzzDecode: any record data decodes or fails with an error (an
// unreadable record); it never panics, and what decodes encodes again.
func FuzzDecode(f *testing.F) {
	good, err := Encode(&Release{Name: "chat", Revision: 1, Status: StatusDeployed, Manifest: "apiVersion: v1\nkind: ConfigMap\n",
		Created: time.Unix(0, 0).UTC(), Updated: time.Unix(0, 0).UTC()})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("garbage, not gzip"))
	f.Add(good[:len(good)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Decode(data)
		if err != nil {
			return
		}
		if _, err := Encode(r); err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
	})
}
