// Command etcd is etcd's own server entry point, built from the published
// go.etcd.io/etcd/server/v3 module (etcd's go.mods carry replace directives,
// so `go install go.etcd.io/etcd/server/v3@vX` does not work directly).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
