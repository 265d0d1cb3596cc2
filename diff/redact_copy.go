package diff

import (
	"reflect"
	"strconv"
)

// RedactCopy returns a deep copy of v in which every string passed
// through r (line by line, as [Redactor.Text] does), so that a document
// printed or stored from it holds no known Secret value, whatever fields
// its type gains later. Struct fields tagged `redact:"keep"` are copied as
// they are: the record's manifest, values and names, which are stored as
// given. A number held in an interface (a values map's 12345678) whose
// text is a known value becomes the string "(redacted)". Map keys are kept.
// Unexported fields are copied, not redacted. The nil Redactor, or one
// that knows no value, returns v itself.
func RedactCopy[T any](r *Redactor, v T) T {
	if !r.knowsAny() {
		return v
	}
	rv := reflect.ValueOf(&v).Elem()
	out := r.copyValue(rv)
	return out.Interface().(T)
}

func (r *Redactor) knowsAny() bool {
	if r == nil {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.values) > 0
}

// copyValue returns a redacted copy of v, of v's type.
func (r *Redactor) copyValue(v reflect.Value) reflect.Value {
	t := v.Type()
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		c := r.Text(s)
		if c == s {
			return v
		}
		return reflect.ValueOf(c).Convert(t)
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(t.Elem())
		p.Elem().Set(r.copyValue(v.Elem()))
		return p
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(t).Elem()
		out.Set(r.copyInterface(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(t).Elem()
		out.Set(v)
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("redact") == "keep" {
				continue
			}
			out.Field(i).Set(r.copyValue(v.Field(i)))
		}
		return out
	case reflect.Slice:
		if v.IsNil() || t.Elem().Kind() == reflect.Uint8 {
			return v
		}
		out := reflect.MakeSlice(t, v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(r.copyValue(v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(t).Elem()
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(r.copyValue(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(t, v.Len())
		it := v.MapRange()
		for it.Next() {
			out.SetMapIndex(it.Key(), r.copyValue(it.Value()))
		}
		return out
	default:
		return v
	}
}

// copyInterface redacts the dynamic value e of an interface: a number
// whose text is a known value becomes the marker string.
func (r *Redactor) copyInterface(e reflect.Value) reflect.Value {
	var text string
	switch e.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		text = strconv.FormatInt(e.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		text = strconv.FormatUint(e.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		text = strconv.FormatFloat(e.Float(), 'f', -1, 64)
	default:
		return r.copyValue(e)
	}
	if r.Line(text) != text {
		return reflect.ValueOf(Redacted)
	}
	return e
}
