package helmrecords

import (
	"context"

	"k8s.io/client-go/kubernetes"
)

// Unmark gives the records back to Helm (owner=helm, without
// vllmctl.io/adopted).
func Unmark(ctx context.Context, client kubernetes.Interface, ns string, recs []Record) error {
	return relabel(ctx, client, ns, recs, OwnerHelm, "")
}
