// The REST config of the RolloutWatcher's clients: their watch streams
// carry every update of every pod a rollout makes, thousands in a big one.

package wait

import (
	"net"
	"time"

	"k8s.io/client-go/rest"
)

// StreamConfig returns a copy of cfg for the RolloutWatcher's clients
// (see [NewPodWatchClient]): without gzip, over HTTP/1.1, with a TCP
// keep-alive of its own.
//
// Without gzip: the API server compresses a watch list's stream
// (WatchListCompression, on by default since Kubernetes 1.37) when asked,
// and Go's transport asks: the pod updates of a big rollout were then
// compressed by the API server and decompressed by vllmctl, an eighth of
// vllmctl's CPU time in a 1000-replica upgrade, to save bandwidth on
// events of a few kilobytes each.
//
// Over HTTP/1.1: on HTTP/2 every watch event is a frame that the
// connection's read loop hands to the stream's reader, and Go's HTTP/2
// client sends a WINDOW_UPDATE frame (a TLS write) for every 4 KiB it
// reads, about one per pod update; on HTTP/1.1 the informer reads its
// stream from the connection itself. A 1000-replica upgrade took a sixth
// less CPU time so (1.59-1.70 s against 1.95-2.06 s, three runs each,
// interleaved, on the local cluster). Each watch then has a connection of
// its own: a handful per release.
func StreamConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.DisableCompression = true
	c.TLSClientConfig.NextProtos = []string{"http/1.1"}
	if c.Dial == nil {
		// A connection the peer stopped answering (a load balancer that
		// dropped it without a reset) is closed after about 30 s and its
		// informer lists and watches again, as HTTP/2's health check (a
		// ping after 30 s without frames, 15 s for the answer) does for
		// the other clients.
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3,
		}}
		c.Dial = d.DialContext
	}
	return c
}
