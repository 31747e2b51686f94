package main

import (
	"context"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// staticPodStateDir is where, under --root-dir, static pods are recorded.
const staticPodStateDir = "static-pods"

// run is the kubelet: static pods first (they may be the very API server
// it is to join), its endpoints, then, as soon as the API server answers,
// credentials (TLS bootstrap), registration and the heartbeat loop. It
// returns when ctx ends, leaving the static pods running.
func run(ctx context.Context, o options, logger *log.Logger) error {
	cfg, err := loadConfig(o.configFile, o.configDir)
	if err != nil {
		return err
	}
	cfg = withFlags(cfg, o)
	o.taints = cfg.RegisterWithTaints
	if o.nodeName == "" {
		h, _ := os.Hostname()
		o.nodeName = strings.ToLower(h)
	}
	logger.Printf("kubelet simulator %s starting as node %s", o.version, o.nodeName)
	if names := flagNames(o.ignored); len(names) > 0 {
		logger.Printf("flags of the real kubelet not simulated, ignored: %s", strings.Join(names, " "))
	}
	if len(o.nodeIPs) == 0 {
		if o.nodeIPs, err = detectNodeIPs(o.nodeIPFile); err != nil {
			return err
		}
		if len(o.nodeIPs) > 0 {
			logger.Printf("node IP %s (from %s; no --node-ip)", o.nodeIPs[0], o.nodeIPFile)
		}
	}
	n := &node{name: o.nodeName, port: cfg.Port, version: o.version, cniDir: o.cniConfDir}
	bootID, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	n.bootID, n.kernel = strings.TrimSpace(string(bootID)), strings.TrimSpace(string(kernel))
	n.checkNetwork(logger)
	for _, ip := range o.nodeIPs {
		n.ips = append(n.ips, ip.String())
	}
	ep, err := newEndpoints(cfg, o, logger)
	if err != nil {
		return err
	}
	var static *staticPods
	if cfg.StaticPodPath != "" {
		hostNS, why, err := hostMountNS(o.hostMountNS)
		if err != nil {
			return err
		}
		if hostNS != "" {
			logger.Printf("static pods run in the host's mount namespace %s", hostNS)
		} else {
			logger.Printf("static pods run in the simulator's own mount namespace: %s", why)
		}
		static = newStaticPods(cfg.StaticPodPath, filepath.Join(o.rootDir, staticPodStateDir), cfg.PodLogsDir, o.imagesFile, n, logger)
		static.hostNS = hostNS
		go static.run(ctx)
	}
	ep.start(ctx, static)

	cs := connect(ctx, o, logger)
	if cs == nil || !register(ctx, cs, o, n, logger) {
		return nil
	}
	mirrors := &mirrors{cs: cs, node: n, static: static, logger: logger}
	t := time.NewTicker(o.heartbeat)
	defer t.Stop()
	for {
		n.checkNetwork(logger)
		if err := n.heartbeat(ctx, cs, time.Now()); err != nil && ctx.Err() == nil {
			logger.Printf("node status: %v", err)
		}
		if pods, err := nodePods(ctx, cs, n); err != nil {
			if ctx.Err() == nil {
				logger.Printf("pods: %v", err)
			}
		} else {
			runScheduled(ctx, cs, n, pods, logger)
			mirrors.sync(ctx, pods)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// flagNames are the flags among args, without their values.
func flagNames(args []string) []string {
	var names []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			name, _, _ := strings.Cut(a, "=")
			names = append(names, name)
		}
	}
	return names
}

// checkNetwork looks for the runtime's network config, logging when it
// appears or goes as the real kubelet logs a runtime network change.
func (n *node) checkNetwork(logger *log.Logger) {
	file, why := networkConfig(n.cniDir)
	switch {
	case file != "" && file != n.network:
		logger.Printf("container runtime network ready: network config %s", file)
	case file == "" && (n.network != "" || !n.networkChecked):
		logger.Printf("%s (%s)", notReadyMessage, why)
	}
	n.network, n.networkChecked = file, true
}
