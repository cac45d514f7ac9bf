// Package adapter is the request loop the Go adapters share: lockcheck's client
// protocol (client.md v1, docs/clients.md), one JSON request per line on stdin, one
// reply per line on stdout, the adapter's log on stderr. Each adapter says what its
// library did; this package only carries the words.
package adapter

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"
)

// Request is one line from lockcheck's worker.
type Request struct {
	ID uint64 `json:"id"`
	Op string `json:"op"`
	// init
	Endpoints    []string `json:"endpoints"`
	Lock         string   `json:"lock"`
	LeaseMs      int64    `json:"lease_ms"`
	Client       string   `json:"client"`
	FencingToken bool     `json:"fencing_token"`
	// Extension of client.md v1: "election" when the workload's clients campaign
	// (mode = "election"); absent or "lock" otherwise.
	Mode string `json:"mode"`
	// acquire
	TimeoutMs int64 `json:"timeout_ms"`
}

// Timeout is an acquire's wait.
func (r *Request) Timeout() time.Duration {
	return time.Duration(r.TimeoutMs) * time.Millisecond
}

// Reply is one answer without its id: a history type ("ok", "fail", "info") and
// the fields that go with it.
type Reply map[string]interface{}

// Ok: it happened.
func Ok(fields Reply) Reply {
	r := Reply{"type": "ok"}
	for k, v := range fields {
		r[k] = v
	}
	return r
}

// Fail: it definitely did not happen (the lock is busy, not ours).
func Fail(why interface{}) Reply {
	return Reply{"type": "fail", "error": fmt.Sprint(why)}
}

// Info: unknown whether it happened (a timeout, a lost connection).
func Info(why interface{}) Reply {
	return Reply{"type": "info", "error": fmt.Sprint(why)}
}

// Handler answers one request.
type Handler func(req *Request) Reply

// Serve answers each request on stdin until it closes. A request that panics the
// handler is answered `info` (its effect is unknown) and the adapter exits, so that
// lockcheck starts a fresh one rather than trust a half-changed state.
func Serve(handle Handler) {
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64*1024), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var req Request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			log.Fatalf("a request that is not JSON (%v): %q", err, in.Text())
		}
		reply, crashed := answer(handle, &req)
		reply["id"] = req.ID
		line, err := json.Marshal(reply)
		if err != nil {
			line, _ = json.Marshal(Reply{"id": req.ID, "type": "info", "error": err.Error()})
		}
		out.Write(append(line, '\n'))
		if err := out.Flush(); err != nil {
			log.Fatalf("writing a reply: %v", err)
		}
		if crashed {
			os.Exit(3)
		}
	}
	if err := in.Err(); err != nil {
		log.Fatalf("reading requests: %v", err)
	}
}

func answer(handle Handler, req *Request) (reply Reply, crashed bool) {
	defer func() {
		if p := recover(); p != nil {
			log.Printf("%s (id %d) panicked: %v", req.Op, req.ID, p)
			reply, crashed = Info(fmt.Sprintf("the adapter panicked: %v", p)), true
		}
	}()
	return handle(req), false
}

// Unknown answers an op this adapter does not offer.
func Unknown(req *Request) Reply {
	return Fail(fmt.Sprintf("unknown op %q", req.Op))
}
