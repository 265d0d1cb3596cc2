// Pod lists read as they arrive: a NewClient client's List filters each
// pod of a page as its bytes come off the connection, instead of reading
// the page whole first (client-go's Do reads a response into one buffer,
// grown by doubling: a page of 250 pods of a few KiB each was the largest
// piece of memory a deploy of a big release held at its start).

package podwire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// client is the REST client NewClient returns: with the filter its pods
// are cut down by, which List applies itself as a page arrives.
type client struct {
	*rest.RESTClient
	filter Filter
}

// maxItemBytes bounds the bytes of one item of a streamed list (and of
// any other field read whole): the API server refuses objects over 1.5
// MiB (etcd's limit); a larger length is a corrupt stream, not a pod to
// allocate for. The list itself is not bounded: it is never held whole,
// nor is a field passed over.
const maxItemBytes = 16 << 20

// List lists the pods of c.Namespace ("": all) as the typed client's
// PodInterface does. Through a NewClient client each pod is cut down by
// the client's filter as it is read; a connection that fails before the
// response (a reset, an API server going away) is tried again as
// client-go's Do does, through Do.
func (c Pods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	req := func() *rest.Request {
		return c.RC.Get().Namespace(c.Namespace).Resource("pods").
			VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeoutOf(opts))
	}
	out := &corev1.PodList{}
	fc, ok := c.RC.(*client)
	if !ok || fc.filter == nil {
		return out, req().Do(ctx).Into(out)
	}
	body, err := req().Stream(ctx)
	if err != nil {
		if utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err) {
			return out, req().Do(ctx).Into(out)
		}
		return out, err
	}
	defer body.Close()
	if err := new(stream).readList(body, fc.filter, out); err != nil {
		return out, fmt.Errorf("read the pods' list: %w", err)
	}
	return out, nil
}

// readList reads a PodList from r, the body of a list's response, into
// out: a protobuf one item by item, each pod cut down by f; any other
// (JSON) whole, as the client's serializer decodes it.
func (s *stream) readList(r io.Reader, f Filter, out *corev1.PodList) error {
	br := bufio.NewReaderSize(r, 32<<10)
	magic, err := br.Peek(len(protobufMagic))
	if err != nil || string(magic) != protobufMagic {
		data, err := io.ReadAll(br)
		if err != nil {
			return err
		}
		_, _, err = scheme.Codecs.UniversalDeserializer().Decode(data, nil, out)
		return err
	}
	if _, err := br.Discard(len(protobufMagic)); err != nil {
		return err
	}
	s.r = br
	apiVersion, kind, listed := "", "", false
	err = s.fields(-1, func(num protowire.Number, n int) error {
		switch num {
		case unknownTypeMeta:
			b, err := s.read(n)
			if err != nil {
				return err
			}
			apiVersion, kind, err = typeMetaOf(b)
			return err
		case unknownRaw:
			if apiVersion != "v1" || kind != "PodList" {
				return fmt.Errorf("a list of pods expected, got %s %s", apiVersion, kind)
			}
			listed = true
			return s.podList(n, f, out)
		}
		return s.skip(n)
	})
	if err == nil && !listed {
		err = errors.New("no list in the response")
	}
	return err
}

// stream reads protobuf fields off a reader.
type stream struct {
	r    *bufio.Reader
	buf  []byte // an item's bytes, reused
	slim []byte // an item's bytes cut down, reused
}

// fields calls fn with the number and the length of each
// length-delimited field of the next size bytes (-1: up to the end of
// the stream); fn reads the field's value. Fields of other wire types
// are skipped.
func (s *stream) fields(size int, fn func(num protowire.Number, n int) error) error {
	for size != 0 {
		tag, tn, err := s.varint()
		if err != nil {
			if errors.Is(err, io.EOF) && size < 0 && tn == 0 {
				return nil // the end of the stream, between two fields
			}
			return noEOF(err)
		}
		num, typ := protowire.DecodeTag(tag)
		if num <= 0 {
			return errors.New("invalid field number")
		}
		used := tn
		switch typ {
		case protowire.BytesType:
			n, ln, err := s.varint()
			if err != nil {
				return noEOF(err)
			}
			if n > math.MaxInt32 || (size >= 0 && int(n) > size-used-ln) {
				return fmt.Errorf("field %d: length %d out of bounds", num, n)
			}
			if err := fn(num, int(n)); err != nil {
				return err
			}
			used += ln + int(n)
		case protowire.VarintType:
			_, n, err := s.varint()
			if err != nil {
				return noEOF(err)
			}
			used += n
		case protowire.Fixed32Type, protowire.Fixed64Type:
			n := 4
			if typ == protowire.Fixed64Type {
				n = 8
			}
			if err := s.skip(n); err != nil {
				return err
			}
			used += n
		default:
			return fmt.Errorf("field %d: unexpected wire type %d", num, typ)
		}
		if size >= 0 {
			if used > size {
				return errors.New("a field runs past its message")
			}
			size -= used
		}
	}
	return nil
}

// podList reads the n bytes of a PodList into out, each pod cut down by
// f as it is read.
func (s *stream) podList(n int, f Filter, out *corev1.PodList) error {
	return s.fields(n, func(num protowire.Number, n int) error {
		switch num {
		case podListItems:
			b, err := s.read(n)
			if err != nil {
				return err
			}
			if s.slim, err = appendFiltered(s.slim[:0], b, f); err != nil {
				return err
			}
			out.Items = append(out.Items, corev1.Pod{})
			// Unmarshal copies what it keeps: the buffers are reused.
			return out.Items[len(out.Items)-1].Unmarshal(s.slim)
		case podListMeta:
			b, err := s.read(n)
			if err != nil {
				return err
			}
			return out.ListMeta.Unmarshal(b)
		}
		return s.skip(n)
	})
}

// read reads the next n bytes into s.buf, valid until the next read.
func (s *stream) read(n int) ([]byte, error) {
	if n > maxItemBytes {
		return nil, fmt.Errorf("a field of %d bytes", n)
	}
	if cap(s.buf) < n {
		s.buf = make([]byte, n)
	}
	s.buf = s.buf[:n]
	_, err := io.ReadFull(s.r, s.buf)
	return s.buf, noEOF(err)
}

// skip passes over the next n bytes.
func (s *stream) skip(n int) error {
	_, err := s.r.Discard(n)
	return noEOF(err)
}

// varint reads a varint and how many bytes it took.
func (s *stream) varint() (uint64, int, error) {
	var v uint64
	for i := 0; i < 10; i++ {
		b, err := s.r.ReadByte()
		if err != nil {
			return 0, i, err
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, i + 1, nil
		}
	}
	return 0, 10, errors.New("varint overflow")
}

// noEOF turns an end of stream in the middle of a message into an
// unexpected one.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
