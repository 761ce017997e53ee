// Wrapper module for building the JobSet controller (sigs.k8s.io/jobset, its root
// package is the manager's main) and the Kubeflow Trainer v2 controller manager
// (github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager) in one module graph.
// scripts/install-kubeflow-tools copies this into the cache and adds
//   require github.com/kubeflow/trainer/v2 v$TRAINER_VERSION
//   require sigs.k8s.io/jobset v$JOBSET_VERSION
// Trainer's own go.mod pins the JobSet release it is built and tested against, so
// versions.env keeps JOBSET_VERSION equal to it (the script checks), and the one graph
// compiles the shared Kubernetes libraries once instead of twice.
module lockstep.local/kubeflowbin

go 1.26.0
