//! The lock services, one folder each: a backend is its folder
//! (`backends/<backend>/`) and its registry lines (`BackendKind::service` for its
//! client, `cluster::recipe` for its servers). In its folder: the lock client, as
//! its own community writes that lock, with its options, its lease presets and
//! what is said of it (`client.rs`, a `LockService`); the server recipe
//! (`server.rs`, a `ServerRecipe`); the Debian packages its servers need
//! (`packages.txt`). The folder is no layer of its own: the server recipe is in
//! `cluster`'s layer, every other file in `backend`'s (tests/layers.rs), so a
//! client knows no server process, fault or check.
//!
//! Each folder is a cargo feature of its own (all by default), with its client
//! library: a build with `--no-default-features --features redis` has Redis's
//! backends and no other, and compiles no other client.
//!
//! | backend | recipe | token | known break |
//! |---|---|---|---|
//! | [`redis`] | `SET key holder NX PX ttl` on one server | `INCR` of a counter in the same script, or none | a holder paused past its TTL wakes up still "holding" while another holds |
//! | [`redis-sentinel`](redis::sentinel) | the same on the primary Sentinel names (asked at each acquire), optionally `WAIT` for replicas | the same `INCR`, on the primary | a primary cut off from its replicas and Sentinels goes on renewing while a promoted replica's copy of the key runs out |
//! | [`redlock`](redis::redlock) | the same on 5 independent servers, quorum 3, validity = TTL − elapsed − drift | none (Redlock has none) | the same pause; also a clock jump on a majority of servers |
//! | [`etcd`] | lease + key created only if absent, kept alive while held | the key's create revision | a holder paused past its lease: the lease expires, the key goes |
//! | [`postgres-advisory`](postgres) | `pg_try_advisory_lock` in one session, retried | none | a holder paused past `idle_session_timeout`: its session ends, the lock with it |
//! | [`postgres-lease`](postgres) | one conditional `UPDATE` of a lease row (`locked_until`, token + 1) | the row's token | a holder paused past `locked_until` |
//! | [`zookeeper`] | ephemeral sequential znode under the lock node; the lowest holds; the others watch their predecessor | the znode's czxid | a holder paused past its session timeout: its znode goes with the session |
//! | [`mariadb`] | `GET_LOCK(name, timeout)` in one session, `RELEASE_LOCK` | none | a holder paused past `wait_timeout`: its session ends, the lock with it |
//! | [`patroni`] | no lock: the primary role Patroni's agents hand out through a leader key with a TTL in etcd; a client leads while its own node accepts writes | the node's PostgreSQL timeline | the primary's Patroni paused past the leader key's TTL: a replica is promoted while the old primary still commits writes |
//! | [`nats`] | JetStream KV: create the key only if absent (expected last sequence 0), TTL = the bucket's max age, renew/release by expected revision; the bucket on every node of a cluster | the key's revision at create | a holder paused past the max age; on a cluster before nats-server 2.9.21, two concurrent creates both win |

#[cfg(feature = "etcd")]
pub mod etcd;
#[cfg(feature = "mariadb")]
pub mod mariadb;
#[cfg(feature = "nats")]
pub mod nats;
#[cfg(feature = "patroni")]
pub mod patroni;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;
