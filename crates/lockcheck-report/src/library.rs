//! What the lock library under test believed (an adapter's `held`, asked before each
//! write) next to what the lock service did (the zombie windows): for each deposed
//! holder, did its own library say it had lost the lock before its next write?

use super::text::{count, escape};
use super::zombies::ZombieWindows;
use lockcheck_history::{f, History, OpType, Process};
use lockcheck_rundir::ClientInfo;
use serde::{Deserialize, Serialize};

/// The library's view of the deposed holders of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibraryBelief {
    /// Deposed holders whose library was asked (`held`) after they were deposed.
    pub asked: usize,
    /// Of those, the ones whose library said no before their next write (or before
    /// their section ended, when they wrote nothing more).
    pub knew: usize,
    /// The ones whose library still said yes when asked before a write.
    pub believed_held: usize,
    pub sentence: String,
}

/// Reads the `held` answers of each deposed holder after it was deposed; `None` when
/// the history has no `held` op (a built-in client, or an adapter without it).
pub fn belief(history: &History, zombies: &ZombieWindows) -> Option<LibraryBelief> {
    if !history.ops.iter().any(|o| o.f == f::HELD) {
        return None;
    }
    let (mut asked, mut knew, mut believed_held) = (0, 0, 0);
    for z in &zombies.all {
        let mine = history.ops.iter().filter(|o| {
            o.process == Process::Client(z.process) && o.time >= z.deposed_at && o.time <= z.until
        });
        // The library's first answer after the deposition; a write invoked before any
        // answer counts as "still held": the holder acted without being told.
        let answer = mine
            .filter_map(|o| match (o.f.as_str(), o.kind) {
                (f::WRITE, OpType::Invoke) => Some(Some(true)),
                (f::HELD, OpType::Ok) => Some(o.value.get("held").and_then(|h| h.as_bool())),
                _ => None,
            })
            .next()
            .flatten();
        match answer {
            Some(false) => {
                asked += 1;
                knew += 1;
            }
            Some(true) => {
                asked += 1;
                believed_held += 1;
            }
            None => {}
        }
    }
    let sentence = if zombies.all.is_empty() {
        "No holder was deposed: the library's answers were never put to the test.".to_string()
    } else if asked == 0 {
        format!(
            "{} deposed, and none asked its library afterwards.",
            count(zombies.all.len(), "holder was", "holders were")
        )
    } else {
        format!(
            "Of {} deposed and asked, the library said it had lost the lock before the next \
             write for {knew}, and still said it held it for {believed_held}.",
            count(asked, "holder", "holders")
        )
    };
    Some(LibraryBelief {
        asked,
        knew,
        believed_held,
        sentence,
    })
}

/// The report's panel on the lock client under test, when it is an adapter: the
/// library it named (verdict.json's `client`, written by the runner) and what it
/// believed next to what the lock service did. Empty for a built-in client.
pub fn panel(client: Option<&ClientInfo>, belief: Option<&LibraryBelief>) -> String {
    if client.is_none() && belief.is_none() {
        return String::new();
    }
    let library = client
        .and_then(|c| c.library.clone())
        .unwrap_or_else(|| "an adapter that did not name its library".into());
    let command = client.map(|c| c.command.join(" ")).unwrap_or_default();
    let heeded = match client.and_then(|c| c.self_fencing.as_deref()) {
        Some("library") => "Holders stopped writing when it said no (self_fencing = \"library\").",
        _ => "Holders wrote whatever it said.",
    };
    let believed = belief.map_or_else(
        || "It was not asked whether it still held the lock (no <code>held</code>).".to_string(),
        |b| escape(&b.sentence),
    );
    format!(
        "<section class=\"panel\" id=\"lc-library\"><h2>The lock library: {}</h2>\
         <p>Tested through its adapter <code>{}</code>. {believed} {heeded}</p></section>\n",
        escape(&library),
        escape(&command),
    )
}
