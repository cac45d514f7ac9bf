//! Every key a workload file takes, with its type, default, allowed values and
//! meaning: the one source of docs/workload-keys.md (tests/workload_keys_doc.rs
//! fails while the page is stale). The tests below hold the table to the reader
//! both ways: every key here is one `raw`'s types accept with its example value,
//! and every key they accept is here (as their unknown-key errors list them).
//! Allowed values come from the code's own lists (the enums, the backends, the
//! anomaly kinds, the presets, the fault catalogue), never typed in again.

use super::raw;
use lockcheck_check::AnomalyKind;
use lockcheck_servers::backend::BackendKind;
use serde::de::DeserializeOwned;

/// One key of one table of the workload file.
pub struct Key {
    /// The table: `""` for the top level, `"faults"` for every `[[faults]]` entry.
    pub section: &'static str,
    pub name: &'static str,
    pub ty: &'static str,
    /// `"required"`, or what applies without it.
    pub default: &'static str,
    pub allowed: Allowed,
    pub doc: &'static str,
    /// A TOML value the reader takes (the tests parse it).
    pub example: &'static str,
}

/// The values a key takes.
pub enum Allowed {
    /// Any value of its type (within the limits its doc states).
    Any,
    /// The names a list of the code's gives.
    Names(fn() -> Vec<String>),
}

/// The names a serde enum takes, as its own "unknown variant" error lists them.
fn variants<T: DeserializeOwned>() -> Vec<String> {
    let probe = serde::de::value::StrDeserializer::<serde::de::value::Error>::new("\u{1}");
    let Err(e) = T::deserialize(probe) else {
        return Vec::new();
    };
    backticked(&e.to_string())
}

/// The `` `names` `` after "expected" in a serde error.
fn backticked(message: &str) -> Vec<String> {
    let Some((_, expected)) = message.split_once("expected") else {
        return Vec::new();
    };
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

fn backends() -> Vec<String> {
    BackendKind::ALL.iter().map(|k| k.to_string()).collect()
}

fn anomaly_kinds() -> Vec<String> {
    AnomalyKind::ALL
        .iter()
        .map(|k| k.name().to_string())
        .collect()
}

/// A duration, or a preset's name.
fn leases() -> Vec<String> {
    let mut names = vec!["a duration".to_string()];
    names.extend(
        super::preset::lease_presets()
            .iter()
            .map(|p| p.name.to_string()),
    );
    names
}

fn fault_kinds() -> Vec<String> {
    lockcheck_fault::catalogue::CATALOGUE
        .iter()
        .map(|k| k.name.to_string())
        .collect()
}

fn modes() -> Vec<String> {
    variants::<lockcheck_resource::Mode>()
}

const fn key(
    section: &'static str,
    name: &'static str,
    ty: &'static str,
    default: &'static str,
    allowed: Allowed,
    doc: &'static str,
    example: &'static str,
) -> Key {
    Key {
        section,
        name,
        ty,
        default,
        allowed,
        doc,
        example,
    }
}

use Allowed::{Any, Names};

const DURATION: &str = "duration";

/// Every key but a backend's own and a fault kind's own (those come from the
/// backends and the catalogue, `backend_options` and `fault_keys`).
pub const KEYS: &[Key] = &[
    key("", "name", "string", "the file's stem", Any, "Names the run and its directory.", "\"w\""),
    key("", "mode", "string", "\"lock\"", Names(variants::<raw::ModeKind>),
        "How the clients use the lock: `lock`, critical sections in turn; `election`, candidates campaign and the elected one leads (renews and acts) until deposed (`[leader]`, `[clients] on_lease_loss`; docs/election.md).",
        "\"election\""),
    key("", "duration", DURATION, "required", Any,
        "How long a run lasts (at most, with `end = \"after-effect\"`). Durations carry their unit: `\"250ms\"`, `\"2s\"`, `\"1m\"`.",
        "\"6s\""),
    key("", "end", "string", "\"duration\"", Names(variants::<raw::End>),
        "When a run ends: `duration`, after `duration`; `after-effect`, once every planned fault started: as soon as the first deposition is answered (its fault over, the successor's write applied, and every holder it deposed out of its section or with a write sent after that one judged, none with a write still on its way), else one lease plus 500 ms after the first fault occurrence is over and a holder was deposed (whichever is later); at `duration` at the latest.",
        "\"after-effect\""),
    key("", "seed", "integer", "0", Any,
        "The fault schedule's random choices (`--seed` wins).", "1"),
    key("", "allow", "list of strings", "[]", Names(anomaly_kinds),
        "Anomaly kinds the design tolerates on purpose (listed as allowed, the run still VALID): `double-holder` when fencing at the resource is what keeps it safe.",
        "[\"double-holder\"]"),
    key("", "resource", "string or table", "\"unfenced\"", Names(modes),
        "The resource the holders write to: lockcheck's own, `fenced` (rejects a token lower than one applied) or `unfenced`; or a `[resource]` table (below) to choose the resource and its fence.",
        "\"fenced\""),
    key("", "runtime", "string", "\"local\"", Names(variants::<lockcheck_servers::cluster::Runtime>),
        "Where the servers run (docs/runtimes.md); `--runtime` wins.", "\"local\""),

    key("backend", "kind", "string", "required", Names(backends),
        "The lock service (docs/backends.md; `lockcheck doctor` lists them). One that hands out no lock takes `mode = \"election\"` only.",
        "\"redis\""),
    key("backend", "nodes", "integer", "the backend's usual number", Any,
        "How many server nodes, where the backend allows another number.", "3"),
    key("backend", "lease", "duration or preset", "required", Names(leases),
        "How long a grant lasts, or a preset's name: the settings a backend's users run (docs/workloads.md lists them with their sources); a preset made for one backend is refused on another.",
        "\"2s\""),
    key("backend", "renew_every", DURATION, "the preset's, else none", Any,
        "Renew the lease this often during a long hold.", "\"300ms\""),
    key("backend", "renew", "string", "\"section\"", Names(variants::<raw::Renew>),
        "Who renews: `section`, the holder between its writes, and a renewal refused or unanswered ends its section; `background`, its lock client on its own every `renew_every` (a third of the lease unless given), as a library's watchdog does, the holder writing on and learning nothing of a failed renewal. Lock mode only.",
        "\"background\""),
    key("backend", "fencing_token", "bool", "the backend's", Any,
        "Whether grants carry a fencing token.", "true"),
    key("backend", "acquire_timeout", DURATION, "\"1s\"", Any,
        "How long one acquire waits.", "\"500ms\""),
    key("backend", "endpoints", "list of strings", "none", Any,
        "`runtime = \"external\"`: the addresses of servers someone else runs.", "[\"127.0.0.1:6379\"]"),
    key("backend", "image", "string", "the backend's", Any,
        "`runtime = \"docker\"`: the image the nodes run (`--image` wins).", "\"redis:7\""),
    key("backend", "network", "string", "\"loopback\"", Names(variants::<lockcheck_servers::cluster::NetworkKind>),
        "Local runtime: `namespaces` puts each node in a network namespace of its own, so `partition-nodes` can cut links between nodes and `latency-nodes` slow them.",
        "\"namespaces\""),
    key("backend", "monotonic_offset", "signed duration, or a table of them by node", "none", Any,
        "Local runtime: every node (or each node named: `{ n1 = \"+600s\", n3 = \"-60s\" }`) starts in a time namespace whose CLOCK_MONOTONIC and CLOCK_BOOTTIME are this far off the machine's, for the whole run, restarts too. The one clock change that reaches Go servers; realtime is untouched; a negative offset may not take the clock below 0.",
        "\"+600s\""),
    key("backend", "hosts", "list of strings", "none", Any,
        "`runtime = \"ssh\"` only: one node per host, as the SSH configuration names them; it also gives the number of nodes.",
        "[\"db1\"]"),
    key("backend", "ssh_config", "path", "~/.ssh/config, or $LOCKCHECK_SSH_CONFIG", Any,
        "ssh runtime: the SSH configuration, relative to the workload file.", "\"ssh_config\""),
    key("backend", "program", "path", "the backend's server program", Any,
        "ssh runtime: the server program on the hosts.", "\"/usr/bin/redis-server\""),
    key("backend", "remote_dir", "path", "\"/tmp\"", Any,
        "ssh runtime: where the nodes' data go on the hosts.", "\"/var/tmp\""),
    key("backend", "manage", "bool", "true", Any,
        "ssh runtime: `false` uses the servers already running on the hosts (found by the backend's port) and starts and stops none: no kill, node clock, latency-nodes or freezer.",
        "false"),

    key("clients", "count", "integer", "required", Any, "How many lock clients (workers).", "3"),
    key("clients", "op_timeout", DURATION, "none", Any,
        "No reply by then: the op is recorded as unknown (`info`) and its client id retired.", "\"10s\""),
    key("clients", "self_fencing_margin", DURATION, "none", Any,
        "Each worker checks its own lease deadline, less this margin, before each write.", "\"200ms\""),
    key("clients", "self_fencing", "string", "none", Names(variants::<raw::SelfFencing>),
        "With `[client]`: each holder asks its lock library (`held`) before each write and stops writing when it says no.",
        "\"library\""),
    key("clients", "on_lease_loss", "string", "\"ignore\"", Names(variants::<raw::OnLeaseLoss>),
        "Election only: `ignore`, the leader goes on acting whatever its renewals say; `exit`, it resigns at once when a renewal fails (or, with `self_fencing_margin`, when its own deadline passed before an act), then campaigns again.",
        "\"exit\""),
    key("clients", "clients_on", "string", "\"controller\"", Any,
        "ssh runtime: `hosts` runs the workers on the hosts (client i on host i mod n): no partition, latency, partition-nodes, latency-nodes, client clock or `[client]`.",
        "\"hosts\""),

    key("client", "command", "list of strings", "required", Any,
        "A lock library of your own, through an adapter program (docs/clients.md); relative paths are the workload file's folder's.",
        "[\"python3\", \"lock.py\"]"),
    key("client", "dir", "path", "the workload file's folder", Any,
        "The folder the adapter runs in, which its relative paths are taken from (relative: to the workload file's folder).",
        "\"adapters\""),

    key("critical_section", "hold", DURATION, "required", Any,
        "Lock mode: acquire to release, the writes spread over it.", "\"300ms\""),
    key("critical_section", "writes", "integer", "required", Any,
        "Writes to the resource per critical section.", "3"),
    key("critical_section", "think", DURATION, "0", Any,
        "Between a release and the next acquire.", "\"50ms\""),

    key("leader", "act_every", DURATION, "\"200ms\"", Any,
        "Election only: between two acts (writes with its token) of the leader.", "\"200ms\""),

    key("resource", "kind", "string", "\"lockcheck\"", Names(variants::<lockcheck_resource::Kind>),
        "Which resource: `lockcheck`, its own server; `postgres`, a private PostgreSQL server the workers UPDATE themselves.",
        "\"postgres\""),
    key("resource", "fence", "string", "required", Names(variants::<lockcheck_resource::Fence>),
        "`<=`: a write's token must be at least the highest applied (a holder writes as often as it likes with its token); `<`: above it (each token writes once); `none`: no token condition.",
        "\"<=\""),

    key("schedule", "mix", "string", "required", Names(variants::<raw::MixKind>),
        "Lay every `[[faults]]` entry out from the seed instead of each entry's `after` / `interval`: `random` (seeded) or `interval` (in turn). Every entry must start at least once.",
        "\"random\""),
    key("schedule", "gap", DURATION, "required", Any,
        "The mean gap between faults (random) or the gap (interval).", "\"2s\""),
    key("schedule", "quiet", DURATION, "\"1s\"", Any, "Nothing before this.", "\"1s\""),
    key("schedule", "heal", DURATION, "0", Any,
        "Every fault healed this long before the end.", "\"2s\""),

    key("faults", "kind", "string", "required", Names(fault_kinds),
        "The fault (docs/faults.md); its own keys are listed below.", "\"pause\""),
    key("faults", "duration", DURATION, "required", Any,
        "How long each occurrence lasts; longer than 0. Every fault must be due before the run ends and over by then.",
        "\"2500ms\""),
    key("faults", "after", DURATION, "\"1s\"", Any,
        "The quiet period before its first occurrence (not with `[schedule]`).", "\"1s\""),
    key("faults", "interval", DURATION, "none: once", Any,
        "The gap between occurrences (not with `[schedule]`).", "\"1s\""),

    key("incident", "source", "string", "required", Any,
        "The published failure the workload replays; the report's guidance names it.",
        "\"etcd issue 15247\""),
    key("incident", "rule", "string", "required", Any,
        "The design rule that prevents it.", "\"fence by token\""),
];

/// The tables in the page's order, with what each is.
pub const SECTIONS: &[(&str, &str)] = &[
    ("", "The top level"),
    ("backend", "`[backend]`: the lock service"),
    ("clients", "`[clients]`"),
    ("client", "`[client]`: your own lock library (optional)"),
    ("critical_section", "`[critical_section]`: lock mode (the default); an election has `[leader]` instead"),
    ("leader", "`[leader]`: election mode (optional)"),
    ("resource", "`[resource]`: instead of `resource = \"...\"`, to choose the resource and its fence (optional)"),
    ("schedule", "`[schedule]` (optional)"),
    ("faults", "`[[faults]]`: each entry"),
    ("incident", "`[incident]` (optional)"),
];

/// A backend's own `[backend]` keys, each with the backends that read it.
pub fn backend_options() -> Vec<(&'static str, Vec<String>)> {
    let mut keys: Vec<(&str, Vec<String>)> = Vec::new();
    for kind in BackendKind::ALL {
        for k in kind.option_keys() {
            match keys.iter_mut().find(|(name, _)| *name == k) {
                Some((_, owners)) => owners.push(kind.to_string()),
                None => keys.push((k, vec![kind.to_string()])),
            }
        }
    }
    keys.sort();
    keys
}

/// Each fault kind with its own keys (besides `kind` and the timing keys).
pub fn fault_keys() -> Vec<(&'static str, &'static [&'static str])> {
    lockcheck_fault::catalogue::CATALOGUE
        .iter()
        .map(|k| (k.name, k.keys))
        .collect()
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn code_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| {
            if n.contains(' ') {
                n.clone()
            } else {
                format!("`{n}`")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// docs/workload-keys.md, whole.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Workload keys\n\n\
         <!-- Generated from crates/lockcheck-run/src/workload/keys.rs: edit there, then \
         `LOCKCHECK_BLESS=1 cargo test --test workload_keys_doc` rewrites this page \
         (the test fails while it is stale). -->\n\n\
         Every key a workload file takes. An unknown key, or a value of another type, \
         is refused with the file, the line and the key; the allowed values are the \
         code's own lists. Durations carry their unit (`\"250ms\"`, `\"2s\"`, `\"1m\"`). \
         How to write a workload: [workloads.md](workloads.md).\n",
    );
    for (section, title) in SECTIONS {
        out += &format!(
            "\n## {title}\n\n| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n"
        );
        for k in KEYS.iter().filter(|k| k.section == *section) {
            let allowed = match &k.allowed {
                Any => String::new(),
                Names(list) => code_list(&list()),
            };
            // A default that is a TOML value is shown as code; words as words.
            let literal = k.default.starts_with(['"', '['])
                || k.default.parse::<f64>().is_ok()
                || ["true", "false"].contains(&k.default);
            let default = if literal {
                format!("`{}`", k.default)
            } else {
                k.default.to_string()
            };
            out += &format!(
                "| `{}` | {} | {} | {} | {} |\n",
                k.name,
                k.ty,
                cell(&default),
                cell(&allowed),
                cell(k.doc)
            );
        }
        if *section == "backend" {
            out += "\nA backend's own keys, which it reads and checks itself \
                    ([backends.md](backends.md)):\n\n| key | backends |\n|---|---|\n";
            for (name, owners) in backend_options() {
                out += &format!("| `{name}` | {} |\n", code_list(&owners));
            }
        }
        if *section == "faults" {
            out += "\nEach kind's own keys ([faults.md](faults.md)):\n\n\
                    | kind | keys |\n|---|---|\n";
            for (kind, keys) in fault_keys() {
                let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
                out += &format!("| `{kind}` | {} |\n", code_list(&keys));
            }
            out += "\nThe server nodes a node fault hits (`nodes`):\n\n| `nodes` | picks |\n|---|---|\n";
            for (word, picks) in lockcheck_fault::node::TARGET_WORDS {
                out += &format!("| `{word}` | {} |\n", cell(picks));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The least a workload has: what the reader requires.
    const LEAST: &str =
        "duration = \"1s\"\n[backend]\nkind = \"redis\"\nlease = \"1s\"\n[clients]\ncount = 1\n";

    /// LEAST with `section`'s every key at its example (a required table's keys
    /// replace LEAST's own lines of it).
    fn with_every_key_of(section: &str) -> String {
        let lines: Vec<String> = KEYS
            .iter()
            .filter(|k| k.section == section)
            .map(|k| format!("{} = {}", k.name, k.example))
            .collect();
        let body = lines.join("\n");
        match section {
            "" => format!("{body}\n[backend]\nkind = \"redis\"\nlease = \"1s\"\n[clients]\ncount = 1\n"),
            "backend" => format!("duration = \"1s\"\n[backend]\n{body}\n[clients]\ncount = 1\n"),
            "clients" => format!("duration = \"1s\"\n[backend]\nkind = \"redis\"\nlease = \"1s\"\n[clients]\n{body}\n"),
            "faults" => format!("{LEAST}[[faults]]\n{body}\n"),
            _ => format!("{LEAST}[{section}]\n{body}\n"),
        }
    }

    fn parse(text: &str) -> Result<raw::Workload, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn every_key_of_the_table_is_one_the_reader_takes_with_its_example() {
        for (section, _) in SECTIONS {
            let text = with_every_key_of(section);
            let w = parse(&text).unwrap_or_else(|e| panic!("[{section}]:\n{text}\n{e}"));
            if *section == "backend" {
                // [backend] passes what it does not know to the backend's own options:
                // every key here must be one the table itself reads.
                let left: Vec<&String> = w.backend.options.keys().collect();
                assert!(
                    left.is_empty(),
                    "[backend] keys not read by raw::Backend: {left:?}"
                );
            }
        }
        let w = parse(&with_every_key_of("faults")).unwrap();
        let entry: Vec<String> = w.faults[0]
            .get_ref()
            .keys()
            .map(|k| k.get_ref().clone())
            .collect();
        let timing: Vec<&str> = KEYS
            .iter()
            .filter(|k| k.section == "faults" && k.name != "kind")
            .map(|k| k.name)
            .collect();
        assert_eq!(
            timing,
            super::super::faults::TIMING.to_vec(),
            "[[faults]] timing keys"
        );
        assert!(entry.contains(&"kind".to_string()));
    }

    /// The keys `section`'s reader lists when it refuses an unknown one.
    fn accepted(section: &str) -> Vec<String> {
        let text = match section {
            "" => format!("zz_unknown = 1\n{LEAST}"),
            "clients" => format!("{LEAST}zz_unknown = 1\n"),
            _ => {
                let required: Vec<String> = KEYS
                    .iter()
                    .filter(|k| k.section == section && k.default == "required")
                    .map(|k| format!("{} = {}", k.name, k.example))
                    .collect();
                format!(
                    "{LEAST}[{section}]\n{}\nzz_unknown = 1\n",
                    required.join("\n")
                )
            }
        };
        let e = parse(&text)
            .err()
            .unwrap_or_else(|| panic!("[{section}] took zz_unknown"));
        // The top level lists the tables among its keys: sections here, but for
        // `resource`, which is a key as well as a table.
        let table_only = |k: &str| {
            SECTIONS.iter().any(|(s, _)| *s == k)
                && !KEYS.iter().any(|t| t.section == section && t.name == k)
        };
        let listed: Vec<String> = backticked(e.message())
            .into_iter()
            .filter(|k| k != "zz_unknown" && !table_only(k))
            .collect();
        assert!(!listed.is_empty(), "[{section}]: {e}");
        listed
    }

    #[test]
    fn every_key_the_reader_takes_is_in_the_table() {
        for (section, _) in SECTIONS {
            let mut tabled: Vec<String> = KEYS
                .iter()
                .filter(|k| k.section == *section)
                .map(|k| k.name.to_string())
                .collect();
            let mut read = match *section {
                // [backend] hands unknown keys to the backend, which lists its own and
                // raw::BACKEND_KEYS; a [[faults]] entry is read by its kind.
                "backend" => raw::BACKEND_KEYS.iter().map(|k| k.to_string()).collect(),
                "faults" => {
                    let mut keys = vec!["kind".to_string()];
                    keys.extend(super::super::faults::TIMING.iter().map(|k| k.to_string()));
                    keys
                }
                _ => accepted(section),
            };
            tabled.sort();
            read.sort();
            assert_eq!(tabled, read, "[{section}]: the table and the reader differ");
        }
    }

    #[test]
    fn every_allowed_list_has_names() {
        for k in KEYS {
            if let Names(list) = &k.allowed {
                assert!(!list().is_empty(), "{}.{}", k.section, k.name);
            }
        }
        assert!(backend_options().iter().any(|(k, _)| *k == "persistence"));
        assert!(fault_keys()
            .iter()
            .any(|(k, keys)| *k == "pause" && keys.contains(&"target")));
    }
}
