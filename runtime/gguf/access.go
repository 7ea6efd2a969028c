package gguf

// Get returns the value of key.
func (f *File) Get(key string) (any, bool) {
	i, ok := f.kv[key]
	if !ok {
		return nil, false
	}
	return f.KVs[i].Value, true
}

// Arch returns general.architecture ("" when absent).
func (f *File) Arch() string {
	s, _ := f.String("general.architecture")
	return s
}

// Tensor returns the tensor named name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensors[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Get(key)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	v, ok := f.Get(key)
	if !ok {
		return false, false
	}
	b, ok := v.(bool)
	return b, ok
}

// Int returns an integer value of any integer type (uint64 values above the
// int64 range are refused).
func (f *File) Int(key string) (int64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	return asInt(v)
}

// Uint returns a non-negative integer value of any integer type.
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	if u, isU := v.(uint64); isU {
		return u, true
	}
	i, ok := asInt(v)
	if !ok || i < 0 {
		return 0, false
	}
	return uint64(i), true
}

// Float returns a numeric value of any numeric type as float64.
func (f *File) Float(key string) (float64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if u, isU := v.(uint64); isU {
		return float64(u), true
	}
	i, ok := asInt(v)
	return float64(i), ok
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		if x > 1<<63-1 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

// Strings returns a string array.
func (f *File) Strings(key string) ([]string, bool) {
	v, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	s, ok := v.([]string)
	return s, ok
}

// Float32s returns a numeric array as float32s.
func (f *File) Float32s(key string) ([]float32, bool) {
	v, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	switch x := v.(type) {
	case []float32:
		return x, true
	case []float64:
		out := make([]float32, len(x))
		for i, e := range x {
			out[i] = float32(e)
		}
		return out, true
	}
	ints, ok := int32sOf(v)
	if !ok {
		return nil, false
	}
	out := make([]float32, len(ints))
	for i, e := range ints {
		out[i] = float32(e)
	}
	return out, true
}

// Int32s returns an integer array converted to int32 (values out of the
// int32 range make it fail).
func (f *File) Int32s(key string) ([]int32, bool) {
	v, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	return int32sOf(v)
}

func int32sOf(v any) ([]int32, bool) {
	conv := func(n int, at func(int) (int64, bool)) ([]int32, bool) {
		out := make([]int32, n)
		for i := range out {
			x, ok := at(i)
			if !ok || x < -1<<31 || x > 1<<31-1 {
				return nil, false
			}
			out[i] = int32(x)
		}
		return out, true
	}
	switch x := v.(type) {
	case []int32:
		return x, true
	case []uint8:
		return conv(len(x), func(i int) (int64, bool) { return int64(x[i]), true })
	case []int8:
		return conv(len(x), func(i int) (int64, bool) { return int64(x[i]), true })
	case []uint16:
		return conv(len(x), func(i int) (int64, bool) { return int64(x[i]), true })
	case []int16:
		return conv(len(x), func(i int) (int64, bool) { return int64(x[i]), true })
	case []uint32:
		return conv(len(x), func(i int) (int64, bool) { return int64(x[i]), true })
	case []int64:
		return conv(len(x), func(i int) (int64, bool) { return x[i], true })
	case []uint64:
		return conv(len(x), func(i int) (int64, bool) { return asInt(x[i]) })
	}
	return nil, false
}
