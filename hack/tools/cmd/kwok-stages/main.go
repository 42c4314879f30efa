// Command kwok-stages prints kwok's default "fast" stages (nodes become
// Ready at once and keep a lease; pods become Ready at once and go away when
// deleted) as one multi-document YAML, the form `kwok --config` reads. The
// kwok binary does not load them by itself; its own cluster tool passes
// them the same way. Taking them from the pinned module keeps them in step
// with the kwok binary built next to them.
package main

import (
	"fmt"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodelease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	docs := []string{
		nodefast.DefaultNodeInit,
		nodelease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i := range docs {
		docs[i] = strings.TrimSpace(docs[i])
	}
	fmt.Println(strings.Join(docs, "\n---\n"))
}
