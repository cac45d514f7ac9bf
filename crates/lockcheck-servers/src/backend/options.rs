//! A backend's own `[backend]` settings: the keys the common ones (kind, nodes,
//! lease, ...) leave, which only the backend reads, each into its typed options
//! beside its client ([`OwnOptions`]), as a fault kind reads its spec. A base of
//! `backend`: it imports no sibling.

use serde::Deserialize;
use std::future::Future;

/// A backend's own `[backend]` keys and their values, as the workload wrote them.
/// Carried as written (to the workers, to the server recipe); read where used.
pub type Options = toml::Table;

/// A backend's typed options (`redis::Options`, `etcd::Options`, ...): read from
/// its keys of `[backend]` and checked by the backend itself.
pub trait OwnOptions: serde::de::DeserializeOwned + Default {
    /// Each key it reads, with what it is, in the words a workload of another
    /// backend is told when it gives the key ("only etcd's clients are pinned to
    /// one member").
    const KEYS: &'static [(&'static str, &'static str)];

    /// What the values allow together, beyond their types.
    fn check(&self) -> Result<(), OptionError> {
        Ok(())
    }

    /// Reads and checks `options`. Each key is read on its own first, so that an
    /// error names the key it is about.
    fn read(options: &Options) -> Result<Self, OptionError> {
        for (key, value) in options {
            let one = toml::Table::from_iter([(key.clone(), value.clone())]);
            toml::Value::Table(one)
                .try_into::<Self>()
                .map_err(|e| OptionError {
                    key: key.clone(),
                    what: e.message().trim_end().to_string(),
                    why: match Self::KEYS.iter().any(|(k, _)| k == key) {
                        true => Why::Type,
                        false => Why::Unknown,
                    },
                })?;
        }
        let own: Self = toml::Value::Table(options.clone())
            .try_into()
            .map_err(|e| OptionError::value("", e.message().trim_end()))?;
        own.check()?;
        Ok(own)
    }

    /// The options of a workload read (and so checked) already; the defaults
    /// where it gave none.
    fn of(options: &Options) -> Self {
        Self::read(options).unwrap_or_default()
    }
}

/// The options of a backend that reads none: every key is unknown to it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoOptions {}

impl OwnOptions for NoOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[];
}

/// `backend.client_endpoint`: which node a client of a replicated service talks
/// to, where it would otherwise talk to several (an etcd client balances over
/// every member; a ZooKeeper client moves to another server of its connect string
/// when its own stops serving, and its session with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientEndpoint {
    /// The first node, in node order, that is not the leader when the client
    /// connects: every client of the run picks the same one.
    Follower,
}

/// `client_endpoint = "follower"`: the first of `nodes` that `follows` says
/// follows its leader now (`Err`: what the node is instead, or why it did not
/// say); every node's answer in the error when none does.
pub async fn first_follower<F, Fut>(nodes: &[String], follows: F) -> anyhow::Result<String>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let mut seen = Vec::new();
    for node in nodes {
        match follows(node.clone()).await {
            Ok(()) => return Ok(node.clone()),
            Err(what) => seen.push(format!("{node}: {what}")),
        }
    }
    anyhow::bail!(
        "client_endpoint = \"follower\": no node follows its leader now ({})",
        seen.join("; ")
    )
}

/// The options of a backend whose one key of its own is `client_endpoint`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointOptions {
    /// The one node every client talks to (`"follower"`), instead of several.
    pub client_endpoint: Option<ClientEndpoint>,
}

impl OwnOptions for EndpointOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[(
        "client_endpoint",
        "each client pinned to one node, where it would talk to several",
    )];
}

/// A backend option refused: its key (`replica_acks`), what is wrong, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    pub key: String,
    pub what: String,
    pub why: Why,
}

/// Why a backend option was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The backend reads no such key.
    Unknown,
    /// The value is not of the key's type (the error is where the value is).
    Type,
    /// The value is of its type, but the backend refuses it.
    Value,
}

impl OptionError {
    /// A value the backend reads but refuses.
    pub fn value(key: &str, what: impl Into<String>) -> OptionError {
        OptionError {
            key: key.into(),
            what: what.into(),
            why: Why::Value,
        }
    }
}

/// How a registry entry reads its backend's options: its keys, and a reader that
/// checks a table against them. `of::<T>()` for a backend with options `T`.
#[derive(Clone, Copy)]
pub struct Reader {
    pub keys: &'static [(&'static str, &'static str)],
    pub read: fn(&Options) -> Result<(), OptionError>,
}

/// The registry entry's reader of options `T`.
pub const fn reader<T: OwnOptions>() -> Reader {
    Reader {
        keys: T::KEYS,
        read: read_with::<T>,
    }
}

fn read_with<T: OwnOptions>(options: &Options) -> Result<(), OptionError> {
    T::read(options).map(drop)
}

#[cfg(test)]
mod follower_tests {
    use super::first_follower;

    #[tokio::test]
    async fn the_first_node_that_follows_is_chosen_and_none_names_every_answer() {
        let nodes = ["n1:1".to_string(), "n2:2".to_string(), "n3:3".to_string()];
        let follows = |node: String| async move {
            match node.as_str() {
                "n1:1" => Err("the leader".to_string()),
                _ => Ok(()),
            }
        };
        assert_eq!(first_follower(&nodes, follows).await.unwrap(), "n2:2");
        let none = |_: String| async { Err::<(), _>("no answer".to_string()) };
        let e = format!("{:#}", first_follower(&nodes, none).await.unwrap_err());
        assert!(
            e.contains("n1:1: no answer; n2:2: no answer; n3:3: no answer"),
            "{e}"
        );
    }
}
