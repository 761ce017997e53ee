// Wrapper module for etcd; scripts/install-k8s-tools copies it into the cache
// and adds require go.etcd.io/etcd/server/v3 v$ETCD_VERSION.
module lockstep.local/etcdbin

go 1.24.0
