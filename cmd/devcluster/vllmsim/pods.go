package main

import (
	"context"
	"log"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// portForwardGVR is kwok's PortForward (per pod: namespace/name are the
// pod's), enabled by cluster/kwokctl.yaml's enableCRDs.
var portForwardGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "portforwards"}

// managedBy labels the PortForward objects this simulator owns.
const managedByLabel, managedBy = "app.kubernetes.io/managed-by", "vllm-sim"

// faultImage matches the fault classes of cluster/stages.yaml: such pods
// never serve.
var faultImage = regexp.MustCompile(`crash|oom|pullerr|fault-`)

// Target is what a pod serves: the container and port that serve the
// OpenAI API and the engine's configuration.
type Target struct {
	Container string
	Port      int32
	Config    Config
}

// TargetOf returns what pod serves, or false when it serves nothing: a pod
// serves when one of its containers has a port named http or container port
// 8000 (the built-in chart's server), that container's image has no fault
// class and the container runs.
func TargetOf(pod *corev1.Pod) (Target, bool) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return Target{}, false
	}
	for _, c := range pod.Spec.Containers {
		var port int32
		for _, p := range c.Ports {
			if p.Name == "http" || p.ContainerPort == 8000 {
				port = p.ContainerPort
				break
			}
		}
		if port == 0 {
			continue
		}
		if faultImage.MatchString(c.Image) {
			return Target{}, false
		}
		running := false
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == c.Name && s.State.Running != nil {
				running = true
			}
		}
		if !running {
			return Target{}, false
		}
		cfg := ConfigOf(c)
		return Target{Container: c.Name, Port: port, Config: cfg}, true
	}
	return Target{}, false
}

// ConfigOf reads the served model from a container as `vllm serve` does:
// --model (or the positional model after serve), --served-model-name (one
// or more names), --max-model-len; failing those the environment variables
// MODEL_NAME or MODEL. The behaviour comes from the image.
func ConfigOf(c corev1.Container) Config {
	cfg := Config{Behaviour: BehaviourOf(c.Image)}
	args := append(append([]string(nil), c.Command...), c.Args...)
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		next := func() (string, bool) {
			if hasVal {
				return val, true
			}
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				return args[i], true
			}
			return "", false
		}
		switch name {
		case "--model":
			if v, ok := next(); ok {
				cfg.Model = v
			}
		case "--served-model-name":
			if hasVal {
				cfg.ServedNames = append(cfg.ServedNames, val)
				continue
			}
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				cfg.ServedNames = append(cfg.ServedNames, args[i])
			}
		case "--max-model-len":
			if v, ok := next(); ok {
				cfg.MaxModelLen, _ = strconv.Atoi(v)
			}
		case "serve":
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				cfg.Model = args[i]
			}
		}
	}
	if cfg.Model == "" {
		for _, e := range c.Env {
			if (e.Name == "MODEL_NAME" || e.Name == "MODEL") && e.Value != "" {
				cfg.Model = e.Value
				break
			}
		}
	}
	return cfg
}

// server is one pod's simulated engine on its own loopback port.
type server struct {
	uid    types.UID
	target Target
	engine *Engine
	srv    *http.Server
	port   int
	pfDone bool // its PortForward is in place
}

// Controller watches the cluster's pods and runs an engine for each pod
// that serves, with a PortForward sending the pod's port to it.
type Controller struct {
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	host    string // loopback address the engines listen on
	mu      sync.Mutex
	servers map[string]*server // namespace/name
	synced  bool
}

// NewController returns a controller using the given clients.
func NewController(kube kubernetes.Interface, dyn dynamic.Interface) *Controller {
	return &Controller{kube: kube, dyn: dyn, host: "127.0.0.1", servers: map[string]*server{}}
}

// Run watches pods until ctx ends, then stops every engine.
func (c *Controller) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(c.kube, 10*time.Minute)
	podInformer := factory.Core().V1().Pods()
	queue := make(chan string, 4096)
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			select {
			case queue <- key:
			default: // the periodic resync catches up
			}
		}
	}
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced) {
		return ctx.Err()
	}
	lister := podInformer.Lister()
	c.mu.Lock()
	c.synced = true
	c.mu.Unlock()
	resync := func() {
		pods, _ := lister.List(labels.Everything())
		for _, p := range pods {
			c.sync(ctx, p.Namespace+"/"+p.Name, p)
		}
		c.mu.Lock()
		keys := make([]string, 0, len(c.servers))
		for k := range c.servers {
			keys = append(keys, k)
		}
		c.mu.Unlock()
		for _, k := range keys {
			ns, name, _ := strings.Cut(k, "/")
			if p, err := lister.Pods(ns).Get(name); err != nil || p == nil {
				c.sync(ctx, k, nil)
			}
		}
		c.sweep(ctx)
	}
	resync()
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	defer c.stopAll()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			resync()
		case key := <-queue:
			ns, name, _ := strings.Cut(key, "/")
			p, err := lister.Pods(ns).Get(name)
			if err != nil {
				p = nil
			}
			c.sync(ctx, key, p)
		}
	}
}

// Healthy reports whether the controller has synced its pod cache.
func (c *Controller) Healthy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

// sync brings the engine of pod key (nil: gone) in line with the pod.
func (c *Controller) sync(ctx context.Context, key string, pod *corev1.Pod) {
	var target Target
	ok := false
	if pod != nil {
		target, ok = TargetOf(pod)
	}
	c.mu.Lock()
	s := c.servers[key]
	c.mu.Unlock()
	if s != nil && (!ok || s.uid != pod.UID || s.target.Port != target.Port || s.target.Container != target.Container) {
		c.stop(ctx, key, s)
		s = nil
	}
	if !ok {
		return
	}
	if s == nil {
		var err error
		if s, err = c.start(pod, target); err != nil {
			log.Printf("pod %s: cannot start its engine: %v", key, err)
			return
		}
		c.mu.Lock()
		c.servers[key] = s
		c.mu.Unlock()
		log.Printf("pod %s: serving %s (%s) on %s:%d for its port %d", key, strings.Join(s.engine.Served(), ","), target.Config.Behaviour, c.host, s.port, target.Port)
	}
	if !s.pfDone {
		if err := c.applyPortForward(ctx, pod, s); err != nil {
			log.Printf("pod %s: PortForward: %v (retried)", key, err)
			return
		}
		s.pfDone = true
	}
}

func (c *Controller) start(pod *corev1.Pod, target Target) (*server, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(c.host, "0"))
	if err != nil {
		return nil, err
	}
	e := NewEngine(target.Config)
	s := &server{uid: pod.UID, target: target, engine: e, port: ln.Addr().(*net.TCPAddr).Port,
		srv: &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// stop closes an engine and deletes its PortForward, whether or not its
// pod is gone (the garbage collector may have deleted it already: not
// found is fine).
func (c *Controller) stop(ctx context.Context, key string, s *server) {
	_ = s.srv.Close()
	c.mu.Lock()
	delete(c.servers, key)
	c.mu.Unlock()
	ns, name, _ := strings.Cut(key, "/")
	err := c.dyn.Resource(portForwardGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		log.Printf("pod %s: deleting its PortForward: %v", key, err)
	}
	log.Printf("pod %s: engine stopped", key)
}

func (c *Controller) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.servers {
		_ = s.srv.Close()
		delete(c.servers, k)
	}
}

// applyPortForward creates or updates the pod's PortForward: its port to
// the engine's, owned by the pod.
func (c *Controller) applyPortForward(ctx context.Context, pod *corev1.Pod, s *server) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "PortForward",
		"metadata": map[string]any{
			"name":      pod.Name,
			"namespace": pod.Namespace,
			"labels":    map[string]any{managedByLabel: managedBy},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID),
			}},
		},
		"spec": map[string]any{
			"forwards": []any{map[string]any{
				"ports":  []any{int64(s.target.Port)},
				"target": map[string]any{"address": c.host, "port": int64(s.port)},
			}},
		},
	}}
	_, err := c.dyn.Resource(portForwardGVR).Namespace(pod.Namespace).Apply(ctx, pod.Name, obj,
		metav1.ApplyOptions{FieldManager: managedBy, Force: true})
	return err
}

// sweep deletes the PortForward objects of this simulator whose pod has no
// engine (left by an earlier run).
func (c *Controller) sweep(ctx context.Context) {
	list, err := c.dyn.Resource(portForwardGVR).Namespace("").List(ctx, metav1.ListOptions{LabelSelector: managedByLabel + "=" + managedBy})
	if err != nil {
		return
	}
	for _, pf := range list.Items {
		key := pf.GetNamespace() + "/" + pf.GetName()
		c.mu.Lock()
		_, live := c.servers[key]
		c.mu.Unlock()
		if !live {
			err := c.dyn.Resource(portForwardGVR).Namespace(pf.GetNamespace()).Delete(ctx, pf.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				log.Printf("deleting stale PortForward %s: %v", key, err)
			}
		}
	}
}
