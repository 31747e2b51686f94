package expr

import (
	"slices"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// orderedAdapter makes every map CEL sees iterate in sorted key order. CEL
// would otherwise walk a Go map in Go's random order, so
// `params.m.map(k, k)` could give a different list on replay: workflow code
// must never see that.
type orderedAdapter struct{ base types.Adapter }

func (a orderedAdapter) NativeToValue(v any) ref.Val {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return orderedMap{Mapper: types.NewStringInterfaceMap(a, x), keys: keys}
	case []any:
		return types.NewDynamicList(a, x)
	}
	return a.base.NativeToValue(v)
}

type orderedMap struct {
	traits.Mapper
	keys []string
}

func (m orderedMap) Iterator() traits.Iterator {
	return &keyIterator{Iterator: m.Mapper.Iterator(), keys: m.keys}
}

type keyIterator struct {
	traits.Iterator // for the ref.Val methods
	keys            []string
	next            int
}

func (it *keyIterator) HasNext() ref.Val { return types.Bool(it.next < len(it.keys)) }

func (it *keyIterator) Next() ref.Val {
	if it.next >= len(it.keys) {
		return nil
	}
	k := it.keys[it.next]
	it.next++
	return types.String(k)
}
