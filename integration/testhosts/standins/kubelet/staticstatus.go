package main

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// staticPodStatus is what a mirror pod shows of a static pod.
type staticPodStatus struct {
	pod        *corev1.Pod
	hash       string
	containers []containerStatus
}

type containerStatus struct {
	name, image string
	running     bool
	// started and ready are the probes' word on a running container.
	started, ready bool
	startedAt      time.Time
	restarts       int
	last           *termination
	finished       bool
}

// statuses returns the static pods that run (not being stopped), and
// whether the directory has been read yet.
func (m *staticPods) statuses() ([]staticPodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []staticPodStatus
	for _, run := range m.pods {
		if run.stopping || run.pod == nil {
			continue
		}
		st := staticPodStatus{pod: run.pod, hash: run.hash}
		for _, c := range run.containers {
			cs := containerStatus{name: c.name, image: c.image, restarts: c.restarts, last: c.last, finished: c.finished}
			if c.proc != nil && c.proc.alive() {
				cs.running, cs.startedAt = true, c.proc.startedAt
				cs.started, cs.ready, _ = c.probes.state()
			}
			st.containers = append(st.containers, cs)
		}
		out = append(out, st)
	}
	return out, m.synced
}

// logFile is the log of a static pod's container, found by the pod's name
// or its mirror pod's.
func (m *staticPods) logFile(namespace, name, container string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, run := range m.pods {
		if run.pod == nil || run.namespace != namespace || (run.name != name && run.name+"-"+m.node.name != name) {
			continue
		}
		for _, c := range run.containers {
			if c.name == container {
				return logPath(m.logsDir, run.pod, container), true
			}
		}
	}
	return "", false
}
