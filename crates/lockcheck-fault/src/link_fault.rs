//! The link faults (`partition`, `latency`): client-to-node links of the run's
//! proxies cut or slowed, a client's or some nodes' (picked through
//! [`super::node`], which reads from the proxies whom the holder talks to: kept
//! apart from the proxies so that neither file imports the other around a loop).

use super::node::{self, NodeTarget};
use super::proxy::{mode_value, LinkId, Mode, Proxies};
use super::spec::{Entry, Setting};
use super::{Fault, Scene, Target};
use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use lockcheck_journal::{Effect, Journal};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

/// Which client-to-node links a link fault hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Links {
    /// Every client's links to these nodes: the nodes are cut off from the clients.
    ToNodes(NodeTarget),
    /// This client's links to every node: the client is cut off (the holder,
    /// right after it acquires, for the adversarial schedule).
    FromClient(Target),
}

impl Links {
    /// The links of a `partition` or `latency` entry: a client's (`target`) or
    /// nodes' (`nodes`), one of the two.
    pub(super) fn read(entry: &mut Entry<'_>, setting: &Setting) -> Result<Links> {
        let target = entry.target(setting)?;
        let nodes = entry.take::<NodeTarget>("nodes")?;
        match (target, nodes) {
            (Some(t), None) => Ok(Links::FromClient(t)),
            (None, Some(n)) => Ok(Links::ToNodes(n)),
            _ => Err(entry.bad("nodes", "a link fault cuts either a client off (`target`: \"holder\", \"random\", \"client-N\") or nodes off (`nodes`): give one of them")),
        }
    }
}

/// Cuts (black hole or reset) or slows client-to-node links; heals them when it
/// ends. Recorded as nemesis `partition` / `heal`, or `latency` / `heal`.
pub struct LinkFault {
    links: Links,
    mode: Mode,
    active: Vec<(LinkId, u64)>,
    proxies: Option<Arc<Proxies>>,
    journal: Option<Arc<Journal>>,
}

impl LinkFault {
    pub fn new(links: Links, mode: Mode) -> LinkFault {
        LinkFault {
            links,
            mode,
            active: Vec::new(),
            proxies: None,
            journal: None,
        }
    }

    fn heal_all(&mut self) -> Result<()> {
        if let Some(p) = &self.proxies {
            for (id, journal_id) in self.active.drain(..) {
                if let Some(link) = p.get(&id) {
                    link.set(Mode::Pass);
                }
                if let Some(j) = &self.journal {
                    j.undone(journal_id)?;
                }
            }
        }
        Ok(())
    }

    fn names(&self) -> Vec<String> {
        self.active.iter().map(|(id, _)| id.to_string()).collect()
    }

    /// The (targets, links) this fault hits in `scene` now, and the run directory.
    async fn aim(
        &self,
        scene: &mut Scene<'_>,
    ) -> Result<Option<(Vec<String>, Vec<LinkId>, PathBuf)>> {
        let Some(cluster) = scene.cluster else {
            bail!("a link fault needs the run's cluster");
        };
        let (dir, nodes) = {
            let c = cluster.lock().await;
            (c.dir().to_path_buf(), c.node_names())
        };
        let clients: Vec<String> = scene.clients.iter().map(|c| c.name.clone()).collect();
        Ok(match &self.links {
            Links::ToNodes(target) => node::pick(target, scene).await?.map(|(picked, _)| {
                let ids = clients
                    .iter()
                    .flat_map(|c| picked.iter().map(move |n| LinkId::new(c, n)))
                    .collect();
                (picked, ids, dir)
            }),
            Links::FromClient(target) => target.pick_client(scene).map(|slot| {
                let c = &clients[slot];
                let ids = nodes.iter().map(|n| LinkId::new(c, n)).collect();
                (vec![c.clone()], ids, dir)
            }),
        })
    }
}

#[async_trait]
impl Fault for LinkFault {
    fn target(&self) -> &Target {
        match &self.links {
            Links::ToNodes(_) => &node::TIMED,
            Links::FromClient(t) => t,
        }
    }

    async fn start(&mut self, scene: &mut Scene<'_>) -> Result<Option<Value>> {
        let Some((names, ids, dir)) = self.aim(scene).await? else {
            return Ok(None);
        };
        let proxies = Proxies::of_run(&dir).with_context(|| {
            format!(
                "a link fault needs the run's proxies ({} has none)",
                dir.display()
            )
        })?;
        let journal = Journal::for_run(&dir)?;
        for id in ids {
            let link = proxies
                .get(&id)
                .with_context(|| format!("no proxied link {id}"))?;
            let journal_id = journal.record(Effect::Link {
                link: id.to_string(),
                mode: format!("{:?}", self.mode),
            })?;
            link.set(self.mode);
            self.active.push((id, journal_id));
        }
        self.proxies = Some(proxies);
        self.journal = Some(journal);
        let mut value = json!({ "targets": names, "links": self.names() });
        mode_value(self.mode, &mut value);
        Ok(Some(value))
    }

    async fn stop(&mut self, _scene: &mut Scene<'_>) -> Result<Value> {
        let value = json!({ "links": self.names() });
        self.heal_all()?;
        Ok(value)
    }
}

impl Drop for LinkFault {
    fn drop(&mut self) {
        let _ = self.heal_all();
    }
}
