// Command etcd is the upstream etcd server entry point (go.etcd.io/etcd/server/v3/etcdmain),
// built from the Go module registry for makeroom's end-to-end tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
