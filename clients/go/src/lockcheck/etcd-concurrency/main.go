// Command etcd-concurrency is lockcheck's adapter for etcd's Go client recipes, the
// concurrency package of etcd 3.4.23 (go.etcd.io/etcd/clientv3/concurrency, Debian's
// golang-etcd-server-dev): what Go services call to lock and to elect a leader.
//
// A lock workload drives a Mutex; an election workload (init's mode = "election")
// an Election. Both live on a Session: a lease of the workload's TTL (whole seconds,
// as etcd counts them) that the session keeps alive from this process every TTL/3.
// A pause of this process stops that keep-alive, which is the known break: etcd
// expires the lease, the key goes, the next waiter's Lock (or Campaign) returns.
//
// Mutex: acquire = Lock(ctx) bounded by timeout_ms; the token is the create revision
// of the mutex's key, read at the revision Lock returned at (3.4's Mutex keeps it
// unexported; Header().Revision is when Lock returned, which for a waiter is later
// than the key's creation). Lock hands the lock to the lowest create revision under
// the prefix once every key before it is gone, so a later holder's key was created
// later: create revisions of successive holders only grow, a valid fencing token.
// renew = one keep-alive round trip of the session's lease; held = the session is
// not Done and the key is still there with our create revision; release = Unlock,
// then the session is closed (its lease revoked): one session per hold, as etcd's
// own examples do.
//
// Election: acquire = Campaign(ctx) bounded by timeout_ms; the token is the leader
// key's create revision (Election.Rev(), the same ordering as the Mutex's); held =
// the session is not Done and Leader() names our key; release = Resign, then the
// session is closed.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	"go.etcd.io/etcd/etcdserver/api/v3rpc/rpctypes"
	"go.etcd.io/etcd/version"

	"lockcheck/adapter"
)

type state struct {
	client   *clientv3.Client
	name     string
	ttl      int
	io       time.Duration
	election bool
	session  *concurrency.Session
	mutex    *concurrency.Mutex
	elect    *concurrency.Election
	key      string
	token    int64
}

func main() {
	s := &state{}
	adapter.Serve(s.handle)
}

func (s *state) handle(req *adapter.Request) adapter.Reply {
	if req.Op != "init" && s.client == nil {
		return adapter.Fail("no init yet")
	}
	switch req.Op {
	case "init":
		return s.init(req)
	case "acquire":
		if s.election {
			return s.campaign(req.Timeout())
		}
		return s.lock(req.Timeout())
	case "renew":
		return s.renew()
	case "held":
		return s.held()
	case "release":
		return s.release()
	}
	return adapter.Unknown(req)
}

func (s *state) init(req *adapter.Request) adapter.Reply {
	s.name = req.Lock
	// etcd's leases are whole seconds: the workload's lease, rounded up.
	s.ttl = int((req.LeaseMs + 999) / 1000)
	s.io = time.Duration(req.LeaseMs) * time.Millisecond / 4
	s.election = req.Mode == "election"
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   req.Endpoints,
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		return adapter.Fail(fmt.Sprintf("connecting to %v: %v", req.Endpoints, err))
	}
	s.client = c
	ops := []string{"renew", "held"}
	if s.election {
		ops = append(ops, "campaign")
	}
	return adapter.Ok(adapter.Reply{
		"library": fmt.Sprintf("etcd clientv3/concurrency %s (%s)", version.Version, runtime.Version()),
		"ops":     ops,
	})
}

// fresh is a new session for each hold, as etcd's own examples take one per lock,
// the previous one dropped first. A session kept across holds would hand its key on:
// after an op lockcheck got no answer to (its process id retired, still counted as
// holding), the next Lock on the same session finds its own key and returns at once,
// with the same create revision, a second holder with the first one's token.
func (s *state) fresh() (*concurrency.Session, error) {
	s.drop()
	// The grant is bounded; the session then keeps that lease alive on its own.
	ctx, cancel := context.WithTimeout(context.Background(), s.io)
	defer cancel()
	lease, err := s.client.Grant(ctx, int64(s.ttl))
	if err != nil {
		return nil, err
	}
	session, err := concurrency.NewSession(s.client, concurrency.WithLease(lease.ID), concurrency.WithTTL(s.ttl))
	if err != nil {
		return nil, err
	}
	s.session = session
	return session, nil
}

// drop stops keeping the session's lease alive and revokes it (its key goes with it),
// bounded: a revoke that is not answered leaves the lease to expire by its TTL.
func (s *state) drop() {
	if s.session == nil {
		return
	}
	s.session.Orphan()
	ctx, cancel := context.WithTimeout(context.Background(), s.io)
	defer cancel()
	if _, err := s.client.Revoke(ctx, s.session.Lease()); err != nil {
		log.Printf("revoking lease %x: %v (it expires by its TTL)", s.session.Lease(), err)
	}
	s.session = nil
}

func (s *state) lock(timeout time.Duration) adapter.Reply {
	session, err := s.fresh()
	if err != nil {
		return adapter.Info(fmt.Sprintf("starting a session: %v", err))
	}
	m := concurrency.NewMutex(session, s.name+"/mutex")
	// The key Lock puts: Mutex.Key() forgets it once Lock gives up.
	key := fmt.Sprintf("%s/mutex/%x", s.name, session.Lease())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err = m.Lock(ctx)
	cancel()
	if err != nil {
		return s.gaveUp("Lock", key, err)
	}
	// The key's create revision, read as of the revision Lock returned at.
	ctx, cancel = context.WithTimeout(context.Background(), s.io)
	defer cancel()
	got, err := s.client.Get(ctx, key, clientv3.WithRev(m.Header().Revision))
	if err != nil {
		return adapter.Info(fmt.Sprintf("Lock returned; reading its key's create revision: %v", err))
	}
	if len(got.Kvs) == 0 {
		return adapter.Info(fmt.Sprintf("Lock returned, but its key %s is not there at revision %d", key, m.Header().Revision))
	}
	s.mutex, s.key, s.token = m, key, got.Kvs[0].CreateRevision
	return s.granted()
}

func (s *state) campaign(timeout time.Duration) adapter.Reply {
	session, err := s.fresh()
	if err != nil {
		return adapter.Info(fmt.Sprintf("starting a session: %v", err))
	}
	e := concurrency.NewElection(session, s.name+"/election")
	key := fmt.Sprintf("%s/election/%x", s.name, session.Lease())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err = e.Campaign(ctx, os.Getenv("LOCKCHECK_CLIENT"))
	cancel()
	if err != nil {
		return s.gaveUp("Campaign", key, err)
	}
	s.elect, s.key, s.token = e, e.Key(), e.Rev()
	return s.granted()
}

func (s *state) granted() adapter.Reply {
	return adapter.Ok(adapter.Reply{"token": s.token, "lease_ms": s.ttl * 1000})
}

// gaveUp answers a Lock or Campaign that returned an error. On its own deadline the
// library deletes the key it put (fail) — if its key is gone; a key still there
// (the delete failed, or the put was not answered but happened) may yet be granted
// the lock: unknown.
func (s *state) gaveUp(call, key string, err error) adapter.Reply {
	ctx, cancel := context.WithTimeout(context.Background(), s.io)
	defer cancel()
	got, gerr := s.client.Get(ctx, key)
	switch {
	case gerr != nil:
		return adapter.Info(fmt.Sprintf("%s: %v; then reading its key: %v", call, err, gerr))
	case len(got.Kvs) > 0:
		return adapter.Info(fmt.Sprintf("%s: %v; its key %s is still there", call, err, key))
	case errors.Is(err, context.DeadlineExceeded):
		return adapter.Fail(fmt.Sprintf("%s: not granted in time (%v)", call, err))
	}
	return adapter.Info(fmt.Sprintf("%s: %v", call, err))
}

// renew: one keep-alive round trip of the session's lease. The session already
// keeps it alive by itself; its Done is the library's word that the lease is gone.
func (s *state) renew() adapter.Reply {
	if s.session == nil {
		return adapter.Fail("no session")
	}
	select {
	case <-s.session.Done():
		return adapter.Fail(fmt.Sprintf("the session is done (session.Done()): lease %x is no longer kept alive", s.session.Lease()))
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.io)
	defer cancel()
	_, err := s.client.KeepAliveOnce(ctx, s.session.Lease())
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return adapter.Fail(fmt.Sprintf("lease %x: %v", s.session.Lease(), err))
	}
	if err != nil {
		return adapter.Info(fmt.Sprintf("keep-alive of lease %x: %v", s.session.Lease(), err))
	}
	return s.granted()
}

// held: what the library can say without fixing anything: the session is alive and
// the key is still ours (the Mutex's key with our create revision; the election's
// leader, by Leader(), is our key).
func (s *state) held() adapter.Reply {
	no := adapter.Ok(adapter.Reply{"held": false})
	if s.session == nil || s.key == "" {
		return no
	}
	select {
	case <-s.session.Done():
		return no
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.io)
	defer cancel()
	var got *clientv3.GetResponse
	var err error
	if s.election {
		got, err = s.elect.Leader(ctx)
		if errors.Is(err, concurrency.ErrElectionNoLeader) {
			return no
		}
	} else {
		got, err = s.client.Get(ctx, s.key)
	}
	if err != nil {
		return adapter.Info(fmt.Sprintf("asking whether %s is still ours: %v", s.key, err))
	}
	ours := len(got.Kvs) > 0 && string(got.Kvs[0].Key) == s.key && got.Kvs[0].CreateRevision == s.token
	return adapter.Ok(adapter.Reply{"held": ours})
}

func (s *state) release() adapter.Reply {
	ctx, cancel := context.WithTimeout(context.Background(), s.io)
	defer cancel()
	var err error
	switch {
	case s.election && s.elect != nil:
		err = s.elect.Resign(ctx)
	case !s.election && s.mutex != nil:
		err = s.mutex.Unlock(ctx)
	default:
		return adapter.Fail("nothing held")
	}
	s.mutex, s.elect, s.key = nil, nil, ""
	s.drop()
	if err != nil {
		return adapter.Info(fmt.Sprintf("release: %v", err))
	}
	return adapter.Ok(nil)
}
