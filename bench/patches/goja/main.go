// Patched objects per second in goja, the engine of the reference product, doing per object what
// its syncer does around the engine: the object becomes an unstructured map (the reference
// converts its typed object with the unstructured converter; decoding the object's JSON stands
// in for that), every patch's path is walked, the patch's compiled expression is called on every
// match with the context variable and the results are written back, and the map becomes the
// object that is written (encoding to JSON stands in for the converter's way back). One runtime,
// each expression compiled once: cheaper than the reference, which also computes merge patches.
// Reads the cases as JSON on stdin, prints {"case": objects per second} as JSON.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dop251/goja"
)

type patch struct {
	Path       string `json:"path"`
	Expression string `json:"expression"`
}

type benchCase struct {
	Name    string          `json:"name"`
	Object  json.RawMessage `json:"object"`
	Patches []patch         `json:"patches"`
}

// segment of a path: a key, an index, or "*" (wildcard).
type segment struct {
	key      string
	index    int
	isIndex  bool
	wildcard bool
}

// parsePath handles the forms the cases use: a.b, a[0], a[*], a["k.k"].
func parsePath(path string) []segment {
	var out []segment
	for _, part := range splitDots(path) {
		for part != "" {
			open := strings.IndexByte(part, '[')
			if open < 0 {
				out = append(out, bare(part))
				break
			}
			if open > 0 {
				out = append(out, bare(part[:open]))
			}
			end := strings.IndexByte(part, ']')
			inner := part[open+1 : end]
			if strings.HasPrefix(inner, "\"") {
				out = append(out, segment{key: strings.Trim(inner, "\"")})
			} else {
				out = append(out, bare(inner))
			}
			part = part[end+1:]
		}
	}
	return out
}

func splitDots(path string) []string {
	var parts []string
	depth := 0
	start := 0
	for i, c := range path {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case '.':
			if depth == 0 {
				parts = append(parts, path[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, path[start:])
}

func bare(word string) segment {
	if word == "*" {
		return segment{wildcard: true}
	}
	if n, err := strconv.Atoi(word); err == nil {
		return segment{index: n, isIndex: true}
	}
	return segment{key: word}
}

type match struct {
	parent any
	key    string
	index  int
	value  any
	path   string
}

// expand finds every existing value the path names, as the reference's patch utility does.
func expand(root any, segments []segment) []match {
	frontier := []match{{value: root}}
	for _, s := range segments {
		var next []match
		for _, m := range frontier {
			switch v := m.value.(type) {
			case []any:
				for i, e := range v {
					if s.wildcard || (s.isIndex && s.index == i) {
						next = append(next, match{parent: v, index: i, value: e, path: m.path + "." + strconv.Itoa(i)})
					}
				}
			case map[string]any:
				if s.wildcard {
					for k, e := range v {
						next = append(next, match{parent: v, key: k, value: e, path: m.path + "." + k})
					}
				} else if e, ok := v[s.key]; ok {
					next = append(next, match{parent: v, key: s.key, value: e, path: m.path + "." + s.key})
				}
			}
		}
		frontier = next
	}
	return frontier
}

func measure(c benchCase, duration time.Duration) float64 {
	vm := goja.New()
	type compiled struct {
		fn       goja.Callable
		segments []segment
	}
	var patches []compiled
	for _, p := range c.Patches {
		value, err := vm.RunString("(function (value, valueExists, context) {\n'use strict';\nreturn (\n" + p.Expression + "\n);\n})")
		if err != nil {
			panic(err)
		}
		fn, ok := goja.AssertFunction(value)
		if !ok {
			panic("not a function")
		}
		patches = append(patches, compiled{fn: fn, segments: parsePath(p.Path)})
	}
	vcluster := map[string]any{"name": "vc", "namespace": "vc-ns", "config": map[string]any{}}
	one := func() {
		var doc map[string]any
		if err := json.Unmarshal(c.Object, &doc); err != nil {
			panic(err)
		}
		for _, p := range patches {
			for _, m := range expand(doc, p.segments) {
				context := map[string]any{"vcluster": vcluster, "path": strings.TrimPrefix(m.path, "."), "hostObject": doc, "virtualObject": nil}
				result, err := p.fn(goja.Undefined(), vm.ToValue(m.value), vm.ToValue(true), vm.ToValue(context))
				if err != nil {
					panic(err)
				}
				exported := result.Export()
				switch parent := m.parent.(type) {
				case []any:
					parent[m.index] = exported
				case map[string]any:
					parent[m.key] = exported
				}
			}
		}
		if _, err := json.Marshal(doc); err != nil {
			panic(err)
		}
	}
	for i := 0; i < 200; i++ {
		one()
	}
	ops := 0
	start := time.Now()
	for time.Since(start) < duration {
		for i := 0; i < 20; i++ {
			one()
		}
		ops += 20
	}
	return float64(ops) / time.Since(start).Seconds()
}

func main() {
	var input struct {
		DurationMs int         `json:"durationMs"`
		Cases      []benchCase `json:"cases"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&input); err != nil {
		panic(err)
	}
	out := map[string]float64{}
	for _, c := range input.Cases {
		out[c.Name] = measure(c, time.Duration(input.DurationMs)*time.Millisecond)
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}
