//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/release/storage"
)

// The bad-input corpus lives in testdata/bad (cases.yaml describes its
// format). Paths in it are relative to the repository root, where the
// binary runs.
const (
	badDir   = "testdata/bad"
	badCases = badDir + "/cases.yaml"
	// badMinCases is the least the corpus must hold.
	badMinCases = 80
	// setupNone marks a case that needs no cluster.
	setupNone = "none"
)

// badGroups are the groups the corpus must cover.
var badGroups = []string{"values", "set", "charts", "names", "flags", "kubeconfig", "revisions", "numbers", "ownership", "corrupt"}

type badCorpus struct {
	Setups map[string]badSetup `json:"setups"`
	Cases  []badCase           `json:"cases"`
}

type badSetup struct {
	Doc   string    `json:"doc"`
	Steps []badStep `json:"steps"`
}

// badStep is one step of a setup: exactly one field is set.
type badStep struct {
	// Vllmctl runs the binary (connection flags inserted), which must
	// exit 0.
	Vllmctl []string `json:"vllmctl,omitempty"`
	// Create makes an object by hand (field manager kubectl-create).
	Create *struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"create,omitempty"`
	// Corrupt replaces the data of a release record with garbage, or
	// with a gzip bomb: a small record that decompresses to 256 MiB.
	Corrupt *struct {
		Release  string `json:"release"`
		Revision int    `json:"revision"`
		Bomb     bool   `json:"bomb,omitempty"`
	} `json:"corrupt,omitempty"`
}

type badCase struct {
	Name        string            `json:"name"`
	Group       string            `json:"group"`
	Setup       string            `json:"setup,omitempty"`
	Args        []string          `json:"args"`
	Files       map[string]string `json:"files,omitempty"`
	Links       map[string]string `json:"links,omitempty"`
	Absent      []string          `json:"absent,omitempty"`
	NoNamespace string            `json:"noNamespace,omitempty"`
	Exit        int               `json:"exit"`
	Stderr      string            `json:"stderr"`
	Stdout      string            `json:"stdout,omitempty"`
	StdoutNot   string            `json:"stdoutNot,omitempty"`
	Secrets     []string          `json:"secrets,omitempty"`
	Why         string            `json:"why,omitempty"`
}

func (c badCase) setup() string {
	if c.Setup == "" {
		return "base"
	}
	return c.Setup
}

func loadBadCorpus(t *testing.T) *badCorpus {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", badCases))
	require.NoError(t, err)
	corpus := &badCorpus{}
	require.NoError(t, yaml.UnmarshalStrict(data, corpus), "%s", badCases)
	return corpus
}

// badPlaceholders are the only ${...} the corpus may use.
var badPlaceholder = regexp.MustCompile(`\$\{[^}]*\}`)

func expand(s string, vars map[string]string) string {
	return badPlaceholder.ReplaceAllStringFunc(s, func(p string) string {
		if v, ok := vars[p[2:len(p)-1]]; ok {
			return v
		}
		return p
	})
}

// referencedPaths returns the corpus files a case names: its arguments
// under testdata/bad and the sources of its files.
func (c badCase) referencedPaths() []string {
	var paths []string
	for _, a := range c.Args {
		// A flag's KEY=PATH argument (--set-file) names a fixture too.
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(v, badDir+"/") {
			a = v
		}
		if strings.HasPrefix(a, badDir+"/") {
			paths = append(paths, a)
		}
	}
	for _, src := range c.Files {
		paths = append(paths, src)
	}
	return paths
}

// TestBadInputCorpusIsSound checks the corpus itself (no cluster, no
// binary): enough cases, every group, unique names, known setups, every
// fixture used and every named fixture present, every secret present in
// its case's input (else the no-echo check proves nothing).
func TestBadInputCorpusIsSound(t *testing.T) {
	corpus := loadBadCorpus(t)
	assert.GreaterOrEqual(t, len(corpus.Cases), badMinCases, "cases in %s", badCases)

	groups := map[string]int{}
	names := map[string]bool{}
	used := map[string]bool{}
	for _, c := range corpus.Cases {
		id := c.Group + "/" + c.Name
		assert.False(t, names[id], "case %s is defined twice", id)
		names[id] = true
		groups[c.Group]++
		assert.Contains(t, badGroups, c.Group, "case %s: unknown group", id)
		if s := c.setup(); s != setupNone {
			assert.Contains(t, corpus.Setups, s, "case %s: unknown setup", id)
		}
		assert.NotEmpty(t, c.Args, "case %s: no args", id)
		assert.NotEmpty(t, c.Stderr, "case %s: every case names its culprit on stderr", id)
		for _, re := range []string{c.Stderr, c.Stdout, c.StdoutNot} {
			_, err := regexp.Compile(expand(re, map[string]string{"NS": "ns", "TMP": "/tmp", "KUBECONFIG": "k"}))
			assert.NoError(t, err, "case %s", id)
		}
		for _, a := range c.Args {
			for _, p := range badPlaceholder.FindAllString(a, -1) {
				assert.Contains(t, []string{"${NS}", "${TMP}", "${KUBECONFIG}"}, p, "case %s: unknown placeholder", id)
			}
		}

		var input strings.Builder
		input.WriteString(strings.Join(c.Args, " "))
		for _, p := range c.referencedPaths() {
			full := filepath.Join("..", p)
			info, err := os.Stat(full)
			if slicesContains(c.Absent, p) {
				assert.True(t, os.IsNotExist(err), "case %s: %s should be absent: %v", id, p, err)
				continue
			}
			if !assert.NoError(t, err, "case %s names %s", id, p) {
				continue
			}
			used[p] = true
			if info.IsDir() {
				require.NoError(t, filepath.WalkDir(full, func(path string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						b, rerr := os.ReadFile(path)
						input.Write(b)
						return rerr
					}
					return err
				}))
			} else {
				b, err := os.ReadFile(full)
				require.NoError(t, err)
				input.Write(b)
			}
		}
		for _, s := range c.Secrets {
			assert.Contains(t, input.String(), s, "case %s: the secret must be in the case's input", id)
		}
	}
	for _, g := range badGroups {
		assert.NotZero(t, groups[g], "no case of group %s", g)
	}
	for _, s := range corpus.Setups {
		for _, step := range s.Steps {
			for _, a := range step.Vllmctl {
				if strings.HasPrefix(a, badDir+"/") {
					used[a] = true
				}
			}
		}
	}

	// Every fixture is used by a case (or a setup).
	require.NoError(t, filepath.WalkDir(filepath.Join("..", badDir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel("..", path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == badCases {
			return nil
		}
		for u := range used {
			if rel == u || strings.HasPrefix(rel, u+"/") {
				return nil
			}
		}
		assert.Failf(t, "unused fixture", "%s is named by no case", rel)
		return nil
	}))
	t.Logf("%d cases: %v", len(corpus.Cases), groups)
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// badRunner runs the vllmctl binary from the repository root.
type badRunner struct {
	bin, kubeconfig, home string
}

// run runs args (connection flags inserted after the command name when
// ns is not "") and returns what it printed and its exit code.
func (r *badRunner) run(t *testing.T, ns string, args []string) relRun {
	t.Helper()
	if ns != "" && len(args) > 0 {
		args = append([]string{args[0], "--kubeconfig", r.kubeconfig, "-n", ns}, args[1:]...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Dir = ".."
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VLLMCTL_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "HOME="+r.home, "XDG_CONFIG_HOME="+r.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := exitCodeOf(t, cmd.Run())
	return relRun{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// badNamespace is the namespace of one setup.
type badNamespace struct {
	*env
	name string
}

// newBadEnv is newEnv with the namespace's deletion registered on
// parent: the namespace of a setup outlives the case that prepared it.
func newBadEnv(t *testing.T, parent *testing.T, setup string) *env {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("VLLMCTL_E2E_KUBECONFIG"))
	require.NoError(t, err)
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns := fmt.Sprintf("e2e-%s-%s-%s", sanitize(parent.Name()), setup, rand.String(5))
	ctx := context.Background()
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err, "create namespace %s", ns)
	parent.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	eventually(t, 30*time.Second, "default service account in "+ns, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	return &env{cfg: cfg, client: client, namespace: ns}
}

// prepareBadSetup creates the namespace of setup name (deleted when parent
// ends) and runs its steps.
func prepareBadSetup(t, parent *testing.T, r *badRunner, name string, s badSetup) *badNamespace {
	t.Helper()
	e := newBadEnv(t, parent, name)
	ctx := context.Background()
	start := time.Now()
	for i, step := range s.Steps {
		switch {
		case step.Vllmctl != nil:
			res := r.run(t, e.namespace, step.Vllmctl)
			require.Equal(t, 0, res.code, "setup %s step %d: vllmctl %s\n%s", name, i+1, strings.Join(step.Vllmctl, " "), res)
		case step.Create != nil:
			createByHand(t, e.client, e.namespace, step.Create.Kind, step.Create.Name)
		case step.Corrupt != nil:
			secrets := e.client.CoreV1().Secrets(e.namespace)
			s, err := secrets.Get(ctx, storage.SecretName(step.Corrupt.Release, step.Corrupt.Revision), metav1.GetOptions{})
			require.NoError(t, err, "setup %s step %d", name, i+1)
			data := []byte("garbage, not gzip")
			if step.Corrupt.Bomb {
				data = gzipBomb(t, 256<<20)
			}
			s.Data["release"] = data
			_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
			require.NoError(t, err, "setup %s step %d", name, i+1)
		default:
			require.Failf(t, "empty step", "setup %s step %d", name, i+1)
		}
	}
	// The namespace settles (the root CA ConfigMap appears, rollouts
	// finish updating their status) before the cases compare snapshots.
	var last badSnapshot
	eventually(t, time.Minute, "namespace "+e.namespace+" settles", func(ctx context.Context) (bool, error) {
		snap, err := snapshotNamespace(ctx, e.client, e.namespace)
		if err != nil {
			return false, err
		}
		_, hasCA := snap["ConfigMap/kube-root-ca.crt"]
		settled := hasCA && last != nil && fmt.Sprint(snap) == fmt.Sprint(last)
		last = snap
		if !settled {
			time.Sleep(500 * time.Millisecond)
		}
		return settled, nil
	})
	t.Logf("setup %s in namespace %s (%s): %d objects", name, e.namespace, time.Since(start).Round(100*time.Millisecond), len(last))
	return &badNamespace{env: e, name: e.namespace}
}

// gzipBomb returns gzip data that decompresses to n zero bytes (n a
// multiple of 1 MiB): one member of 1 MiB of zeros, repeated (a gzip stream
// may hold several members, which a reader reads as one).
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var member bytes.Buffer
	zw, err := gzip.NewWriterLevel(&member, gzip.BestCompression)
	require.NoError(t, err)
	_, err = zw.Write(make([]byte, 1<<20))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return bytes.Repeat(member.Bytes(), n>>20)
}

func createByHand(t *testing.T, client kubernetes.Interface, ns, kind, name string) {
	t.Helper()
	ctx := context.Background()
	opts := metav1.CreateOptions{FieldManager: "kubectl-create"}
	var err error
	switch kind {
	case "ConfigMap":
		_, err = client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string]string{"made": "by hand"}}, opts)
	case "Service":
		_, err = client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromInt32(8000)}}}}, opts)
	default:
		err = fmt.Errorf("cannot create a %s by hand", kind)
	}
	require.NoError(t, err, "create %s %s by hand", kind, name)
}

// badSnapshot maps "Kind/name" of every object of the kinds vllmctl
// applies or records to its resourceVersion (and a record's status).
type badSnapshot map[string]string

func snapshotNamespace(ctx context.Context, client kubernetes.Interface, ns string) (badSnapshot, error) {
	snap := badSnapshot{}
	add := func(kind string, items []metav1.Object) {
		for _, o := range items {
			snap[kind+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	deps, err := client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range deps.Items {
		add("Deployment", []metav1.Object{&deps.Items[i]})
	}
	rss, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range rss.Items {
		add("ReplicaSet", []metav1.Object{&rss.Items[i]})
	}
	svcs, err := client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range svcs.Items {
		add("Service", []metav1.Object{&svcs.Items[i]})
	}
	cms, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range cms.Items {
		add("ConfigMap", []metav1.Object{&cms.Items[i]})
	}
	secrets, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, s := range secrets.Items {
		v := s.ResourceVersion
		if st, ok := s.Labels[storage.LabelStatus]; ok {
			v += " " + st
		}
		snap["Secret/"+s.Name] = v
	}
	return snap, nil
}

// TestBadInputCorpus runs every case of testdata/bad/cases.yaml with the
// real binary: the exit code, the culprit named on stderr, no secret
// echoed, and — on the local cluster — nothing applied, no record changed.
// Cases without a cluster (template, lint) run without a kubeconfig; the
// others are skipped (failed under CI) when VLLMCTL_E2E_KUBECONFIG is not
// set.
func TestBadInputCorpus(t *testing.T) {
	shareCluster(t, 4)
	parent := t
	corpus := loadBadCorpus(t)
	bin, err := relBinary()
	require.NoError(t, err)
	kubeconfig := os.Getenv("VLLMCTL_E2E_KUBECONFIG")
	if kubeconfig != "" {
		kubeconfig, err = filepath.Abs(kubeconfig) // the binary runs in the repository root
		require.NoError(t, err)
	}
	r := &badRunner{bin: bin, kubeconfig: kubeconfig, home: t.TempDir()}

	setups := map[string]*badNamespace{}
	failedSetups := map[string]bool{}
	namespaceOf := func(t *testing.T, name string) *badNamespace {
		t.Helper()
		if kubeconfig == "" {
			skipOrFail(t, "setup %s needs the local cluster: VLLMCTL_E2E_KUBECONFIG is not set", name)
		}
		if failedSetups[name] {
			require.Failf(t, "setup failed", "setup %s failed in an earlier case", name)
		}
		if ns, ok := setups[name]; ok {
			return ns
		}
		failedSetups[name] = true
		// The namespace belongs to the whole corpus test, not to this
		// subtest: later cases of the setup share it.
		ns := prepareBadSetup(t, parent, r, name, corpus.Setups[name])
		failedSetups[name] = false
		setups[name] = ns
		return ns
	}

	ctx := context.Background()
	start := time.Now()
	for _, c := range corpus.Cases {
		t.Run(c.Group+"/"+c.Name, func(t *testing.T) {
			vars := map[string]string{"TMP": t.TempDir(), "KUBECONFIG": kubeconfig}
			var ns *badNamespace
			if c.setup() != setupNone {
				ns = namespaceOf(t, c.setup())
				vars["NS"] = ns.name
			}
			for dst, src := range c.Files {
				b, err := os.ReadFile(filepath.Join("..", src))
				require.NoError(t, err)
				path := filepath.Join(vars["TMP"], dst)
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, b, 0o644))
			}
			for dst, target := range c.Links {
				path := filepath.Join(vars["TMP"], dst)
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.Symlink(target, path))
			}
			args := make([]string, len(c.Args))
			for i, a := range c.Args {
				args[i] = expand(a, vars)
			}

			var before badSnapshot
			if ns != nil {
				var err error
				before, err = snapshotNamespace(ctx, ns.client, ns.name)
				require.NoError(t, err)
			}
			nsName := ""
			if ns != nil {
				nsName = ns.name
			}
			res := r.run(t, nsName, args)
			why := ""
			if c.Why != "" {
				why = "\nexpected because: " + c.Why
			}
			msg := fmt.Sprintf("vllmctl %s%s\n%s", quoteArgs(args), why, res)

			assert.Equal(t, c.Exit, res.code, "exit code of %s", msg)
			assert.Regexp(t, regexp.MustCompile(expand(c.Stderr, vars)), res.stderr, "stderr names the culprit: %s", msg)
			if c.Stdout != "" {
				assert.Regexp(t, regexp.MustCompile(expand(c.Stdout, vars)), res.stdout, "stdout of %s", msg)
			}
			if c.StdoutNot != "" {
				assert.NotRegexp(t, regexp.MustCompile(expand(c.StdoutNot, vars)), res.stdout, "stdout of %s", msg)
			}
			for _, s := range c.Secrets {
				assert.NotContains(t, res.stdout, s, "stdout echoes a secret: %s", msg)
				assert.NotContains(t, res.stderr, s, "stderr echoes a secret: %s", msg)
			}
			if ns == nil {
				return
			}
			after, err := snapshotNamespace(ctx, ns.client, ns.name)
			require.NoError(t, err)
			assert.Equal(t, before, after, "nothing applied, no record changed in %s: %s", ns.name, msg)
			if c.NoNamespace != "" {
				other := expand(c.NoNamespace, vars)
				_, err := ns.client.CoreV1().Namespaces().Get(ctx, other, metav1.GetOptions{})
				if !assert.True(t, apierrors.IsNotFound(err), "namespace %s must not exist: %v", other, err) && err == nil {
					_ = ns.client.CoreV1().Namespaces().Delete(ctx, other, metav1.DeleteOptions{})
				}
			}
		})
	}
	names := make([]string, 0, len(setups))
	for n := range setups {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("%d cases in %s (setups %v)", len(corpus.Cases), time.Since(start).Round(100*time.Millisecond), names)
}

// quoteArgs renders args as a shell would need them.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " '\"${}*?[]|&;<>()\\`") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}
