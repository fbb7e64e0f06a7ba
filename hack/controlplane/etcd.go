package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd starts a single-member etcd on loopback. Writes are synced to disk unless
// --unsafe-no-fsync is given: the tests' and `platform dev`'s throwaway clusters give it (a
// crash may lose their last writes), a provisioned virtual cluster's storage does not.
func runEtcd(args []string) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "data directory (required)")
	clientURL := fs.String("listen-client-url", "http://127.0.0.1:2379", "client URL")
	peerURL := fs.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	unsafeNoFsync := fs.Bool("unsafe-no-fsync", false, "do not sync writes to disk (throwaway clusters only)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir is required")
		return 2
	}
	cu, err := url.Parse(*clientURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: bad --listen-client-url: %v\n", err)
		return 2
	}
	pu, err := url.Parse(*peerURL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: bad --listen-peer-url: %v\n", err)
		return 2
	}

	cfg := embed.NewConfig()
	cfg.Name = "controlplane"
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = *unsafeNoFsync
	cfg.LogLevel = *logLevel

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: start: %v\n", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready on %s\n", cu)
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		fmt.Fprintln(os.Stderr, "etcd: not ready after 60s")
		return 1
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "etcd: %s, stopping\n", s)
		return 0
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
}
