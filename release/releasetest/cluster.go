// Package releasetest provides in-memory fakes of what the release
// operations talk to, for unit tests of the release engine and of the
// commands built on it: a [Cluster] that applies, prunes and reads objects
// and plays the Deployment controller's part (generations, ReplicaSets,
// pod-template-hash, revision numbers) on a client-go fake clientset, and a
// scripted [Waiter].
package releasetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/internal/vllm"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// objectKey identifies an object in the fake cluster.
type objectKey struct {
	group, kind, namespace, name string
}

func keyOf(ref object.Ref) objectKey {
	return objectKey{ref.Group, ref.Kind, ref.Namespace, ref.Name}
}

// Cluster is an in-memory cluster implementing release.ObjectClient.
// Deployments are mirrored into Client (a fake clientset) where a simple
// Deployment controller creates or reuses their ReplicaSets at once and
// reports them rolled out. It is safe for concurrent use.
type Cluster struct {
	// Client holds the Deployments and ReplicaSets.
	Client *fake.Clientset
	// ApplyHook, when set, runs before each object is applied and may
	// refuse it.
	ApplyHook func(obj *unstructured.Unstructured, opts cluster.ApplyOptions) error
	// Stalled, when set, says whether the Deployment controller ignores
	// the Deployment name at generation: it is stored with its new spec
	// and generation, and its status (observedGeneration included) is left
	// as it was, as when kube-controller-manager is not running.
	Stalled func(name string, generation int64) bool

	mu      sync.Mutex
	objects map[objectKey]*unstructured.Unstructured
	uid     int
	applies int
}

var _ release.ObjectClient = (*Cluster)(nil)

// NewCluster returns an empty fake cluster.
//
// Its clientset starts with one Ready node of 8 nvidia.com/gpu, 64 cpu,
// 512Gi memory and 110 pods, so capacity preflights see room.
//
// Its discovery reports server version v1.37.2 (the local cluster's).
func NewCluster() *Cluster {
	client := fake.NewClientset(fakeGPUNode())
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2", Major: "1", Minor: "37"}
	client.PrependReactor("patch", "deployments", dryRunApply)
	return &Cluster{Client: client, objects: map[objectKey]*unstructured.Unstructured{}}
}

// dryRunApply answers a server-side dry-run apply of a Deployment (the
// capacity preflight's) with the applied object, changing nothing: the
// fake tracker would store it.
func dryRunApply(a k8stesting.Action) (bool, runtime.Object, error) {
	pa, ok := a.(k8stesting.PatchActionImpl)
	if !ok || len(pa.PatchOptions.DryRun) == 0 || pa.GetPatchType() != types.ApplyPatchType {
		return false, nil, nil
	}
	d := &appsv1.Deployment{}
	if err := json.Unmarshal(pa.GetPatch(), d); err != nil {
		return true, nil, err
	}
	return true, d, nil
}

// fakeGPUNode is the node NewCluster starts with.
func fakeGPUNode() *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		vllm.GPUResource:      resource.MustParse("8"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1", Labels: map[string]string{"kubernetes.io/hostname": "gpu-node-1"}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// Engine returns a release engine on c with store, waiter and clock.
func (c *Cluster) Engine(store storage.Store, w wait.Waiter, clk clock.WithTicker) *release.Engine {
	return &release.Engine{Store: store, Objects: c, Waiter: w, Client: c.Client, Clock: clk, Holder: "test@host pid 1"}
}

// ref resolves obj's reference, defaulting the namespace of namespaced
// kinds.
func ref(obj *unstructured.Unstructured, namespace string) object.Ref {
	r := object.RefOf(obj)
	if !charts.IsNamespacedKind(obj.GroupVersionKind()) {
		r.Namespace = ""
	} else if r.Namespace == "" {
		r.Namespace = namespace
	}
	return r
}

// Applies returns how many non-dry-run applies of an object happened.
func (c *Cluster) Applies() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applies
}

// Put stores obj as is (an object created by someone else).
func (c *Cluster) Put(obj *unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objects[keyOf(ref(obj, obj.GetNamespace()))] = obj.DeepCopy()
}

// Object returns the stored object (nil if absent). For Deployments it is
// the controller's copy, with status.
func (c *Cluster) Object(group, kind, namespace, name string) *unstructured.Unstructured {
	if group == "apps" && kind == "Deployment" {
		d, err := c.Client.AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return deploymentObject(d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.objects[objectKey{group, kind, namespace, name}]
	if o == nil {
		return nil
	}
	return o.DeepCopy()
}

// Refs returns the stored objects' references, sorted by their String.
func (c *Cluster) Refs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, o := range c.objects {
		out = append(out, ref(o, o.GetNamespace()).String())
	}
	sort.Strings(out)
	return out
}

// Apply stores the objects (Namespaces first), as server-side apply would.
func (c *Cluster) Apply(ctx context.Context, objs []*unstructured.Unstructured, opts cluster.ApplyOptions) ([]cluster.ApplyResult, error) {
	ordered := slices.Clone(objs)
	sort.SliceStable(ordered, func(i, j int) bool {
		return ordered[i].GetKind() == "Namespace" && ordered[j].GetKind() != "Namespace"
	})
	var results []cluster.ApplyResult
	if opts.CreateNamespace && opts.Namespace != "" {
		nsKey := objectKey{kind: "Namespace", name: opts.Namespace}
		c.mu.Lock()
		_, ok := c.objects[nsKey]
		if !ok && !opts.DryRun {
			ns := &unstructured.Unstructured{}
			ns.SetAPIVersion("v1")
			ns.SetKind("Namespace")
			ns.SetName(opts.Namespace)
			c.objects[nsKey] = ns
		}
		c.mu.Unlock()
		if !ok {
			results = append(results, cluster.ApplyResult{Object: object.Ref{Version: "v1", Kind: "Namespace", Name: opts.Namespace}, Action: cluster.ActionCreated})
		}
	}
	for _, obj := range ordered {
		if err := ctx.Err(); err != nil {
			return results, err
		}
		r := ref(obj, opts.Namespace)
		var conflict *cluster.FieldConflictError
		if c.ApplyHook != nil {
			if err := c.ApplyHook(obj, opts); err != nil {
				// A dry run with ForceOnConflict is repeated with force
				// by the real Applier: the conflict is reported, not
				// returned.
				if !opts.DryRun || !opts.ForceOnConflict || !errors.As(err, &conflict) {
					return results, err
				}
			}
		}
		body := obj.DeepCopy()
		if r.Namespace != "" {
			body.SetNamespace(r.Namespace)
		}
		c.mu.Lock()
		old := c.objects[keyOf(r)]
		action := cluster.ActionCreated
		if old != nil {
			action = cluster.ActionConfigured
			if apiequality.Semantic.DeepEqual(old.Object, body.Object) {
				action = cluster.ActionUnchanged
			}
		}
		if !opts.DryRun {
			c.objects[keyOf(r)] = body
			c.applies++
		}
		c.mu.Unlock()
		if !opts.DryRun && r.Group == "apps" && r.Kind == "Deployment" {
			if err := c.syncDeployment(ctx, body); err != nil {
				return results, fmt.Errorf("apply %s: %w", r, err)
			}
		}
		results = append(results, cluster.ApplyResult{Object: r, Action: action, Live: body, Conflict: conflict})
	}
	return results, nil
}

// Prune deletes the objects of previous that current lacks, in reverse
// order, only when labelled as opts.Release's; Namespaces are kept.
func (c *Cluster) Prune(ctx context.Context, previous, current []*unstructured.Unstructured, opts cluster.PruneOptions) ([]cluster.PruneResult, error) {
	keep := map[objectKey]bool{}
	for _, o := range current {
		keep[keyOf(ref(o, opts.Namespace))] = true
	}
	var results []cluster.PruneResult
	for i := len(previous) - 1; i >= 0; i-- {
		r := ref(previous[i], opts.Namespace)
		k := keyOf(r)
		if keep[k] {
			continue
		}
		keep[k] = true
		if r.Kind == "Namespace" {
			results = append(results, cluster.PruneResult{Object: r, Action: cluster.PruneKept, Reason: "namespaces are never pruned"})
			continue
		}
		c.mu.Lock()
		live := c.objects[k]
		switch {
		case live == nil:
			c.mu.Unlock()
			results = append(results, cluster.PruneResult{Object: r, Action: cluster.PruneGone, Reason: "not found"})
			continue
		case !owner.Owns(live, opts.Release, opts.Namespace):
			c.mu.Unlock()
			results = append(results, cluster.PruneResult{Object: r, Action: cluster.PruneKept, Reason: "not managed by release " + opts.Release})
			continue
		case charts.KeepsResource(live):
			c.mu.Unlock()
			results = append(results, cluster.PruneResult{Object: r, Action: cluster.PruneKept, Reason: "helm.sh/resource-policy: keep"})
			continue
		}
		if !opts.DryRun {
			delete(c.objects, k)
		}
		c.mu.Unlock()
		if !opts.DryRun && r.Group == "apps" && r.Kind == "Deployment" {
			if err := c.deleteDeployment(ctx, r.Namespace, r.Name); err != nil {
				return results, err
			}
		}
		results = append(results, cluster.PruneResult{Object: r, Action: cluster.PruneDeleted})
	}
	return results, nil
}

// Delete deletes obj as Prune would (it is gone at once).
func (c *Cluster) Delete(ctx context.Context, obj *unstructured.Unstructured, opts cluster.PruneOptions) (cluster.PruneResult, error) {
	res, err := c.Prune(ctx, []*unstructured.Unstructured{obj}, nil, opts)
	if err != nil || len(res) == 0 {
		return cluster.PruneResult{}, err
	}
	return res[0], nil
}

// Get returns the live copy of obj, or a NotFound API error.
func (c *Cluster) Get(ctx context.Context, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error) {
	r := ref(obj, namespace)
	if live := c.Object(r.Group, r.Kind, r.Namespace, r.Name); live != nil {
		return live, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: r.Group, Resource: r.Kind}, r.Name)
}

// Scale sets a Deployment's replicas as another manager would (the
// controller scales its current ReplicaSet).
func (c *Cluster) Scale(ctx context.Context, namespace, name string, replicas int32) error {
	d, err := c.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	d.Spec.Replicas = ptr.To(replicas)
	d.Generation++
	return c.reconcile(ctx, d, false)
}

func deploymentObject(d *appsv1.Deployment) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	return u
}

// syncDeployment mirrors an applied Deployment into the clientset and runs
// the controller.
func (c *Cluster) syncDeployment(ctx context.Context, body *unstructured.Unstructured) error {
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(body.Object, d); err != nil {
		return err
	}
	deps := c.Client.AppsV1().Deployments(d.Namespace)
	old, err := deps.Get(ctx, d.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		c.mu.Lock()
		c.uid++
		d.UID = types.UID("uid-" + strconv.Itoa(c.uid))
		c.mu.Unlock()
		d.Generation = 1
		if d.Spec.Replicas == nil {
			d.Spec.Replicas = ptr.To[int32](1)
		}
		if c.Stalled != nil && c.Stalled(d.Name, d.Generation) {
			d.Status = appsv1.DeploymentStatus{}
			d.ResourceVersion = "1" // a watch starts from it
			_, err := deps.Create(ctx, d, metav1.CreateOptions{})
			return err
		}
		return c.reconcile(ctx, d, true)
	case err != nil:
		return err
	}
	d.UID = old.UID
	d.Generation = old.Generation
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = old.Spec.Replicas // an HPA owns it
	}
	if !apiequality.Semantic.DeepEqual(old.Spec, d.Spec) {
		d.Generation++
	}
	if c.Stalled != nil && c.Stalled(d.Name, d.Generation) {
		d.Status = old.Status
		d.ResourceVersion = strconv.FormatInt(d.Generation, 10) // a watch starts from it
		_, err := deps.Update(ctx, d, metav1.UpdateOptions{})
		return err
	}
	return c.reconcile(ctx, d, false)
}

// reconcile plays the Deployment controller: the ReplicaSet with d's pod
// template gets all replicas (created, or reused with the next revision
// number), the others none, and d is reported rolled out.
func (c *Cluster) reconcile(ctx context.Context, d *appsv1.Deployment, create bool) error {
	rsClient := c.Client.AppsV1().ReplicaSets(d.Namespace)
	list, err := rsClient.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	owned, match, maxRev := ownedReplicaSets(list.Items, d)
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	for _, rs := range owned {
		if rs == match {
			continue
		}
		rs.Spec.Replicas = ptr.To[int32](0)
		rs.Status = appsv1.ReplicaSetStatus{}
		if _, err := rsClient.Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if match == nil {
		_, err = rsClient.Create(ctx, newReplicaSet(d, replicas, maxRev+1), metav1.CreateOptions{})
	} else {
		rev, _ := strconv.ParseInt(match.Annotations[cluster.RevisionAnnotation], 10, 64)
		if rev < maxRev {
			match.Annotations[cluster.RevisionAnnotation] = strconv.FormatInt(maxRev+1, 10)
		}
		match.Spec.Replicas = ptr.To(replicas)
		match.Status = appsv1.ReplicaSetStatus{Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas}
		_, err = rsClient.Update(ctx, match, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	d.Status = rolledOutStatus(d.Generation, replicas)
	deps := c.Client.AppsV1().Deployments(d.Namespace)
	if create {
		_, err = deps.Create(ctx, d, metav1.CreateOptions{})
	} else {
		_, err = deps.Update(ctx, d, metav1.UpdateOptions{})
	}
	return err
}

// ownedReplicaSets returns the ReplicaSets of items that d controls, the
// first of them with d's pod template (nil if none), and the highest
// revision number among them.
func ownedReplicaSets(items []appsv1.ReplicaSet, d *appsv1.Deployment) (owned []*appsv1.ReplicaSet, match *appsv1.ReplicaSet, maxRev int64) {
	for i := range items {
		rs := &items[i]
		if !metav1.IsControlledBy(rs, d) {
			continue
		}
		owned = append(owned, rs)
		rev, _ := strconv.ParseInt(rs.Annotations[cluster.RevisionAnnotation], 10, 64)
		maxRev = max(maxRev, rev)
		if match == nil && sameTemplate(&rs.Spec.Template, &d.Spec.Template) {
			match = rs
		}
	}
	return owned, match, maxRev
}

// newReplicaSet is the ReplicaSet the Deployment controller creates for
// d's pod template, at revision rev, with every replica available.
func newReplicaSet(d *appsv1.Deployment, replicas int32, rev int64) *appsv1.ReplicaSet {
	hash := templateHash(&d.Spec.Template)
	tmpl := d.Spec.Template.DeepCopy()
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	sel := d.Spec.Selector.DeepCopy()
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			Labels:          tmpl.Labels,
			Annotations:     map[string]string{cluster.RevisionAnnotation: strconv.FormatInt(rev, 10)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
			UID:             types.UID("uid-rs-" + d.Name + "-" + hash),
		},
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Selector: sel, Template: *tmpl},
		Status: appsv1.ReplicaSetStatus{Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas},
	}
}

// rolledOutStatus is the status of a Deployment at generation whose
// rollout of replicas completed.
func rolledOutStatus(generation int64, replicas int32) appsv1.DeploymentStatus {
	return appsv1.DeploymentStatus{
		ObservedGeneration: generation,
		Replicas:           replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
}

// deleteDeployment deletes a Deployment and its ReplicaSets.
func (c *Cluster) deleteDeployment(ctx context.Context, namespace, name string) error {
	d, err := c.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	list, err := c.Client.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], d) {
			if err := c.Client.AppsV1().ReplicaSets(namespace).Delete(ctx, list.Items[i].Name, metav1.DeleteOptions{}); err != nil {
				return err
			}
		}
	}
	return c.Client.AppsV1().Deployments(namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// sameTemplate compares pod templates ignoring the pod-template-hash label.
func sameTemplate(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// templateHash is a deterministic pod-template-hash.
func templateHash(t *corev1.PodTemplateSpec) string {
	data, _ := json.Marshal(t)
	h := fnv.New32a()
	_, _ = h.Write(data)
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// FuncClock is a clock whose Now is a function (a test's ticking time);
// its timers and tickers are the wall clock's.
type FuncClock struct {
	clock.RealClock
	now func() time.Time
}

// ClockFunc returns the clock whose Now is now.
func ClockFunc(now func() time.Time) FuncClock { return FuncClock{now: now} }

// Now calls the clock's function.
func (c FuncClock) Now() time.Time { return c.now() }

// Since is the time elapsed since t by the clock's function.
func (c FuncClock) Since(t time.Time) time.Duration { return c.now().Sub(t) }
