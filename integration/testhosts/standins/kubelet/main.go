// Command kubelet is the test world's kubelet simulator, the one simulated
// part of Kedge's test world (a real kubelet cannot run on the test
// machine). Started by a test host's kubelet unit through the container
// stand-in, it registers its Node with the real API server, reports the
// version of the image it was started with (so an image swap shows), keeps
// the Node Ready with heartbeats, runs the pods scheduled to it (marks them
// Running and Ready) and completes the deletion of pods evicted from it. It
// is test infrastructure only.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "kubelet" { // `docker run IMAGE kubelet ...`
		args = args[1:]
	}
	fs := flag.NewFlagSet("kubelet", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "/etc/kubernetes/kubelet.conf", "kubeconfig")
	name := fs.String("hostname-override", "", "node name")
	labels := fs.String("node-labels", "", "k=v,... labels to register with")
	heartbeat := fs.Duration("heartbeat", 2*time.Second, "status heartbeat")
	// Flags of the real kubelet this simulator accepts and ignores.
	for _, f := range []string{"config", "bootstrap-kubeconfig", "container-runtime-endpoint", "node-ip", "register-with-taints", "cert-dir", "v"} {
		fs.String(f, "", "ignored")
	}
	_ = fs.Parse(args)
	if *name == "" {
		h, _ := os.Hostname()
		*name = h
	}
	version := "v0.0.0"
	if img := os.Getenv("KEDGE_LAB_IMAGE"); img != "" && !strings.Contains(img, "@") {
		if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
			version = img[i+1:]
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, *kubeconfig, *name, version, *labels, *heartbeat); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "kubelet simulator:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, name, version, labels string, every time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	fmt.Printf("kubelet simulator %s starting as node %s\n", version, name)
	if err := register(ctx, cs, name, labels); err != nil {
		return err
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := status(ctx, cs, name, version); err != nil {
			fmt.Fprintln(os.Stderr, "status:", err)
		}
		if err := pods(ctx, cs, name); err != nil {
			fmt.Fprintln(os.Stderr, "pods:", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func register(ctx context.Context, cs kubernetes.Interface, name, labels string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	for _, kv := range strings.Split(labels, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			node.Labels[k] = v
		}
	}
	_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func status(ctx context.Context, cs kubernetes.Interface, name, version string) error {
	now := metav1.Now()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet simulator is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}
		kept := []corev1.NodeCondition{ready}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					kept[0].LastTransitionTime = c.LastTransitionTime
				}
				continue
			}
			kept = append(kept, c)
		}
		n.Status.Conditions = kept
		n.Status.NodeInfo.KubeletVersion = version
		n.Status.Capacity = corev1.ResourceList{"cpu": mustQ("8"), "memory": mustQ("16Gi"), "pods": mustQ("110")}
		n.Status.Allocatable = n.Status.Capacity
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	leases := cs.CoordinationV1().Leases("kube-node-lease")
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &metav1.MicroTime{Time: now.Time}}}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now.Time}
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// pods runs what is scheduled here and finishes deletions.
func pods(ctx context.Context, cs kubernetes.Interface, name string) error {
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		return err
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
			if err != nil && !apierrors.IsNotFound(err) {
				fmt.Fprintln(os.Stderr, "delete", p.Namespace+"/"+p.Name+":", err)
			}
			continue
		}
		if p.Status.Phase == corev1.PodRunning {
			continue
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP, p.Status.HostIP = "10.244.0.10", "127.0.0.1"
		p.Status.StartTime = &now
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		var cst []corev1.ContainerStatus
		for _, c := range p.Spec.Containers {
			cst = append(cst, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
		p.Status.ContainerStatuses = cst
		if _, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			fmt.Fprintln(os.Stderr, "run", p.Namespace+"/"+p.Name+":", err)
		}
	}
	return nil
}
