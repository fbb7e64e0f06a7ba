package main

import (
	_ "time/tzdata" // as upstream: time zones for CronJob and friends without system tzdata

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	basever "k8s.io/component-base/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func runAPIServer() int {
	return cli.Run(apiserver.NewAPIServerCommand())
}

func runControllerManager() int {
	return cli.Run(controllermanager.NewControllerManagerCommand())
}

// runKubectl gives tests and `platform dev` a kubectl at exactly the control plane's version,
// rather than whatever client a machine happens to have installed.
func runKubectl() int {
	if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
		// kubectl has already printed the error, as upstream's main does.
		return 1
	}
	return 0
}

func version() string {
	return basever.Get().GitVersion
}
