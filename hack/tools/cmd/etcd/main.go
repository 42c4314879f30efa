// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at the
// version this tools module pins, so that the harness does not depend on a
// downloaded release binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
