package storage

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
)

// Secrets is the Store that keeps records as Secrets, through client-go's
// typed CoreV1 client.
type Secrets struct {
	client    kubernetes.Interface
	namespace string
}

var _ Store = (*Secrets)(nil)

// NewSecrets returns a Store keeping records as Secrets in namespace.
func NewSecrets(client kubernetes.Interface, namespace string) *Secrets {
	return &Secrets{client: client, namespace: namespace}
}

// Namespace is the namespace records are read and written in.
func (s *Secrets) Namespace() string { return s.namespace }

func (s *Secrets) object(name string, revision int) string {
	return "Secret " + s.namespace + "/" + SecretName(name, revision)
}

// Create writes a new record Secret.
func (s *Secrets) Create(ctx context.Context, r *Release) error {
	if err := s.own(r); err != nil {
		return err
	}
	sec, err := ToSecret(r)
	if err != nil {
		return err
	}
	sec.ResourceVersion = ""
	out, err := s.client.CoreV1().Secrets(s.namespace).Create(ctx, sec, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s: %w: %w", s.object(r.Name, r.Revision), ErrExists, err)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", s.object(r.Name, r.Revision), err)
	}
	r.version = out.ResourceVersion
	return nil
}

// Update overwrites a record Secret, refusing if it changed since r was read.
func (s *Secrets) Update(ctx context.Context, r *Release) error {
	if err := s.own(r); err != nil {
		return err
	}
	sec, err := ToSecret(r)
	if err != nil {
		return err
	}
	out, err := s.client.CoreV1().Secrets(s.namespace).Update(ctx, sec, metav1.UpdateOptions{})
	switch {
	case apierrors.IsConflict(err):
		return &ConflictError{Namespace: s.namespace, Name: r.Name, Revision: r.Revision, Err: err}
	case apierrors.IsNotFound(err):
		return notFound(ctx, s, r.Name, r.Revision)
	case err != nil:
		return fmt.Errorf("update %s: %w", s.object(r.Name, r.Revision), err)
	}
	r.version = out.ResourceVersion
	return nil
}

// Get reads one revision's record Secret.
func (s *Secrets) Get(ctx context.Context, name string, revision int) (*Release, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	sec, err := s.client.CoreV1().Secrets(s.namespace).Get(ctx, SecretName(name, revision), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, notFound(ctx, s, name, revision)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", s.object(name, revision), err)
	}
	if sec.Labels[LabelRelease] != name {
		return nil, fmt.Errorf("%s: label %s is %q, not %q", s.object(name, revision), LabelRelease, sec.Labels[LabelRelease], name)
	}
	return FromSecret(sec)
}

// List lists the record Secrets of release name by label selector.
func (s *Secrets) List(ctx context.Context, name string) ([]Entry, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return s.list(ctx, s.namespace, name)
}

// ListAll lists the record Secrets of every release in namespace ("" for
// all namespaces) by label selector.
func (s *Secrets) ListAll(ctx context.Context, namespace string) ([]Entry, error) {
	return s.list(ctx, namespace, "")
}

func (s *Secrets) list(ctx context.Context, namespace, name string) ([]Entry, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByVllmctl})
	op, vals := selection.Exists, []string(nil)
	if name != "" {
		op, vals = selection.Equals, []string{name}
	}
	req, err := labels.NewRequirement(LabelRelease, op, vals)
	if err != nil {
		return nil, err
	}
	sel = sel.Add(*req)
	list, err := s.client.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		where := "all namespaces"
		if namespace != "" {
			where = "namespace " + namespace
		}
		return nil, fmt.Errorf("list release record Secrets (%s) in %s: %w", sel, where, err)
	}
	entries := make([]Entry, 0, len(list.Items))
	d := new(decoder) // one for the whole list
	for i := range list.Items {
		sec := &list.Items[i]
		if sec.Type != SecretType {
			continue // labelled like ours but not a record: not ours to read
		}
		e, err := entryFromSecret(sec, d)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	sortEntries(entries)
	return entries, nil
}

// Delete removes one revision's record Secret.
func (s *Secrets) Delete(ctx context.Context, name string, revision int) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	err := s.client.CoreV1().Secrets(s.namespace).Delete(ctx, SecretName(name, revision), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return notFound(ctx, s, name, revision)
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", s.object(name, revision), err)
	}
	return nil
}

// own checks r belongs in this store's namespace, setting it when empty.
func (s *Secrets) own(r *Release) error {
	return ownNamespace(s.namespace, r)
}

func ownNamespace(namespace string, r *Release) error {
	if r.Namespace == "" {
		r.Namespace = namespace
	}
	if r.Namespace != namespace {
		return fmt.Errorf("release %s revision %d is in namespace %q, the store in %q", r.Name, r.Revision, r.Namespace, namespace)
	}
	return r.validate()
}
