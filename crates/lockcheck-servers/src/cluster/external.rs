//! Servers lockcheck did not start (a staging etcd, a managed Redis): the workload
//! names their endpoints, and lockcheck runs its workers and resource against them.
//! It owns no server process here, so it can neither kill, restart, wipe nor pause a
//! node, nor reach a server's clock; the workload's validation refuses those faults
//! by name before anything runs, and these methods refuse them again if called.

use super::plan::Runtime;
use super::running::{Cluster, Layout};
use crate::backend::BackendKind;
use anyhow::{bail, Result};
use async_trait::async_trait;
use std::path::{Path, PathBuf};

pub struct ExternalCluster {
    kind: BackendKind,
    dir: PathBuf,
    endpoints: Vec<String>,
}

impl ExternalCluster {
    /// `endpoints` in node order (n1 first), as `host:port`.
    pub fn new(kind: BackendKind, dir: impl Into<PathBuf>, endpoints: Vec<String>) -> Result<Self> {
        if endpoints.is_empty() {
            bail!("an external {kind} cluster needs at least one endpoint");
        }
        Ok(ExternalCluster {
            kind,
            dir: dir.into(),
            endpoints,
        })
    }

    fn not_ours(&self, what: &str, node: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "cannot {what} {node} ({}): an external server, which lockcheck did not start",
            self.endpoint(node).unwrap_or("no such node")
        )
    }

    fn endpoint(&self, node: &str) -> Option<&str> {
        let i: usize = node.strip_prefix('n')?.parse().ok()?;
        self.endpoints.get(i.checked_sub(1)?).map(String::as_str)
    }
}

#[async_trait]
impl Cluster for ExternalCluster {
    fn layout(&self) -> Layout<'_> {
        Layout {
            kind: self.kind,
            runtime: Runtime::External,
            dir: &self.dir,
            node_names: (1..=self.endpoints.len())
                .map(|i| format!("n{i}"))
                .collect(),
            endpoints: self.endpoints.clone(),
        }
    }
    fn program(&self) -> Option<&Path> {
        None
    }
    fn pid(&self, _node: &str) -> Option<u32> {
        None
    }
    async fn kill(&mut self, node: &str) -> Result<()> {
        Err(self.not_ours("kill", node))
    }
    async fn restart(&mut self, node: &str) -> Result<()> {
        Err(self.not_ours("restart", node))
    }
    async fn wipe(&mut self, node: &str) -> Result<()> {
        Err(self.not_ours("wipe", node))
    }
    /// Nobody: a fault aimed at the leader needs a server lockcheck owns.
    async fn leader(&self) -> Option<String> {
        None
    }
    /// Nothing to stop: the servers belong to someone else.
    async fn stop(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn node_faults_are_refused_with_the_endpoint_named() {
        let mut c = ExternalCluster::new(
            BackendKind::Redis,
            "/tmp",
            vec!["redis.example:6379".into()],
        )
        .unwrap();
        assert_eq!(c.node_names(), vec!["n1"]);
        let e = c.kill("n1").await.unwrap_err().to_string();
        assert!(
            e.contains("redis.example:6379") && e.contains("did not start"),
            "{e}"
        );
        assert!(c.pid("n1").is_none());
        assert!(ExternalCluster::new(BackendKind::Etcd, "/tmp", vec![]).is_err());
    }
}
