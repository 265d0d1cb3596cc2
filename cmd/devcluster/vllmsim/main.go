// Command vllm-sim is the local cluster's simulated vLLM engine. It watches
// the cluster's pods and, for every running pod of the built-in chart (a
// container port named http, or 8000), serves vLLM's OpenAI API and
// /metrics on its own loopback port with the behaviour the pod's image
// chooses (serve-slow, serve-errors, serve-wrongmodel, serve-hang,
// serve-preempt; healthy otherwise), and keeps a kwok PortForward object
// for the pod sending its port there, so the API server's pod port-forward
// (kubectl port-forward pod/NAME 8000) reaches it as it would a real pod.
//
// Usage: vllm-sim --kubeconfig FILE [--health-address ADDR] [--address-file FILE]
//
// It answers GET /healthz ("ok" once its pod cache has synced) on
// --health-address (default 127.0.0.1:0, a free port) and writes that
// address to --address-file, for hack/cluster-up.sh's component check.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	healthAddr := flag.String("health-address", "127.0.0.1:0", "address of the /healthz endpoint")
	addrFile := flag.String("address-file", "", "file to write the /healthz endpoint's address to")
	flag.Parse()
	log.SetPrefix("vllm-sim: ")
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "vllm-sim: --kubeconfig is required")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "vllm-sim"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c := NewController(kube, dyn)

	ln, err := net.Listen("tcp", *healthAddr)
	if err != nil {
		log.Fatalf("health address: %v", err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !c.Healthy() {
			http.Error(w, "pod cache not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	})
	go func() { _ = http.Serve(ln, mux) }()
	log.Printf("vLLM %s simulator; health on http://%s/healthz", VLLMVersion, ln.Addr())
	if err := c.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
