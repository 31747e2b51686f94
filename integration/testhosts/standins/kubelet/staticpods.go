package main

import (
	"context"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// How static pods are run.
const (
	rescanEvery  = time.Second      // the manifest directory is read this often
	defaultGrace = 10 * time.Second // SIGTERM to SIGKILL, unless the pod says
	maxBackoff   = 20 * time.Second // between restarts of a crashing container
	backoffReset = time.Minute      // a container that ran this long starts its backoff afresh
)

// staticPods runs the pods of the static pod directory as processes. A
// process outlives the simulator; the next one adopts it when its manifest
// is unchanged (a kubelet restart restarts no control plane), restarts it
// when the manifest changed, stops it when the manifest is gone, and
// restarts it with backoff when it exits (as restartPolicy says).
type staticPods struct {
	manifests  manifestReader
	stateDir   string
	logsDir    string
	imagesFile string
	// hostNS is the mount namespace file the processes run in ("": the
	// simulator's own).
	hostNS string
	node   *node
	logger *log.Logger

	mu     sync.Mutex
	pods   map[string]*podRun // by key (NS_NAME)
	synced bool               // the directory has been read once
}

// podRun is a static pod and its containers' processes.
type podRun struct {
	namespace, name string
	hash            string
	manifest        string
	grace           time.Duration
	// pod is nil for a pod found in the state dir whose manifest has not
	// been matched yet.
	pod        *corev1.Pod
	containers []*containerRun
	stopping   bool
	stopped    chan struct{} // closed once every process of a stopping pod is gone
	dirty      bool          // the state file needs writing
}

type containerRun struct {
	name      string
	image     string
	proc      *proc // nil while not running
	argv      []string
	restarts  int
	backoff   time.Duration
	nextStart time.Time
	last      *termination
	finished  bool // exited and, by restartPolicy, not restarted
	// probes are the running container's; killing is set once a failed
	// startup or liveness probe has it stopped.
	probes  *probes
	killing bool
}

type termination struct {
	code                  int // -1 when unknown
	startedAt, finishedAt time.Time
}

func newStaticPods(manifestDir, stateDir, logsDir, imagesFile string, n *node, logger *log.Logger) *staticPods {
	m := &staticPods{
		manifests: manifestReader{dir: manifestDir, nodeName: n.name},
		stateDir:  stateDir, logsDir: logsDir, imagesFile: imagesFile, node: n, logger: logger,
		pods: map[string]*podRun{},
	}
	for _, s := range readStates(stateDir) {
		run := &podRun{namespace: s.Namespace, name: s.Name, hash: s.Hash, manifest: s.Manifest,
			grace: time.Duration(s.GraceSeconds) * time.Second}
		for _, cs := range s.Containers {
			run.containers = append(run.containers, &containerRun{name: cs.Name, argv: cs.Argv, restarts: cs.Restarts,
				proc: adopt(cs.PID, cs.StartTicks, cs.StartedAt)})
		}
		m.pods[podKey(s.Namespace, s.Name)] = run
	}
	return m
}

// run syncs the static pods until ctx ends. It leaves their processes
// running.
func (m *staticPods) run(ctx context.Context) {
	m.logger.Printf("static pods: watching %s (state in %s, logs in %s)", m.manifests.dir, m.stateDir, m.logsDir)
	t := time.NewTicker(rescanEvery)
	defer t.Stop()
	for {
		m.sync()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sync brings the processes in line with the manifests, one step: it
// starts, adopts and restarts what is due, and begins stopping what is
// removed or replaced (a replaced pod starts anew once its old processes
// are gone).
func (m *staticPods) sync() {
	desired, problems := m.manifests.read()
	for _, err := range problems {
		m.logger.Print(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, run := range m.pods {
		want := desired[key]
		if !run.stopping && want != nil && want.hash == run.hash {
			if run.pod == nil {
				m.adopt(run, want)
			}
			continue
		}
		if !run.stopping {
			why := "its manifest is gone"
			if want != nil {
				why = "its manifest changed"
			}
			m.beginStop(run, why)
		}
		select {
		case <-run.stopped:
		default:
			continue
		}
		m.logger.Printf("static pod %s/%s stopped", run.namespace, run.name)
		delete(m.pods, key)
		if want == nil {
			_ = os.Remove(statePath(m.stateDir, key))
		}
	}
	for key, want := range desired {
		if _, ok := m.pods[key]; ok {
			continue
		}
		run := newPodRun(want)
		m.pods[key] = run
		m.logger.Printf("static pod %s/%s from %s (hash %s)", run.namespace, run.name, run.manifest, run.hash)
		if len(want.pod.Spec.InitContainers) > 0 {
			m.logger.Printf("static pod %s/%s: init containers are not simulated; its containers start at once", run.namespace, run.name)
		}
	}
	for _, run := range m.pods {
		if run.stopping || run.pod == nil {
			continue
		}
		for _, c := range run.containers {
			m.syncContainer(run, c)
		}
		if run.dirty {
			if err := writeState(m.stateDir, run.state()); err != nil {
				m.logger.Printf("static pod %s/%s: record state: %v", run.namespace, run.name, err)
			} else {
				run.dirty = false
			}
		}
	}
	m.synced = true
}

func newPodRun(sp *staticPod) *podRun {
	run := &podRun{namespace: sp.pod.Namespace, name: sp.pod.Name, hash: sp.hash, manifest: sp.file, pod: sp.pod,
		grace: defaultGrace, dirty: true}
	if g := sp.pod.Spec.TerminationGracePeriodSeconds; g != nil && *g >= 0 {
		run.grace = time.Duration(*g) * time.Second
	}
	for _, c := range sp.pod.Spec.Containers {
		run.containers = append(run.containers, &containerRun{name: c.Name, image: c.Image})
	}
	return run
}

// adopt takes over a pod found in the state dir whose manifest is
// unchanged: its running processes are kept, the others started by the
// next steps.
func (m *staticPods) adopt(run *podRun, sp *staticPod) {
	fresh := newPodRun(sp)
	recorded := map[string]*containerRun{}
	for _, c := range run.containers {
		recorded[c.name] = c
	}
	for _, c := range fresh.containers {
		old := recorded[c.name]
		if old == nil {
			continue
		}
		c.restarts, c.argv, c.proc = old.restarts, old.argv, old.proc
		if c.proc != nil {
			m.logger.Printf("static pod %s/%s: adopted container %s (pid %d), its manifest is unchanged", run.namespace, run.name, c.name, c.proc.pid)
			c.probes = m.startProbes(fresh, c, c.proc.startedAt)
		}
		delete(recorded, c.name)
	}
	for _, old := range recorded { // cannot happen with an unchanged manifest, but stop strays
		if old.proc != nil {
			go old.proc.stop(fresh.grace)
		}
	}
	*run = *fresh
}

// beginStop stops a pod's processes in the background.
func (m *staticPods) beginStop(run *podRun, why string) {
	run.stopping = true
	run.stopped = make(chan struct{})
	grace := run.grace
	if grace == 0 && run.pod == nil {
		grace = defaultGrace
	}
	var procs []*proc
	for _, c := range run.containers {
		go c.probes.stop()
		c.probes = nil
		if c.proc != nil && c.proc.alive() {
			procs = append(procs, c.proc)
			m.logger.Printf("static pod %s/%s: stopping container %s (pid %d): %s", run.namespace, run.name, c.name, c.proc.pid, why)
		}
	}
	go func() {
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Add(1)
			go func() { defer wg.Done(); p.stop(grace) }()
		}
		wg.Wait()
		close(run.stopped)
	}()
}

// syncContainer notices an exit and schedules the restart, or starts the
// container when it is due.
func (m *staticPods) syncContainer(run *podRun, c *containerRun) {
	now := time.Now()
	if c.proc != nil {
		if c.proc.alive() {
			if c.backoff > 0 && now.Sub(c.proc.startedAt) > backoffReset {
				c.backoff = 0
			}
			if _, _, why := c.probes.state(); why != "" && !c.killing {
				c.killing = true
				m.logger.Printf("static pod %s/%s: container %s %s, will be restarted", run.namespace, run.name, c.name, why)
				go c.proc.stop(run.grace)
			}
			return
		}
		c.probes.stop()
		c.probes, c.killing = nil, false
		code := c.proc.exit()
		c.last = &termination{code: code, startedAt: c.proc.startedAt, finishedAt: now}
		c.proc = nil
		run.dirty = true
		policy := run.pod.Spec.RestartPolicy
		if policy == corev1.RestartPolicyNever || (policy == corev1.RestartPolicyOnFailure && code == 0) {
			c.finished = true
			m.logger.Printf("static pod %s/%s: container %s exited (%s); restartPolicy %s, not restarting", run.namespace, run.name, c.name, exitText(code), policy)
			return
		}
		c.backoff = min(max(2*c.backoff, time.Second), maxBackoff)
		c.nextStart = now.Add(c.backoff)
		c.restarts++
		m.logger.Printf("static pod %s/%s: container %s exited (%s); restarting in %s", run.namespace, run.name, c.name, exitText(code), c.backoff)
		return
	}
	if c.finished || now.Before(c.nextStart) {
		return
	}
	var spec corev1.Container
	for _, s := range run.pod.Spec.Containers {
		if s.Name == c.name {
			spec = s
		}
	}
	p := containerProcess(spec, run.pod, m.node, m.imagesFile)
	pr, err := startDetached(p, m.hostNS, logPath(m.logsDir, run.pod, c.name))
	if err != nil {
		c.backoff = min(max(2*c.backoff, time.Second), maxBackoff)
		c.nextStart = now.Add(c.backoff)
		m.logger.Printf("static pod %s/%s: start container %s: %v; retrying in %s", run.namespace, run.name, c.name, err, c.backoff)
		return
	}
	if !p.mapped {
		m.logger.Printf("static pod %s/%s: image %s is not in %s; container %s sleeps", run.namespace, run.name, spec.Image, m.imagesFile, c.name)
	}
	c.proc, c.argv = pr, p.argv
	c.probes = m.startProbes(run, c, pr.startedAt)
	run.dirty = true
	m.logger.Printf("static pod %s/%s: started container %s, pid %d: %s", run.namespace, run.name, c.name, pr.pid, strings.Join(p.argv, " "))
}

// startProbes starts the probes of a pod's container that runs since
// startedAt.
func (m *staticPods) startProbes(run *podRun, c *containerRun, startedAt time.Time) *probes {
	for _, spec := range run.pod.Spec.Containers {
		if spec.Name != c.name {
			continue
		}
		ip := podIP
		if run.pod.Spec.HostNetwork {
			ip = m.node.hostIP()
		}
		return startProbes(probeTarget{pod: run.namespace + "/" + run.name, container: spec, podIP: ip, startedAt: startedAt, logger: m.logger})
	}
	return nil
}

func exitText(code int) string {
	if code < 0 {
		return "exit code unknown"
	}
	return "exit code " + strconv.Itoa(code)
}

func (run *podRun) state() podState {
	s := podState{Namespace: run.namespace, Name: run.name, Hash: run.hash, Manifest: run.manifest,
		GraceSeconds: int64(run.grace / time.Second)}
	for _, c := range run.containers {
		cs := containerState{Name: c.name, Restarts: c.restarts, Argv: c.argv}
		if c.proc != nil {
			cs.PID, cs.StartTicks, cs.StartedAt = c.proc.pid, c.proc.startTicks, c.proc.startedAt
		}
		s.Containers = append(s.Containers, cs)
	}
	return s
}
