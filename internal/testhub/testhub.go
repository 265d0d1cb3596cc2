package testhub

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Hub is a running stand-in of the Hub.
type Hub struct {
	*httptest.Server
	dir   string
	token string

	mu sync.Mutex
	// gated are the repos that need the token; indexes the
	// model.safetensors.index.json total sizes served; requests counts
	// the paths asked for.
	gated    map[string]bool
	indexes  map[string]int64
	requests map[string]int
	auth     map[string]string
}

// resolvePath is /{org}/{name}/resolve/{revision}/{file} (or a repo id
// without org).
var resolvePath = regexp.MustCompile(`^/(.+)/resolve/([^/]+)/([^/]+)$`)

// New serves the configs of dir; token is the bearer token gated repos
// accept.
func New(dir, token string) *Hub {
	h := &Hub{dir: dir, token: token, gated: map[string]bool{}, indexes: map[string]int64{},
		requests: map[string]int{}, auth: map[string]string{}}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	return h
}

// Gate makes repo answer 401 without the token.
func (h *Hub) Gate(repo string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gated[repo] = true
}

// SetIndex serves a checkpoint index of total bytes for repo.
func (h *Hub) SetIndex(repo string, total int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.indexes[repo] = total
}

// Requests is how often path was asked for.
func (h *Hub) Requests(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests[path]
}

// Authorization is the Authorization header of the last request of path.
func (h *Hub) Authorization(path string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.auth[path]
}

func (h *Hub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests[r.URL.Path]++
	h.auth[r.URL.Path] = r.Header.Get("Authorization")
	m := resolvePath.FindStringSubmatch(r.URL.Path)
	var gated bool
	var index int64
	if m != nil {
		gated, index = h.gated[m[1]], h.indexes[m[1]]
	}
	h.mu.Unlock()
	if m == nil || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	repo, file := m[1], m[3]
	if gated && r.Header.Get("Authorization") != "Bearer "+h.token {
		http.Error(w, "Access to model "+repo+" is restricted.", http.StatusUnauthorized)
		return
	}
	switch file {
	case "config.json":
		data, err := os.ReadFile(filepath.Join(h.dir, strings.ReplaceAll(repo, "/", "--")+".json"))
		if err != nil {
			http.Error(w, "Entry Not Found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	case "model.safetensors.index.json":
		if index <= 0 {
			http.Error(w, "Entry Not Found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"metadata": {"total_size": %d}, "weight_map": {}}`, index)
	default:
		http.Error(w, "Entry Not Found", http.StatusNotFound)
	}
}
