// Package podwire decodes pods cut down: a REST client for pods whose
// protobuf Pod and PodList bytes are filtered, field by field, before they
// are decoded, so that a reader that keeps a few fields of thousands of
// pods (the rollout watcher, the capacity preflight) does not pay for
// decoding their specs and managedFields, and a list's pods are cut down
// one by one as the list's bytes arrive, so that a page of them is never
// held whole (stream.go). What each reader keeps is a Filter: Watched
// (package wait) and Requests (package release/preflight).
package podwire

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// NewClient returns a REST client of cfg's cluster for pods (core v1)
// that asks for protobuf and decodes each Pod and PodList from its bytes
// cut down by f.
func NewClient(cfg *rest.Config, f Filter) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	gv := corev1.SchemeGroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/api"
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c.NegotiatedSerializer = newSerializer(f)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("pods' REST client: %w", err)
	}
	return &client{RESTClient: rc, filter: f}, nil
}

// Pods lists (see stream.go) and watches the pods of Namespace ("": all)
// through RC, a NewClient client, as the typed client's PodInterface
// does.
type Pods struct {
	RC        rest.Interface
	Namespace string
}

func (c Pods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return watchOf(ctx, c.RC, c.Namespace, "pods", opts)
}

// serializer is a NegotiatedSerializer whose protobuf decoder cuts pods
// down first (decoder).
type serializer struct {
	runtime.NegotiatedSerializer
	filter  Filter
	buffers *sync.Pool // of *[]byte: the cut-down bytes, reused
}

func newSerializer(f Filter) serializer {
	return serializer{NegotiatedSerializer: scheme.Codecs.WithoutConversion(), filter: f, buffers: &sync.Pool{}}
}

func (s serializer) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := append([]runtime.SerializerInfo(nil), s.NegotiatedSerializer.SupportedMediaTypes()...)
	for i := range infos {
		if infos[i].MediaType == runtime.ContentTypeProtobuf {
			infos[i].Serializer = decoder{Serializer: infos[i].Serializer, filter: s.filter, buffers: s.buffers}
		}
	}
	return infos
}

// decoder decodes a v1 Pod or PodList from its bytes cut down by its
// filter, straight into the typed object; anything else, or bytes it
// cannot parse, as the protobuf serializer does.
type decoder struct {
	runtime.Serializer
	filter  Filter
	buffers *sync.Pool
}

func (d decoder) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if obj, kind, ok := d.decodeSlim(data, into); ok {
		return obj, kind, nil
	}
	return d.Serializer.Decode(data, gvk, into)
}

// unmarshaler is a generated protobuf message of k8s.io/api.
type unmarshaler interface {
	runtime.Object
	Reset()
	Unmarshal([]byte) error
}

func (d decoder) decodeSlim(data []byte, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, bool) {
	apiVersion, kind, raw, ok := unwrapProtobuf(data)
	switch {
	case !ok:
		return nil, nil, false
	case apiVersion == "apps/v1":
		obj, ok := d.decodeWorkload(kind, raw, into)
		if !ok {
			return nil, nil, false
		}
		return obj, &schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: kind}, true
	case apiVersion != "v1" || d.filter == nil:
		return nil, nil, false
	}
	var obj unmarshaler
	var filter Filter
	switch kind {
	case "Pod":
		filter = d.filter
		switch o := into.(type) {
		case nil:
			obj = &corev1.Pod{}
		case *corev1.Pod:
			if o != nil {
				obj = o
			}
		}
	case "PodList":
		filter = listOf(d.filter)
		switch o := into.(type) {
		case nil:
			obj = &corev1.PodList{}
		case *corev1.PodList:
			if o != nil {
				obj = o
			}
		}
	}
	if obj == nil {
		return nil, nil, false
	}
	buf, _ := d.buffers.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	defer d.buffers.Put(buf)
	slim, err := appendFiltered((*buf)[:0], raw, filter)
	*buf = slim
	if err != nil {
		return nil, nil, false
	}
	obj.Reset()
	// Unmarshal copies what it keeps: the buffer is reused.
	if err := obj.Unmarshal(slim); err != nil {
		return nil, nil, false
	}
	return obj, &schema.GroupVersionKind{Version: "v1", Kind: kind}, true
}

// protobufMagic starts every protobuf object the API server sends: then
// a runtime.Unknown holding the kind and the object's bytes.
const protobufMagic = "k8s\x00"

// Field numbers of the messages read here (k8s.io/api and apimachinery's
// generated.proto).
const (
	unknownTypeMeta         protowire.Number = 1 // runtime.Unknown
	unknownRaw              protowire.Number = 2
	typeMetaAPIVersion      protowire.Number = 1 // runtime.TypeMeta
	typeMetaKind            protowire.Number = 2
	podMetadata             protowire.Number = 1 // Pod
	podSpec                 protowire.Number = 2
	podStatus               protowire.Number = 3
	podListMeta             protowire.Number = 1 // PodList
	podListItems            protowire.Number = 2
	metaManagedFields       protowire.Number = 17 // ObjectMeta
	specVolumes             protowire.Number = 1  // PodSpec
	specContainers          protowire.Number = 2
	specNodeName            protowire.Number = 10
	specInitContainers      protowire.Number = 20
	specReadinessGates      protowire.Number = 28
	specEphemeralContainers protowire.Number = 34
	containerName           protowire.Number = 1 // Container
	containerImage          protowire.Number = 2
	containerResources      protowire.Number = 8
	containerStartup        protowire.Number = 22
	containerRestartPolicy  protowire.Number = 24
	statusPhaseField        protowire.Number = 1 // PodStatus
)

// unwrapProtobuf reads the envelope of a protobuf object: its apiVersion,
// its kind and its bytes.
func unwrapProtobuf(data []byte) (apiVersion, kind string, raw []byte, ok bool) {
	if len(data) < len(protobufMagic) || string(data[:len(protobufMagic)]) != protobufMagic {
		return "", "", nil, false
	}
	err := eachField(data[len(protobufMagic):], func(num protowire.Number, _ protowire.Type, _, value []byte) error {
		switch num {
		case unknownTypeMeta:
			var err error
			apiVersion, kind, err = typeMetaOf(value)
			return err
		case unknownRaw:
			raw = value
		}
		return nil
	})
	return apiVersion, kind, raw, err == nil && raw != nil
}

// typeMetaOf reads a runtime.TypeMeta.
func typeMetaOf(b []byte) (apiVersion, kind string, err error) {
	err = eachField(b, func(num protowire.Number, _ protowire.Type, _, value []byte) error {
		switch num {
		case typeMetaAPIVersion:
			apiVersion = string(value)
		case typeMetaKind:
			kind = string(value)
		}
		return nil
	})
	return apiVersion, kind, err
}

// Filter says of a message's field num whether it is kept and, for a
// message kept, the Filter of its own fields (nil: kept whole). A Pod's
// Filter cuts each Pod down.
type Filter func(num protowire.Number) (keep bool, sub Filter)

// listOf keeps a PodList with its pods cut down by pod.
func listOf(pod Filter) Filter {
	return func(num protowire.Number) (bool, Filter) {
		if num == podListItems {
			return true, pod
		}
		return true, nil
	}
}

// Watched keeps of a Pod what the rollout watcher's informers keep (see
// package wait's slimPod): its metadata but for the managedFields, its
// status whole, and of its spec the node and the containers' and init
// containers' names and startup probes.
func Watched(num protowire.Number) (bool, Filter) {
	switch num {
	case podMetadata:
		return true, metaFilter
	case podSpec:
		return true, watchedSpec
	}
	return true, nil
}

// metaFilter keeps an ObjectMeta but for its managedFields. The
// annotations stay: a watch's bookmark that ends its initial events says
// so in one (metav1.InitialEventsAnnotationKey), and an informer that
// lists by watching (client-go's WatchListClient, on by default) is not
// synced until it reads it. The informers drop them after decoding.
func metaFilter(num protowire.Number) (bool, Filter) {
	return num != metaManagedFields, nil
}

func watchedSpec(num protowire.Number) (bool, Filter) {
	switch num {
	case specNodeName:
		return true, nil
	case specContainers, specInitContainers:
		return true, watchedContainer
	}
	return false, nil
}

func watchedContainer(num protowire.Number) (bool, Filter) {
	return num == containerName || num == containerStartup, nil
}

// Requests keeps of a Pod what the capacity preflight reads (see
// package preflight's compactPod): its metadata but for the
// managedFields, its spec but for the volumes, readiness gates and
// ephemeral containers, each container's and init container's name,
// image, resources and restart policy, and its status' phase.
func Requests(num protowire.Number) (bool, Filter) {
	switch num {
	case podMetadata:
		return true, metaFilter
	case podSpec:
		return true, requestsSpec
	case podStatus:
		return true, statusPhase
	}
	return true, nil
}

func requestsSpec(num protowire.Number) (bool, Filter) {
	switch num {
	case specVolumes, specReadinessGates, specEphemeralContainers:
		return false, nil
	case specContainers, specInitContainers:
		return true, requestsContainer
	}
	return true, nil
}

func requestsContainer(num protowire.Number) (bool, Filter) {
	switch num {
	case containerName, containerImage, containerResources, containerRestartPolicy:
		return true, nil
	}
	return false, nil
}

func statusPhase(num protowire.Number) (bool, Filter) {
	return num == statusPhaseField, nil
}

// appendFiltered appends the fields of msg that f keeps, each message
// kept filtered by its own filter, sized first so that nothing is built
// twice.
func appendFiltered(out, msg []byte, f Filter) ([]byte, error) {
	err := eachField(msg, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		keep, sub := f(num)
		switch {
		case !keep:
			return nil
		case sub == nil || typ != protowire.BytesType:
			out = append(out, field...)
			return nil
		}
		n, err := filteredSize(value, sub)
		if err != nil {
			return err
		}
		out = protowire.AppendTag(out, num, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(n))
		out, err = appendFiltered(out, value, sub)
		return err
	})
	return out, err
}

// filteredSize is the length of what appendFiltered appends of msg.
func filteredSize(msg []byte, f Filter) (int, error) {
	size := 0
	err := eachField(msg, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		keep, sub := f(num)
		switch {
		case !keep:
			return nil
		case sub == nil || typ != protowire.BytesType:
			size += len(field)
			return nil
		}
		n, err := filteredSize(value, sub)
		if err != nil {
			return err
		}
		size += protowire.SizeTag(num) + protowire.SizeVarint(uint64(n)) + n
		return nil
	})
	return size, err
}

// eachField calls fn with each field of msg: its number, its wire type,
// the field whole (tag and value) and, for a length-delimited field, its
// value.
func eachField(msg []byte, fn func(num protowire.Number, typ protowire.Type, field, value []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return protowire.ParseError(m)
		}
		var value []byte
		if typ == protowire.BytesType {
			value, _ = protowire.ConsumeBytes(msg[n:])
		}
		if err := fn(num, typ, msg[:n+m], value); err != nil {
			return err
		}
		msg = msg[n+m:]
	}
	return nil
}
