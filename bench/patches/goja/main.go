// Expression patches per second in goja, the engine of the reference product. Prints JSON.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/dop251/goja"
)

func measure(expression string, value any, duration time.Duration) float64 {
	vm := goja.New()
	fnValue, err := vm.RunString("(function (value, valueExists, context) {\n'use strict';\nreturn (\n" + expression + "\n);\n})")
	if err != nil {
		panic(err)
	}
	fn, ok := goja.AssertFunction(fnValue)
	if !ok {
		panic("not a function")
	}
	context := map[string]any{"vcluster": map[string]any{"name": "vc", "namespace": "vc-ns"}, "path": "spec.x"}
	ops := 0
	start := time.Now()
	for time.Since(start) < duration {
		for i := 0; i < 100; i++ {
			result, err := fn(goja.Undefined(), vm.ToValue(value), vm.ToValue(true), vm.ToValue(context))
			if err != nil {
				panic(err)
			}
			_ = result.Export()
		}
		ops += 100
	}
	return float64(ops) / time.Since(start).Seconds()
}

func main() {
	var cases []struct {
		Name       string `json:"name"`
		Expression string `json:"expression"`
		Value      any    `json:"value"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	out := map[string]float64{}
	for _, c := range cases {
		out[c.Name] = measure(c.Expression, c.Value, time.Second)
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}
