// Command redigo-lock is lockcheck's adapter for the Redis lock Go services write on
// redigo 1.8.3 (github.com/gomodule/redigo, Debian's golang-github-gomodule-redigo-dev):
// redigo ships no lock, so its users copy the pattern of the Redis documentation,
// here as they write it:
//
//   - acquire: SET key value NX PX lease, retried every few milliseconds until
//     timeout_ms; value is random to this acquire. The token is INCR of a counter
//     key, in one Lua script with the SET so that a holder paused between the two
//     cannot take a number after the next holder's (two round trips would let it);
//   - renew: a Lua script that PEXPIREs the key only while it holds our value;
//   - held: GET key equals our value (what such code asks before it acts);
//   - release: a Lua script that DELs the key only while it holds our value.
//
// Nothing keeps the key alive but renew: a holder paused past the lease loses it,
// the known break.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/gomodule/redigo/redis"

	"lockcheck/adapter"
)

// redigo says its version nowhere in code; Debian's package is 1.8.3.
const library = "redigo 1.8.3 (SET NX PX + Lua compare-and-delete)"

var (
	acquire = redis.NewScript(2, `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false`)
	extend = redis.NewScript(1, `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)
	unlock = redis.NewScript(1, `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
)

type state struct {
	addr    string
	key     string
	counter string
	leaseMs int64
	io      time.Duration
	conn    redis.Conn
	value   string
	token   int64
}

func main() {
	s := &state{}
	adapter.Serve(s.handle)
}

func (s *state) handle(req *adapter.Request) adapter.Reply {
	switch req.Op {
	case "init":
		return s.init(req)
	case "acquire":
		return s.acquire(req.Timeout())
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
	if len(req.Endpoints) != 1 {
		return adapter.Fail(fmt.Sprintf("one Redis server expected, got %v", req.Endpoints))
	}
	s.addr, s.key, s.counter = req.Endpoints[0], req.Lock, req.Lock+":token"
	s.leaseMs = req.LeaseMs
	s.io = time.Duration(req.LeaseMs) * time.Millisecond / 4
	if _, err := s.do(func(c redis.Conn) (interface{}, error) { return c.Do("PING") }); err != nil {
		return adapter.Fail(fmt.Sprintf("connecting to %s: %v", s.addr, err))
	}
	return adapter.Ok(adapter.Reply{"library": library, "ops": []string{"renew", "held"}})
}

// do runs one exchange on the connection, dialled afresh after any error (a timed-out
// connection may still carry the late reply of the request before).
func (s *state) do(f func(redis.Conn) (interface{}, error)) (interface{}, error) {
	if s.conn == nil {
		c, err := redis.Dial("tcp", s.addr,
			redis.DialConnectTimeout(s.io), redis.DialReadTimeout(s.io), redis.DialWriteTimeout(s.io))
		if err != nil {
			return nil, err
		}
		s.conn = c
	}
	reply, err := f(s.conn)
	if err != nil && !isRedisError(err) {
		s.conn.Close()
		s.conn = nil
	}
	return reply, err
}

func isRedisError(err error) bool {
	var e redis.Error
	return errors.As(err, &e) || errors.Is(err, redis.ErrNil)
}

func (s *state) acquire(timeout time.Duration) adapter.Reply {
	value, err := random()
	if err != nil {
		return adapter.Fail(err)
	}
	deadline := time.Now().Add(timeout)
	for {
		token, err := redis.Int64(s.do(func(c redis.Conn) (interface{}, error) {
			return acquire.Do(c, s.key, s.counter, value, s.leaseMs)
		}))
		switch {
		case err == nil:
			s.value, s.token = value, token
			return adapter.Ok(adapter.Reply{"token": token, "lease_ms": s.leaseMs})
		case !errors.Is(err, redis.ErrNil):
			// The SET may have happened: unknown.
			return adapter.Info(fmt.Sprintf("SET NX PX: %v", err))
		case time.Now().After(deadline):
			return adapter.Fail("held by another client")
		}
		time.Sleep(retryPause())
	}
}

func (s *state) renew() adapter.Reply {
	if s.value == "" {
		return adapter.Fail("nothing held")
	}
	n, err := redis.Int64(s.do(func(c redis.Conn) (interface{}, error) {
		return extend.Do(c, s.key, s.value, s.leaseMs)
	}))
	switch {
	case err != nil:
		return adapter.Info(fmt.Sprintf("extend: %v", err))
	case n == 0:
		return adapter.Fail("the key no longer holds our value")
	}
	return adapter.Ok(adapter.Reply{"token": s.token, "lease_ms": s.leaseMs})
}

func (s *state) held() adapter.Reply {
	if s.value == "" {
		return adapter.Ok(adapter.Reply{"held": false})
	}
	got, err := redis.String(s.do(func(c redis.Conn) (interface{}, error) { return c.Do("GET", s.key) }))
	if err != nil && !errors.Is(err, redis.ErrNil) {
		return adapter.Info(fmt.Sprintf("GET: %v", err))
	}
	return adapter.Ok(adapter.Reply{"held": got == s.value})
}

func (s *state) release() adapter.Reply {
	if s.value == "" {
		return adapter.Fail("nothing held")
	}
	value := s.value
	s.value = ""
	n, err := redis.Int64(s.do(func(c redis.Conn) (interface{}, error) {
		return unlock.Do(c, s.key, value)
	}))
	switch {
	case err != nil:
		return adapter.Info(fmt.Sprintf("unlock: %v", err))
	case n == 0:
		return adapter.Fail("the key no longer holds our value: nothing to release")
	}
	return adapter.Ok(nil)
}

func random() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("a random value: %v", err)
	}
	return hex.EncodeToString(b), nil
}

// retryPause: 10-50 ms, so that waiting clients do not retry in lockstep.
func retryPause() time.Duration {
	n, err := rand.Int(rand.Reader, big.NewInt(40))
	if err != nil {
		return 25 * time.Millisecond
	}
	return time.Duration(10+n.Int64()) * time.Millisecond
}
