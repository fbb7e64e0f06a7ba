// Command controlplane is a multicall binary: `controlplane etcd|kube-apiserver|kube-controller-manager|kubectl [flags]`.
// One binary instead of three saves most of the link time and disk of a cold build.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name == "controlplane" {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, "usage: controlplane etcd|kube-apiserver|kube-controller-manager|kubectl [flags]")
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	// Cobra commands read os.Args[1:]; present them as if invoked directly.
	os.Args = append([]string{name}, args...)
	switch strings.TrimSuffix(name, ".exe") {
	case "etcd":
		os.Exit(runEtcd(args))
	case "kube-apiserver":
		os.Exit(runAPIServer())
	case "kube-controller-manager":
		os.Exit(runControllerManager())
	case "kubectl":
		os.Exit(runKubectl())
	case "version":
		fmt.Println(version())
	default:
		fmt.Fprintf(os.Stderr, "controlplane: unknown component %q\n", name)
		os.Exit(2)
	}
}
