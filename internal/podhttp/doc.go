// Package podhttp speaks HTTP to a port of a pod through the API server's
// pod port-forward (the portforward subresource, as `kubectl
// port-forward` does), so that a check run from outside the cluster (a CI
// runner) reaches the pod as the cluster's own clients do, under the
// caller's identity and without a Service or an exposed port. It owns the
// connection plumbing only; what is asked of the pod (the serve check, a
// metrics scrape, synthetic load) belongs to its callers.
package podhttp
