package openai

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/scheduler"
)

// smallBuffers gives every accepted connection a small send buffer, so a
// client that stops reading stalls the server's writes after a few KiB.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestSlowReaderCutOff: a client that stops reading a stream is cut off
// after SendStallTimeout without a byte accepted; its sequence is
// cancelled and leaves the batch, and its KV blocks return.
func TestSlowReaderCutOff(t *testing.T) {
	cut := make(chan struct{}, 1)
	f := newFixture(t, true, func(d *frontdoor.Config, c *Config) {
		d.SendStallTimeout = 50 * time.Millisecond
		c.onSlowReader = func() { cut <- struct{}{} }
	})
	// Serve again on a listener with small send buffers.
	srv := httptest.NewUnstartedServer(f.h)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)

	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.DialContext(t.Context(), "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Big events: top 20 logprobs for each token.
	body := `{"model":"` + f.model + `","messages":[{"role":"user","content":"Tell me a story."}],"max_tokens":400,` +
		`"temperature":0,"logprobs":true,"top_logprobs":20,"ignore_eos":true,"stream":true}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		testToken, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// The client reads nothing more. 150 tokens of ~1.5 KB events are far
	// more than the buffers hold, so the writes stall and the cutoff
	// comes; the steps stop there so the request cannot end first.
	steps := 0
	var fin *scheduler.Final
	for stalled := false; !stalled; {
		var gate chan struct{}
		if steps < 150 {
			gate = f.gate
		}
		select {
		case gate <- struct{}{}:
			steps++
		case <-cut:
			stalled = true
		case fin = <-f.finals:
			// The cutoff cancels the sequence right after it signals
			// cut, so both can be ready at this select and the final may
			// win it; a final without a cutoff is the failure.
			select {
			case <-cut:
				stalled = true
			case <-time.After(5 * time.Second):
				t.Fatalf("the request ended (%v after %d tokens) before the cutoff", fin.Reason, fin.CompletionTokens)
			}
		case <-t.Context().Done():
			t.Fatal("no cutoff")
		}
	}
	for fin == nil {
		select {
		case f.gate <- struct{}{}:
		case fin = <-f.finals:
		}
	}
	if fin.Reason != scheduler.FinishCancelled {
		t.Errorf("finish %v after %d tokens, want cancelled", fin.Reason, fin.CompletionTokens)
	}
	f.sched.Drain()
	<-f.sched.Drained()
	st := f.sched.Stats()
	if diff := cmp.Diff([3]int{0, 0, 0}, [3]int{st.Running, st.Waiting, st.KVBlocksUsed}); diff != "" {
		t.Errorf("running, waiting, KV blocks used after the cutoff (-want +got):\n%s", diff)
	}
}

// TestDisconnectCancelsAllChoices: with n=3, a client that drops
// mid-stream cancels every choice; all leave the batch and the KV blocks
// return.
func TestDisconnectCancelsAllChoices(t *testing.T) {
	f := newFixture(t, true)
	ctx, cancel := context.WithCancel(t.Context())
	p := f.completionParams(longPrompt, 200)
	p.N = oai.Int(3)
	s := f.client.Completions.NewStreaming(ctx, p)
	// The first choice's prefill runs ungated; its first token comes
	// after the other two choices were submitted.
	if !s.Next() {
		t.Fatalf("no first chunk: %v", s.Err())
	}
	cancel()
	s.Close()
	var finals []*scheduler.Final
	for len(finals) < 3 {
		select {
		case f.gate <- struct{}{}:
		case fin := <-f.finals:
			finals = append(finals, fin)
		}
	}
	for _, fin := range finals {
		if fin.Reason != scheduler.FinishCancelled {
			t.Errorf("finish %v after %d tokens, want cancelled", fin.Reason, fin.CompletionTokens)
		}
	}
	f.sched.Drain()
	<-f.sched.Drained()
	st := f.sched.Stats()
	if diff := cmp.Diff([3]int{0, 0, 0}, [3]int{st.Running, st.Waiting, st.KVBlocksUsed}); diff != "" {
		t.Errorf("running, waiting, KV blocks used after the disconnect (-want +got):\n%s", diff)
	}
}
