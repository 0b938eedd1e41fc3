package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// DefaultMaxSize is the limit on a document's length when Rules.MaxSize is
// zero: 1 MiB.
const DefaultMaxSize = 1 << 20

// ErrTooLarge is returned for a document over its size limit.
var ErrTooLarge = errors.New("strictjson: document too large")

// Rules are the choices a reader of JSON has; the rest of the rules (exact
// names, no duplicates, valid UTF-8, nothing after the value) always hold.
type Rules struct {
	// MaxSize is the longest document accepted, in bytes; zero means
	// DefaultMaxSize, and a negative size means no limit, for files that
	// hold only what the process itself wrote and must stay readable
	// however large they grew.
	MaxSize int
	// SkipUnknown ignores members that the target has no field for,
	// instead of refusing them: for answers of a peer that may add
	// members (RFC 9457 extension members, RFC 9578 directories). The
	// skipped values are still checked for duplicates and UTF-8.
	SkipUnknown bool
}

// Unmarshal decodes data into v, a non-nil pointer, by the default Rules:
// unknown members are refused.
func Unmarshal(data []byte, v any) error {
	return Rules{}.Unmarshal(data, v)
}

// Unmarshal checks data against r and the package's rules, walking it along
// the type of v, then decodes it into v, a non-nil pointer, with
// encoding/json. On error v may be partly written.
func (r Rules) Unmarshal(data []byte, v any) error {
	max := r.MaxSize
	if max == 0 {
		max = DefaultMaxSize
	}
	if max > 0 && len(data) > max {
		return fmt.Errorf("%w: %d bytes, over the limit of %d", ErrTooLarge, len(data), max)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictjson: Unmarshal needs a non-nil pointer, got %T", v)
	}
	var d Decoder
	d.Reset(data)
	if err := d.walk(rv.Type().Elem(), r.SkipUnknown, 0); err != nil {
		return fmt.Errorf("strictjson: %w", err)
	}
	if err := d.End(); err != nil {
		return fmt.Errorf("strictjson: %w", err)
	}
	return json.Unmarshal(data, v)
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	// fieldCache maps a struct type to its fields by JSON name.
	fieldCache sync.Map // reflect.Type -> map[string]reflect.Type
)

// walk reads one value that encoding/json would decode into a t, checking
// the names of the members of structs against t's fields.
func (d *Decoder) walk(t reflect.Type, skipUnknown bool, depth int) error {
	if depth > MaxDepth {
		return d.Fail("nested too deep")
	}
	if d.Null() {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		// The type reads its own members (time.Time, json.RawMessage).
		return d.Skip(depth)
	}
	switch c := d.Peek(); {
	case c == '{' && t.Kind() == reflect.Struct:
		fields := fieldsOf(t)
		return d.Object(func(name []byte) error {
			ft, ok := fields[string(name)]
			if ok {
				return d.walk(ft, skipUnknown, depth+1)
			}
			for known := range fields {
				if strings.EqualFold(known, string(name)) {
					// encoding/json would read it into that field.
					return &MemberError{Name: string(name), Err: ErrCase}
				}
			}
			if skipUnknown {
				return d.Skip(depth + 1)
			}
			return &MemberError{Name: string(name), Err: ErrUnknown}
		})
	case c == '{' && t.Kind() == reflect.Map:
		return d.Object(func([]byte) error { return d.walk(t.Elem(), skipUnknown, depth+1) })
	case c == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		return d.Array(func(int) error { return d.walk(t.Elem(), skipUnknown, depth+1) })
	}
	// A scalar, a value for an interface, or a shape encoding/json will
	// refuse for t.
	return d.Skip(depth)
}

// fieldsOf returns the fields encoding/json decodes members of t into, by
// exact name, with their types.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	f := typeFields(t)
	fieldCache.Store(t, f)
	return f
}

// typeFields follows encoding/json's rules: exported fields, named by their
// tag or their Go name, "-" left out; the fields of an embedded struct
// without a tag name are promoted, and where several fields at the
// shallowest depth claim one name, the one tagged alone wins, else the name
// is ambiguous and no field has it.
func typeFields(t reflect.Type) map[string]reflect.Type {
	type candidate struct {
		typ    reflect.Type
		tagged bool
	}
	out := map[string]reflect.Type{}
	decided := map[string]bool{} // names settled at a shallower depth
	visited := map[reflect.Type]bool{}
	for level := []reflect.Type{t}; len(level) > 0; {
		var next []reflect.Type
		found := map[string][]candidate{}
		var order []string
		for _, st := range level {
			if visited[st] {
				continue
			}
			visited[st] = true
			for i := range st.NumField() {
				sf := st.Field(i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if sf.Anonymous {
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					next = append(next, ft)
					continue
				}
				tagged := name != ""
				if !tagged {
					name = sf.Name
				}
				if _, ok := found[name]; !ok {
					order = append(order, name)
				}
				found[name] = append(found[name], candidate{sf.Type, tagged})
			}
		}
		for _, name := range order {
			if decided[name] {
				continue
			}
			decided[name] = true
			cs, winner := found[name], -1
			for i, c := range cs {
				if c.tagged {
					if winner >= 0 {
						winner = -1
						break
					}
					winner = i
				}
			}
			if winner < 0 && len(cs) == 1 {
				winner = 0
			}
			if winner >= 0 {
				out[name] = cs[winner].typ
			}
		}
		level = next
	}
	return out
}
