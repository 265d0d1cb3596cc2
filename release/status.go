package release

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	deploymentutil "k8s.io/kubectl/pkg/util/deployment"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// Live statuses Status reports besides kstatus' own (InProgress, Current,
// Failed, Terminating, Unknown).
const (
	// LiveNotFound: the object does not exist.
	LiveNotFound = "NotFound"
)

// StatusReport is what `vllmctl status` shows: the release's current
// (highest) revision, its objects with their live status, and the
// ReplicaSets serving its Deployments.
type StatusReport struct {
	Release     string         `json:"release"`
	Namespace   string         `json:"namespace"`
	Revision    int            `json:"revision"`
	Status      storage.Status `json:"status"`
	Description string         `json:"description,omitempty"`
	ChartInfo
	// PostRenderer is the post-renderer the revision's manifest went
	// through, if any.
	PostRenderer *charts.PostRenderer `json:"postRenderer,omitempty"`
	Updated      time.Time            `json:"updated"`
	RollbackOf   int                  `json:"rollbackOf,omitempty"`
	Failure      *rollout.Diagnosis   `json:"failure,omitempty"`
	// CRDs are the CustomResourceDefinitions the revision created.
	CRDs []string `json:"crds,omitempty"`
	// Canary is what the revision's canary phase did, if it had one.
	Canary *storage.CanaryReport `json:"canary,omitempty"`
	// Analysis is the canary analysis of the revision, or, when the
	// revision is the automatic rollback of a revision that had one, that
	// revision's (AnalysisRevision says which).
	Analysis         *storage.AnalysisReport `json:"analysis,omitempty"`
	AnalysisRevision int                     `json:"analysisRevision,omitempty"`
	// ServeCheck is the revision's last serve check, if one ran.
	ServeCheck *rollout.ServeReport `json:"serveCheck,omitempty"`
	// CanaryLeftovers are the revision's Deployments that still carry a
	// canary's transient strategy (canary.Leftover).
	CanaryLeftovers []canary.Leftover `json:"canaryLeftovers,omitempty"`
	// HelmRecords are Helm's own records of a release whose current
	// revision was adopted from Helm: an adopt cut short (killed) after it
	// wrote vllmctl's records and before it relabelled Helm's leaves the
	// release owned by both tools until adopt runs again
	// (helmStillOwns).
	HelmRecords []string `json:"helmRecords,omitempty"`
	// Objects are the revision's objects in manifest order, with their
	// live kstatus.
	Objects []LiveObject `json:"objects"`
	// ReplicaSets are the ReplicaSets that run pods of the revision's
	// Deployments now (replicas > 0), newest revision first.
	ReplicaSets []ServingReplicaSet `json:"replicaSets"`
	// RecordedReplicaSets are the ReplicaSets the revision recorded.
	RecordedReplicaSets []storage.ReplicaSetRef `json:"recordedReplicaSets"`
	// StatefulSets are the revision's StatefulSets (a grouped release's
	// engine groups) as their controller reports them.
	StatefulSets []StatefulSetStatus `json:"statefulSets,omitempty"`
	// RecordedControllerRevisions are the ControllerRevisions the
	// revision recorded.
	RecordedControllerRevisions []storage.ControllerRevisionRef `json:"recordedControllerRevisions,omitempty"`
}

// StatefulSetStatus is where a StatefulSet's rollout stands: its
// controller's current and update revisions and replica counts.
type StatefulSetStatus struct {
	StatefulSet        string `json:"statefulSet"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observedGeneration"`
	CurrentRevision    string `json:"currentRevision"`
	UpdateRevision     string `json:"updateRevision"`
	Replicas           int32  `json:"replicas"`
	ReadyReplicas      int32  `json:"readyReplicas"`
	UpdatedReplicas    int32  `json:"updatedReplicas"`
	// RolledOut says whether every pod runs the update revision and is
	// ready (kubectl rollout status' rule).
	RolledOut bool `json:"rolledOut"`
}

// LiveObject is an object of the revision and its live status.
type LiveObject struct {
	Object object.Ref `json:"object"`
	// Status is the kstatus status (Current, InProgress, Failed,
	// Terminating, Unknown) or NotFound.
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// ServingReplicaSet is a ReplicaSet running pods of a Deployment.
type ServingReplicaSet struct {
	storage.ReplicaSetRef
	Replicas          int32 `json:"replicas"`
	ReadyReplicas     int32 `json:"readyReplicas"`
	AvailableReplicas int32 `json:"availableReplicas"`
	// Current says whether it carries the Deployment's current pod
	// template.
	Current bool `json:"current"`
}

// Status reads the release's highest revision, GETs each of its objects and
// computes its kstatus, and lists the ReplicaSets serving its Deployments.
// A release without records is a *NotFoundError (exit code 2).
func (e *Engine) Status(ctx context.Context, name string) (*StatusReport, error) {
	if err := e.check(needStore, needObjects, needClient); err != nil {
		return nil, err
	}
	rec, err := storage.Last(ctx, e.Store, name)
	if err != nil {
		return nil, err
	}
	rep, err := e.StatusOf(ctx, rec)
	if err != nil || rep.Analysis != nil || rec.RollbackOf == 0 || rec.Revision <= 1 {
		return rep, err
	}
	// A rollback right after a revision whose analysis refused it: that
	// analysis is why the release is where it is.
	if prev, perr := e.Store.Get(ctx, name, rec.Revision-1); perr == nil && prev.Analysis != nil && prev.Status == storage.StatusFailed {
		rep.Analysis, rep.AnalysisRevision = prev.Analysis, prev.Revision
	}
	return rep, nil
}

// StatusOf is Status of the revision rec.
func (e *Engine) StatusOf(ctx context.Context, rec *storage.Release) (*StatusReport, error) {
	if err := e.check(needObjects, needClient); err != nil {
		return nil, err
	}
	rep := &StatusReport{
		Release: rec.Name, Namespace: rec.Namespace, Revision: rec.Revision, Status: rec.Status,
		Description: rec.Description, ChartInfo: NewChartInfo(rec.Chart), PostRenderer: rec.PostRenderer,
		Updated: rec.Updated, RollbackOf: rec.RollbackOf, Failure: rec.Failure, Canary: rec.Canary, ServeCheck: rec.ServeCheck, CRDs: rec.CRDs,
		Analysis: rec.Analysis,
		Objects:  []LiveObject{}, ReplicaSets: []ServingReplicaSet{}, RecordedReplicaSets: []storage.ReplicaSetRef{},
	}
	if rec.Analysis != nil {
		rep.AnalysisRevision = rec.Revision
	}
	rep.HelmRecords = e.helmStillOwns(ctx, rec)
	if len(rec.ReplicaSets) > 0 {
		rep.RecordedReplicaSets = rec.ReplicaSets
	}
	rep.RecordedControllerRevisions = rec.ControllerRevisions
	objs, err := cluster.ParseManifest(rec.Manifest)
	if err != nil {
		return nil, fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err)
	}
	for _, obj := range objs {
		ref := object.RefOf(obj)
		if ref.Namespace == "" {
			ref.Namespace = e.Namespace()
		}
		lo := LiveObject{Object: ref}
		live, err := e.Objects.Get(ctx, obj, e.Namespace())
		switch {
		case apierrors.IsNotFound(err):
			lo.Status = LiveNotFound
		case err != nil:
			if c := apiStatusCode(err); c != 0 && c != 404 {
				return nil, err // the cluster refused: report it, not a partial status
			}
			lo.Status, lo.Message = string(kstatus.UnknownStatus), err.Error()
		default:
			lo.Object = object.RefOf(live)
			if lo.Object.Group == "" && lo.Object.Kind == "" {
				lo.Object = ref
			}
			res, cerr := kstatus.Compute(live)
			if cerr != nil {
				lo.Status, lo.Message = string(kstatus.UnknownStatus), cerr.Error()
			} else {
				lo.Status, lo.Message = string(res.Status), res.Message
			}
			if l, ok := canary.LeftoverOf(live); ok {
				rep.CanaryLeftovers = append(rep.CanaryLeftovers, l)
				lo.Message = "canary held (not promoted): " + lo.Message
			}
		}
		rep.Objects = append(rep.Objects, lo)

		if ref.IsDeployment() {
			serving, err := ServingReplicaSets(ctx, e.Client, ref.Namespace, ref.Name)
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
			rep.ReplicaSets = append(rep.ReplicaSets, serving...)
		}
		if cluster.IsStatefulSet(ref) {
			sts, err := e.Client.AppsV1().StatefulSets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("get StatefulSet %s/%s: %w", ref.Namespace, ref.Name, err)
			}
			if err == nil {
				rep.StatefulSets = append(rep.StatefulSets, statefulSetStatus(sts))
			}
		}
	}
	return rep, nil
}

// statefulSetStatus is the status of sts.
func statefulSetStatus(sts *appsv1.StatefulSet) StatefulSetStatus {
	done, _ := wait.StatefulSetRolledOut(sts)
	replicas := int32(1)
	if sts.Spec.Replicas != nil {
		replicas = *sts.Spec.Replicas
	}
	return StatefulSetStatus{
		StatefulSet: sts.Name, Generation: sts.Generation, ObservedGeneration: sts.Status.ObservedGeneration,
		CurrentRevision: sts.Status.CurrentRevision, UpdateRevision: sts.Status.UpdateRevision,
		Replicas: replicas, ReadyReplicas: sts.Status.ReadyReplicas, UpdatedReplicas: sts.Status.UpdatedReplicas,
		RolledOut: done,
	}
}

// apiStatusCode returns the HTTP code of an API error, 0 for other errors.
func apiStatusCode(err error) int32 {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Code
	}
	return 0
}

// ServingReplicaSets returns the ReplicaSets of Deployment namespace/name
// that run pods (spec or status replicas > 0), newest revision first,
// marking the one with the Deployment's current pod template. A missing
// Deployment is the API server's NotFound error.
func ServingReplicaSets(ctx context.Context, client kubernetes.Interface, namespace, name string) ([]ServingReplicaSet, error) {
	obj := "Deployment " + namespace + "/" + name
	d, err := client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", obj, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid selector: %w", obj, err)
	}
	list, err := client.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("%s: list ReplicaSets: %w", obj, err)
	}
	current := cluster.NewReplicaSet(d, list.Items)
	var out []ServingReplicaSet
	for i := range list.Items {
		rs := &list.Items[i]
		if !metav1.IsControlledBy(rs, d) {
			continue
		}
		if ptr.Deref(rs.Spec.Replicas, 0) == 0 && rs.Status.Replicas == 0 {
			continue
		}
		rev, _ := deploymentutil.Revision(rs)
		out = append(out, ServingReplicaSet{
			ReplicaSetRef: storage.ReplicaSetRef{
				Deployment:      name,
				Name:            rs.Name,
				PodTemplateHash: rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey],
				Revision:        rev,
			},
			Replicas:          rs.Status.Replicas,
			ReadyReplicas:     rs.Status.ReadyReplicas,
			AvailableReplicas: rs.Status.AvailableReplicas,
			Current:           current != nil && current.UID == rs.UID && current.Name == rs.Name,
		})
	}
	slices.SortFunc(out, func(a, b ServingReplicaSet) int {
		return cmp.Or(cmp.Compare(b.Revision, a.Revision), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}
