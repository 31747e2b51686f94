// Package images makes container images for the test world without a
// registry: each is one layer of files from this machine (a binary and the
// libraries it links), written as a docker-archive tarball (the layer, a
// config naming its diff_id, a manifest.json naming the image) and
// imported into a containerd with `ctr images import`.
//
// The images are the ones Kedge's runbooks name: the pause image
// (registry.k8s.io/pause:3.10, a static Go program from ./pause), the
// control-plane components (from the binaries scripts/kube-tools.sh
// builds) and Typhoon's kubelet image quay.io/poseidon/kubelet in two
// versions, KubeVersion and SwapVersion, the second the same kubelet
// re-linked to report another version, so that an image swap shows in the
// node's kubeletVersion.
//
// Archives and binaries are cached ($KEDGE_IMAGES_CACHE, else
// kedge/images under the user's cache directory), keyed by a hash of what
// they are made of, and built under a file lock into a temporary name that
// is renamed when whole, so concurrent test processes share them safely.
// Archives of older binaries are not removed (about 0.8 GB for one set);
// the directory can be deleted whenever no test is running.
//
// It is test infrastructure: the images hold only what the test world
// runs, and must never be pushed anywhere or used for a real cluster.
package images
