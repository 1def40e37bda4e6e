// Command etcd is the upstream etcd server (go.etcd.io/etcd/server/v3/etcdmain), unmodified;
// this module exists only so the project can build it from the Go module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
