//! Starting, watching and stopping the servers of a backend, behind one small
//! [`Cluster`] trait with four runtimes: local processes on loopback (the default,
//! [`local`]), one Docker container per node on a network made for the run
//! ([`docker`]), servers on other hosts reached with the system's OpenSSH client
//! ([`ssh`]), and servers someone else runs ([`external`]), which lockcheck only
//! talks to.
//!
//! What differs between backends is one [`ServerRecipe`] per backend, in its
//! folder (`backends/<backend>/server.rs`), found through `recipe`:
//! the server program and the Debian package that installs it (so that a missing
//! server is an environment problem named precisely: the runner exits 5 with it,
//! rather than a failed spawn), ports, command line, one-off setup, readiness,
//! leader, image. The runtimes never name a backend.

#[cfg(feature = "docker")]
pub mod docker;
pub mod external;
pub mod freezer;
pub mod home;
pub mod local;
pub mod netns;
pub mod node;
pub mod plan;
pub mod recipe;
mod recipes;
pub mod running;
pub mod setup;
pub mod ssh;
mod template;
pub mod timens;

#[cfg(feature = "docker")]
pub use docker::DockerCluster;
pub use external::ExternalCluster;
pub use local::LocalCluster;
pub use node::NodeSpec;
pub use plan::{ClusterPlan, ClusterSpec, NetworkKind, Prepare, PrepareFn, Runtime, DATA_DIR};
pub use recipe::{
    detached_pid, ClusterError, Detached, Init, Package, Ports, ServerBinary, ServerRecipe,
};
pub use recipes::{
    available_backends, default_image, default_nodes, recipe, server_binary, Availability,
    HOST_IMAGE,
};
pub use running::{Cluster, Layout};
pub use ssh::{SshCluster, SshSpec};

use anyhow::Result;
use async_trait::async_trait;
use std::path::Path;

/// What a build without the `docker` feature says of the docker runtime.
#[cfg(not(feature = "docker"))]
pub const WITHOUT_DOCKER: &str = "runtime = \"docker\": this lockcheck was built \
     without its `docker` feature (cargo build --features docker)";

#[async_trait]
impl Cluster for LocalCluster {
    /// Dialled on loopback, or where the backend's recipe says, rather than at
    /// the addresses the nodes advertise to each other.
    fn layout(&self) -> Layout<'_> {
        Layout {
            endpoints: LocalCluster::endpoints(self),
            ..Layout::planned(self.plan(), Runtime::Local)
        }
    }
    fn program(&self) -> Option<&Path> {
        Some(&self.plan().binary)
    }
    fn pid(&self, node: &str) -> Option<u32> {
        LocalCluster::pid(self, node)
    }
    async fn kill(&mut self, node: &str) -> Result<()> {
        LocalCluster::kill(self, node).await
    }
    async fn restart(&mut self, node: &str) -> Result<()> {
        LocalCluster::restart(self, node).await
    }
    async fn restart_together(&mut self, nodes: &[String]) -> Result<()> {
        LocalCluster::restart_together(self, nodes).await
    }
    async fn wipe(&mut self, node: &str) -> Result<()> {
        LocalCluster::wipe(self, node).await
    }
    async fn freeze(&mut self, node: &str) -> Result<()> {
        LocalCluster::freeze(self, node).await
    }
    async fn thaw(&mut self, node: &str) -> Result<()> {
        LocalCluster::thaw(self, node).await
    }
    async fn leader(&self) -> Option<String> {
        LocalCluster::leader(self).await
    }
    async fn stop(&mut self) {
        LocalCluster::stop(self).await
    }
    async fn discard(&mut self) {
        LocalCluster::discard(self).await
    }
    fn network(&self) -> Option<std::sync::Arc<netns::Network>> {
        LocalCluster::network(self)
    }
}

#[cfg(test)]
mod tests {
    use super::recipe::find_executable;
    use super::*;
    use crate::backend::BackendKind;
    use std::path::Path;

    #[test]
    fn a_missing_program_names_its_package() {
        let err = server_binary(BackendKind::Etcd)
            .resolve(Some(Path::new("/nonexistent/etcd-nope")))
            .unwrap_err();
        assert!(err.is_environment());
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/etcd-nope"), "{msg}");
        assert!(msg.contains("apt-get install etcd-server"), "{msg}");
    }

    #[test]
    fn the_environment_overrides_the_default_and_explicit_overrides_both() {
        let redis = server_binary(BackendKind::Redis);
        let env = Some("/nonexistent/from-env".into());
        let err = redis.resolve_from(None, env.clone()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("$LOCKCHECK_REDIS_SERVER = /nonexistent/from-env"),
            "{msg}"
        );
        assert!(msg.contains("apt-get install redis-server"), "{msg}");
        assert_eq!(
            redis.resolve_from(Some(Path::new("/bin/sh")), env).unwrap(),
            Path::new("/bin/sh")
        );
        // Set but empty counts as unset.
        let found = redis.resolve_from(None, Some("".into()));
        assert_eq!(found.ok(), find_executable(Path::new("redis-server")));
    }

    #[test]
    fn a_bare_name_is_looked_up_on_path() {
        // `sh` is on every PATH this runs on; a bare name that is nowhere is missing.
        assert!(find_executable(Path::new("sh")).is_some());
        assert!(find_executable(Path::new("lockcheck-no-such-server")).is_none());
    }
}
