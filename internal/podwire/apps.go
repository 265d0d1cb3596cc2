// The workloads that template pods: ReplicaSets and Deployments (apps/v1)
// decoded without their pod templates, which carry a digest of them
// instead, and without their managedFields. The rollout watcher reads a
// Deployment's and its ReplicaSets' every update (hundreds in a big
// rollout: each pod that starts or goes changes their status), and
// decoding their templates (containers, arguments, environment, probes,
// resources) was the largest part of decoding them, to compare each
// ReplicaSet's template with the Deployment's.

package podwire

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// TemplateDigestAnnotation is the annotation in which a ReplicaSet or a
// Deployment decoded by a NewAppsClient client carries the digest of its
// pod template, in place of the template (see TemplateDigest). It is put
// there by the decoder, never sent to the cluster.
const TemplateDigestAnnotation = "podwire.vllmctl.io/template-digest"

// podTemplateHashLabel is the label the Deployment controller adds to the
// pod template of each ReplicaSet it makes.
const podTemplateHashLabel = "pod-template-hash"

// Field numbers of the apps/v1 and metav1 messages read here.
const (
	workloadMetadata  protowire.Number = 1 // Deployment, ReplicaSet
	workloadSpec      protowire.Number = 2
	listItems         protowire.Number = 2 // DeploymentList, ReplicaSetList
	specTemplate      protowire.Number = 3 // DeploymentSpec, ReplicaSetSpec
	templateMetadata  protowire.Number = 1 // PodTemplateSpec
	metaLabels        protowire.Number = 11
	metaAnnotations   protowire.Number = 12
	mapEntryKey       protowire.Number = 1
	mapEntryValue     protowire.Number = 2
	digestPrefixBytes                  = 16
)

// NewAppsClient returns a REST client of cfg's cluster for apps/v1 that
// asks for protobuf and decodes each ReplicaSet and Deployment (and their
// lists) without its pod template and managedFields, with the digest of
// its template in TemplateDigestAnnotation.
func NewAppsClient(cfg *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	gv := appsv1.SchemeGroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c.NegotiatedSerializer = newSerializer(nil)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("apps' REST client: %w", err)
	}
	return rc, nil
}

// ReplicaSets lists and watches the ReplicaSets of Namespace through RC,
// a NewAppsClient client, as the typed client's ReplicaSetInterface does.
type ReplicaSets struct {
	RC        rest.Interface
	Namespace string
}

func (c ReplicaSets) List(ctx context.Context, opts metav1.ListOptions) (*appsv1.ReplicaSetList, error) {
	out := &appsv1.ReplicaSetList{}
	err := list(ctx, c.RC, c.Namespace, "replicasets", opts, out)
	return out, err
}

func (c ReplicaSets) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, c.RC, c.Namespace, "replicasets", opts)
}

// Deployments lists and watches the Deployments of Namespace through RC,
// a NewAppsClient client, as the typed client's DeploymentInterface does.
type Deployments struct {
	RC        rest.Interface
	Namespace string
}

func (c Deployments) List(ctx context.Context, opts metav1.ListOptions) (*appsv1.DeploymentList, error) {
	out := &appsv1.DeploymentList{}
	err := list(ctx, c.RC, c.Namespace, "deployments", opts, out)
	return out, err
}

func (c Deployments) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, c.RC, c.Namespace, "deployments", opts)
}

func timeoutOf(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

func list(ctx context.Context, rc rest.Interface, namespace, resource string, opts metav1.ListOptions, into runtime.Object) error {
	return rc.Get().Namespace(namespace).Resource(resource).
		VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeoutOf(opts)).Do(ctx).Into(into)
}

func watchOf(ctx context.Context, rc rest.Interface, namespace, resource string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return rc.Get().Namespace(namespace).Resource(resource).
		VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeoutOf(opts)).Watch(ctx)
}

// decodeWorkload decodes a ReplicaSet, a Deployment or a list of either
// from raw, the bytes of its runtime.Unknown, cut down (see
// appendWorkload), into into (nil: a new object); ok is false for other
// kinds, an into of another type, or bytes it cannot parse.
func (d decoder) decodeWorkload(kind string, raw []byte, into runtime.Object) (obj unmarshaler, ok bool) {
	list := false
	switch kind {
	case "ReplicaSet":
		obj = &appsv1.ReplicaSet{}
		if o, isRS := into.(*appsv1.ReplicaSet); isRS && o != nil {
			obj = o
		}
	case "Deployment":
		obj = &appsv1.Deployment{}
		if o, isD := into.(*appsv1.Deployment); isD && o != nil {
			obj = o
		}
	case "ReplicaSetList":
		obj, list = &appsv1.ReplicaSetList{}, true
		if o, isL := into.(*appsv1.ReplicaSetList); isL && o != nil {
			obj = o
		}
	case "DeploymentList":
		obj, list = &appsv1.DeploymentList{}, true
		if o, isL := into.(*appsv1.DeploymentList); isL && o != nil {
			obj = o
		}
	default:
		return nil, false
	}
	if into != nil && into != runtime.Object(obj) {
		return nil, false
	}
	buf, _ := d.buffers.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	defer d.buffers.Put(buf)
	var slim []byte
	var err error
	if list {
		slim, err = appendWorkloadList((*buf)[:0], raw)
	} else {
		slim, err = appendWorkload((*buf)[:0], raw)
	}
	*buf = slim
	if err != nil {
		return nil, false
	}
	obj.Reset()
	// Unmarshal copies what it keeps: the buffer is reused.
	if err := obj.Unmarshal(slim); err != nil {
		return nil, false
	}
	return obj, true
}

// appendWorkloadList appends the list msg with each item cut down (see
// appendWorkload).
func appendWorkloadList(out, msg []byte) ([]byte, error) {
	err := eachField(msg, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		if num != listItems || typ != protowire.BytesType {
			out = append(out, field...)
			return nil
		}
		var err error
		out, err = appendMessage(out, num, func(out []byte) ([]byte, error) { return appendWorkload(out, value) })
		return err
	})
	return out, err
}

// appendWorkload appends the ReplicaSet or Deployment msg without its
// spec's pod template and its managedFields, with the digest of the
// template in its annotations (TemplateDigestAnnotation; after any
// annotation of that name the object has, so that it wins).
func appendWorkload(out, msg []byte) ([]byte, error) {
	digest := ""
	err := eachField(msg, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if num != workloadSpec || typ != protowire.BytesType {
			return nil
		}
		return eachField(value, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
			if num != specTemplate || typ != protowire.BytesType {
				return nil
			}
			var err error
			digest, err = TemplateDigest(value)
			return err
		})
	})
	if err != nil {
		return out, err
	}
	err = eachField(msg, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		var err error
		switch {
		case typ != protowire.BytesType:
			out = append(out, field...)
		case num == workloadMetadata:
			out, err = appendMessage(out, num, func(out []byte) ([]byte, error) {
				out, err := appendFiltered(out, value, metaFilter)
				if err != nil || digest == "" {
					return out, err
				}
				return appendMessage(out, metaAnnotations, func(out []byte) ([]byte, error) {
					out = protowire.AppendTag(out, mapEntryKey, protowire.BytesType)
					out = protowire.AppendString(out, TemplateDigestAnnotation)
					out = protowire.AppendTag(out, mapEntryValue, protowire.BytesType)
					return protowire.AppendString(out, digest), nil
				})
			})
		case num == workloadSpec:
			out, err = appendMessage(out, num, func(out []byte) ([]byte, error) {
				return appendFiltered(out, value, func(num protowire.Number) (bool, Filter) { return num != specTemplate, nil })
			})
		default:
			out = append(out, field...)
		}
		return err
	})
	return out, err
}

// appendMessage appends field num holding the message body appends,
// its length written once the body is.
func appendMessage(out []byte, num protowire.Number, body func([]byte) ([]byte, error)) ([]byte, error) {
	out = protowire.AppendTag(out, num, protowire.BytesType)
	// The length is a varint in front of the body: keep room for the
	// longest, then move the body to follow the one it takes.
	const room = binary.MaxVarintLen64
	at := len(out)
	out = append(out, make([]byte, room)...)
	out, err := body(out)
	if err != nil {
		return out, err
	}
	n := len(out) - at - room
	size := protowire.SizeVarint(uint64(n))
	protowire.AppendVarint(out[at:at], uint64(n))
	copy(out[at+size:], out[at+room:])
	return out[:len(out)-(room-size)], nil
}

// TemplateDigest returns the digest of the protobuf bytes of a pod
// template (a core/v1 PodTemplateSpec) without its pod-template-hash
// label: two templates the API server encodes to the same bytes but for
// that label (a Deployment's and that of the ReplicaSet the Deployment
// controller made of it) have the same digest. The API server encodes a
// decoded, defaulted object, its maps sorted by key and its quantities
// in their canonical form, so that templates equal as the controller
// compares them (semantically) have equal bytes.
func TemplateDigest(tmpl []byte) (string, error) {
	h := sha256.New()
	err := eachField(tmpl, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		if num != templateMetadata || typ != protowire.BytesType {
			writeItem(h, field)
			return nil
		}
		writeItem(h, []byte("metadata"))
		return eachField(value, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
			if num == metaLabels && typ == protowire.BytesType && mapKey(value) == podTemplateHashLabel {
				return nil
			}
			writeItem(h, field)
			return nil
		})
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)[:digestPrefixBytes]), nil
}

// writeItem writes b to h after its length, so that items cannot run
// into each other.
func writeItem(h hash.Hash, b []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	h.Write(b)
}

// mapKey returns the key of a map entry (a string key).
func mapKey(entry []byte) string {
	key := ""
	_ = eachField(entry, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if num == mapEntryKey && typ == protowire.BytesType {
			key = string(value)
		}
		return nil
	})
	return key
}
