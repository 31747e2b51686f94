package kubeapi

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/coredns/corefile-migration/migration"
	"github.com/coredns/corefile-migration/migration/corefile"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/activities/nodefiles"
)

// CoreDNS's objects, as kubeadm and Typhoon name them.
const (
	coreDNSName      = "coredns"
	coreDNSContainer = "coredns"
	corefileKey      = "Corefile"
)

// planCoreDNS is what an upgrade to target does to CoreDNS: its image
// retagged the release kubeadm installs with target's minor, its
// Corefile migrated there (CoreDNS's own migration rules, as kubeadm
// applies them). nil when the cluster runs no CoreDNS. CoreDNS is kept,
// with the reason, when the table has no release for target, when it
// already runs that release or a newer one, or when its Corefile holds
// what the migration cannot carry over.
func planCoreDNS(ctx context.Context, cs kubernetes.Interface, target kube.Version) (ch *kube.CoreDNSChange, current string, err error) {
	d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, coreDNSName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	var image string
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == coreDNSContainer {
			image = c.Image
		}
	}
	if image == "" {
		return nil, "", nil
	}
	ch = &kube.CoreDNSChange{From: image, To: image}
	want, ok := kube.CoreDNSFor(target)
	if !ok {
		ch.Kept = fmt.Sprintf("Kedge knows no CoreDNS release for %s", target.MinorString())
		return ch, current, nil
	}
	from, ok := coreDNSVersion(image)
	if !ok {
		ch.Kept = fmt.Sprintf("its image's tag is no CoreDNS release (want %s)", want)
		return ch, current, nil
	}
	to := strings.TrimPrefix(want, "v")
	if !slices.Contains(migration.ValidVersions(), from) {
		ch.Kept = fmt.Sprintf("CoreDNS %s is not a release its Corefile can be migrated from (want %s)", from, want)
		return ch, current, nil
	}
	if from == to {
		ch.Kept = fmt.Sprintf("it runs %s, the release %s ships", from, target.MinorString())
		return ch, current, nil
	}
	if err := migration.ValidUpMigration(from, to); err != nil {
		// The same release, or a newer one.
		ch.Kept = fmt.Sprintf("it runs %s; %s ships %s", from, target.MinorString(), want)
		return ch, current, nil
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, coreDNSName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, "", err
	}
	if err == nil && cm.Data[corefileKey] != "" {
		current = cm.Data[corefileKey]
		notices, err := migration.Unsupported(from, to, current)
		if err != nil {
			ch.Kept = fmt.Sprintf("its Corefile could not be read for the migration to %s: %v", want, err)
			return ch, current, nil
		}
		if len(notices) > 0 {
			// One notice per release on the way: the first says what.
			ch.Kept = fmt.Sprintf("its Corefile holds what the migration to CoreDNS %s cannot carry over: %s", want, strings.TrimSpace(notices[0].ToString()))
			return ch, current, nil
		}
		migrated, err := migration.Migrate(from, to, current, false)
		if err != nil {
			ch.Kept = fmt.Sprintf("its Corefile could not be migrated to %s: %v", want, err)
			return ch, current, nil
		}
		// The migration writes the Corefile in its own layout: only a
		// change of content is one, written before the new image rolls
		// out (as kubeadm does).
		if same, err := sameCorefile(current, migrated); err != nil || !same {
			ch.Corefile = migrated
		}
	}
	// The tag written as the image's was: registry.k8s.io's have a v,
	// Docker Hub's coredns/coredns none.
	ch.Tag = want
	if !strings.Contains(image, ":v"+from) {
		ch.Tag = to
	}
	ch.To = nodefiles.Retag(image, ch.Tag)
	return ch, current, nil
}

// coreDNSVersion is the release an image's tag names ("v1.13.1",
// "1.13.1"), without the v.
func coreDNSVersion(image string) (string, bool) {
	image, _, _ = strings.Cut(image, "@")
	i := strings.LastIndexByte(image, ':')
	if i < 0 || strings.Contains(image[i:], "/") {
		return "", false
	}
	v := strings.TrimPrefix(image[i+1:], "v")
	if strings.Count(v, ".") != 2 {
		return "", false
	}
	return v, true
}

// sameCorefile says whether two Corefiles hold the same servers and
// plugins, whatever their layout.
func sameCorefile(a, b string) (bool, error) {
	ca, err := corefile.New(a)
	if err != nil {
		return false, err
	}
	cb, err := corefile.New(b)
	if err != nil {
		return false, err
	}
	return ca.ToString() == cb.ToString(), nil
}
