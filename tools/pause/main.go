// Command pause holds a pod's namespaces open: it sleeps until SIGINT or SIGTERM and, as PID 1 of the
// sandbox, reaps every child that exits. With -v it prints what it is and exits 0, as upstream's pause does:
// kubeadm's upgrade health check runs it so, as a Job that must complete.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (railforge test bed)")
		return
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
