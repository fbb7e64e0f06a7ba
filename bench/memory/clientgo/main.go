// Command clientgomemory caches the objects of some resources in client-go informers, as a Go
// controller would (typed informers for the built-in kinds, dynamic ones for custom resources),
// and prints the resident memory of the process before and after the caches synced, each after a
// forced garbage collection that returns freed memory to the OS.
//
//	clientgomemory --kubeconfig K [--strip-managed-fields] [--timeout 5m] RESOURCE...
//
// A RESOURCE is group/version/resource (core: /v1/secrets), optionally followed by
// @namespace and ?labelSelector. One JSON line goes to stdout:
// {"objects":N,"rssBeforeBytes":B,"rssAfterBytes":A}. Exits non-zero on any failure, and past
// the timeout if the caches have not synced by then.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

type target struct {
	gvr           schema.GroupVersionResource
	namespace     string
	labelSelector string
}

func parseTarget(spec string) (target, error) {
	var t target
	if i := strings.Index(spec, "?"); i >= 0 {
		spec, t.labelSelector = spec[:i], spec[i+1:]
	}
	if i := strings.Index(spec, "@"); i >= 0 {
		spec, t.namespace = spec[:i], spec[i+1:]
	}
	parts := strings.Split(spec, "/")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return t, fmt.Errorf("resource %q is not group/version/resource", spec)
	}
	t.gvr = schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}
	return t, nil
}

// stripManagedFields is the TransformFunc Go controllers use to keep managedFields out of their
// caches (controller-runtime's cache.TransformStripManagedFields does the same).
func stripManagedFields(obj interface{}) (interface{}, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// residentBytes is the process's resident set size after a forced collection returned what it
// could to the OS.
func residentBytes() (uint64, error) {
	runtime.GC()
	debug.FreeOSMemory()
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(statm))
	if len(fields) < 2 {
		return 0, fmt.Errorf("unexpected /proc/self/statm: %q", statm)
	}
	pages, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * uint64(os.Getpagesize()), nil
}

func informerFor(
	t target, typed kubernetes.Interface, dyn dynamic.Interface,
) (cache.SharedIndexInformer, error) {
	tweak := func(options *metav1.ListOptions) { options.LabelSelector = t.labelSelector }
	factory := informers.NewSharedInformerFactoryWithOptions(
		typed, 0, informers.WithNamespace(t.namespace), informers.WithTweakListOptions(tweak))
	if generic, err := factory.ForResource(t.gvr); err == nil {
		return generic.Informer(), nil
	}
	dynamicFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, t.namespace, tweak)
	return dynamicFactory.ForResource(t.gvr).Informer(), nil
}

func run() error {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the apiserver")
	strip := flag.Bool("strip-managed-fields", false, "drop metadata.managedFields before caching")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up if the caches have not synced by then")
	flag.Parse()
	targets := make([]target, 0, flag.NArg())
	for _, spec := range flag.Args() {
		t, err := parseTarget(spec)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	config.QPS, config.Burst = -1, 0 // no client-side throttling: the caches fill as fast as the server lists
	typed, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// One request before the first measure, so the connection and its buffers are not counted as cache.
	if _, err := typed.Discovery().ServerVersion(); err != nil {
		return err
	}
	before, err := residentBytes()
	if err != nil {
		return err
	}
	cached := make([]cache.SharedIndexInformer, 0, len(targets))
	for _, t := range targets {
		informer, err := informerFor(t, typed, dyn)
		if err != nil {
			return err
		}
		if *strip {
			if err := informer.SetTransform(stripManagedFields); err != nil {
				return err
			}
		}
		go informer.Run(ctx.Done())
		cached = append(cached, informer)
	}
	for i, informer := range cached {
		if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			return fmt.Errorf("cache of %v not synced within %v", targets[i].gvr, *timeout)
		}
	}
	after, err := residentBytes()
	if err != nil {
		return err
	}
	objects := 0
	for _, informer := range cached {
		objects += len(informer.GetStore().ListKeys())
	}
	runtime.KeepAlive(cached)
	return json.NewEncoder(os.Stdout).Encode(map[string]uint64{
		"objects": uint64(objects), "rssBeforeBytes": before, "rssAfterBytes": after,
	})
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "clientgomemory:", err)
		os.Exit(1)
	}
}
