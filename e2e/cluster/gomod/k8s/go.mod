// Wrapper module for building kube-apiserver, kube-controller-manager and
// kube-scheduler from the published k8s.io/kubernetes module.
// scripts/install-k8s-tools copies this into the cache, adds
//   require k8s.io/kubernetes v$K8S_VERSION
// and a replace k8s.io/<m> => k8s.io/<m> v0.<minor>.<patch> for every module that
// k8s.io/kubernetes' own go.mod requires at v0.0.0 (derived from that go.mod).
module lockstep.local/k8sbin

go 1.24.0
