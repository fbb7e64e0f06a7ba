// Command health says what the GitOps tools' own code makes of objects read from an apiserver:
//
//   - kstatus: sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute, the library Flux's health checks,
//     cli-utils (kpt, kubectl's apply-set tooling) read status with;
//   - Argo CD: the Lua health script documented for the object's group/kind, run as Argo CD runs a
//     resource customization from argocd-cm: gopher-lua (the engine Argo CD embeds) with the
//     standard libraries off except package, base and table, the object as the global `obj`, a
//     one-second budget, the returned table's `status` (one of Argo CD's health codes, else
//     Unknown) and `message`. As Argo CD's gitops-engine does before any script, an object with a
//     deletionTimestamp is Progressing ("Pending deletion").
//
// Input on stdin: {"scripts": {"<group>/<Kind>": "<lua>"}, "objects": [<object>...]}.
// Output on stdout: one result per object, in order:
// [{"kind", "name", "namespace", "kstatus": {"status", "message"}, "argocd": {"status", "message"} | null}].
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type input struct {
	Scripts map[string]string `json:"scripts"`
	// Decoded as the apiserver's clients do (whole numbers as int64), which kstatus expects.
	Objects []json.RawMessage `json:"objects"`
}

type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

type result struct {
	Kind      string   `json:"kind"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace,omitempty"`
	Kstatus   verdict  `json:"kstatus"`
	ArgoCD    *verdict `json:"argocd"`
}

// Argo CD's health codes (gitops-engine pkg/health); anything else reads as Unknown.
var argoCodes = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true,
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fail("reading the input: %v", err)
	}
	results := make([]result, 0, len(in.Objects))
	for _, raw := range in.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			fail("decoding an object: %v", err)
		}
		computed, err := status.Compute(u)
		if err != nil {
			fail("kstatus of %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		r := result{
			Kind:      u.GetKind(),
			Name:      u.GetName(),
			Namespace: u.GetNamespace(),
			Kstatus:   verdict{Status: computed.Status.String(), Message: computed.Message},
		}
		gvk := u.GroupVersionKind()
		key := gvk.Kind
		if gvk.Group != "" {
			key = gvk.Group + "/" + gvk.Kind
		}
		if script, ok := in.Scripts[key]; ok {
			v, err := argoHealth(u, script)
			if err != nil {
				fail("Argo CD health script of %s: %v", key, err)
			}
			r.ArgoCD = &v
		}
		results = append(results, r)
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	if err := out.Encode(results); err != nil {
		fail("writing the output: %v", err)
	}
}

func argoHealth(u *unstructured.Unstructured, script string) (verdict, error) {
	if u.GetDeletionTimestamp() != nil {
		return verdict{Status: "Progressing", Message: "Pending deletion"}, nil
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return verdict{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, u.Object))
	if err := l.DoString(script); err != nil {
		return verdict{}, err
	}
	returned, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return verdict{}, fmt.Errorf("expect table output from Lua script, not %s", l.Get(-1).Type())
	}
	v := verdict{Status: lua.LVAsString(returned.RawGetString("status")), Message: lua.LVAsString(returned.RawGetString("message"))}
	if !argoCodes[v.Status] {
		return verdict{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
	}
	return v, nil
}

// toLua converts decoded JSON as Argo CD's decodeValue does: objects and arrays become tables.
func toLua(l *lua.LState, value interface{}) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []interface{}:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]interface{}:
		t := l.CreateTable(0, len(v))
		for key, item := range v {
			t.RawSetH(lua.LString(key), toLua(l, item))
		}
		return t
	}
	return lua.LNil
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "health: "+format+"\n", args...)
	os.Exit(1)
}
