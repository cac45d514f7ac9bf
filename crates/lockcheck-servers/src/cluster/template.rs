//! Data directories from a template: a database node's one-off initialisation
//! (`initdb`, `mariadb-install-db`) costs every run seconds of CPU for the same
//! files each time, so it runs once per server and initialisation command, into a
//! cache, and each node after that starts from a verified copy.
//!
//! The cache is `$LOCKCHECK_TEMPLATE_CACHE`, else `$XDG_CACHE_HOME/lockcheck/templates`,
//! else `~/.cache/lockcheck/templates` (the image build's cache is beside it). A
//! template is keyed by what made it: the server program and the initialisation
//! program (each by path, size and modification time, so that an upgraded server
//! never starts from an older one's files), the command's arguments (the node's
//! data directory written as `{data}`) and the account it ran as. The key is
//! stored with the template and compared in full: a hash names the directory only.
//!
//! A template appears whole or not at all: it is made under a temporary name and
//! renamed into place, with the list of its files (path, kind, size, mode, owner).
//! Every copy is checked against that list; a copy that differs is emptied and the
//! node initialised as if there were no template.

use super::node::NodeSpec;
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The file in a template that holds its key.
const KEY: &str = "key";
/// The file in a template that lists its data's files.
const MANIFEST: &str = "manifest";
/// The template's copy of an initialised data directory.
const DATA: &str = "data";

/// Initialises `node`'s empty data directory with `init` (run to the end, as
/// `what`), from the template of `server` and `init` when the cache has it, else
/// by running it and keeping the result as the template.
pub(super) async fn init(init: Command, node: &NodeSpec, what: &str, server: &Path) -> Result<()> {
    let template = cache_dir().and_then(|c| Template::of(&c, &init, &node.data_dir, server));
    let Some(template) = template else {
        return super::setup::run_to_end(init, node, what).await;
    };
    let data = node.data_dir.clone();
    let t = template.clone();
    match tokio::task::spawn_blocking(move || t.copy_to(&data)).await? {
        Ok(true) => return Ok(()),
        Ok(false) => {}
        Err(e) => {
            tracing::warn!("{e:#}: initialising {} with {what} instead", node.name);
            super::node::empty(&node.data_dir)?;
        }
    }
    super::setup::run_to_end(init, node, what).await?;
    let data = node.data_dir.clone();
    let saved = tokio::task::spawn_blocking(move || template.save_from(&data)).await?;
    // Without a template the next run initialises again: slower, not wrong.
    if let Err(e) = saved {
        tracing::warn!("keeping {what}'s result as a template: {e:#}");
    }
    Ok(())
}

/// One template in the cache: its directory and the key it must hold.
#[derive(Clone)]
struct Template {
    dir: PathBuf,
    key: String,
}

impl Template {
    /// The template in `cache` that `init` of a node's `data_dir` would make for
    /// `server`; none when a program cannot be looked at.
    fn of(cache: &Path, init: &Command, data_dir: &Path, server: &Path) -> Option<Template> {
        let program = super::recipe::find_executable(Path::new(init.get_program()))?;
        let data = data_dir.to_str()?;
        let args: Vec<String> = init
            .get_args()
            .map(|a| a.to_string_lossy().replace(data, "{data}"))
            .collect();
        let key = format!(
            "server {}\ninit {}\nargs {}\nuid {}\n",
            identity(server)?,
            identity(&program)?,
            args.join(" "),
            nix::unistd::geteuid(),
        );
        let name = format!("{:x}", Sha256::digest(key.as_bytes()));
        Some(Template {
            dir: cache.join(&name[..16]),
            key,
        })
    }

    /// Copies the template's data into the empty `data_dir` and checks the copy
    /// against the template's list; false when the cache has no such template.
    fn copy_to(&self, data_dir: &Path) -> Result<bool> {
        let Ok(key) = fs::read_to_string(self.dir.join(KEY)) else {
            return Ok(false);
        };
        if key != self.key {
            bail!(
                "the template {} was made by another server or command",
                self.dir.display()
            );
        }
        let manifest = fs::read_to_string(self.dir.join(MANIFEST))
            .with_context(|| format!("reading {}", self.dir.join(MANIFEST).display()))?;
        copy_tree(&self.dir.join(DATA), data_dir)
            .with_context(|| format!("copying the template {}", self.dir.display()))?;
        if list(data_dir)? != manifest {
            bail!(
                "the copy of the template {} in {} differs from its list of files",
                self.dir.display(),
                data_dir.display()
            );
        }
        Ok(true)
    }

    /// Keeps a freshly initialised `data_dir` as the template: copied under a
    /// temporary name, checked, then renamed into place (another run that got
    /// there first keeps its own).
    fn save_from(&self, data_dir: &Path) -> Result<()> {
        let cache = self
            .dir
            .parent()
            .context("a template has a cache directory")?;
        fs::create_dir_all(cache).with_context(|| format!("creating {}", cache.display()))?;
        remove_abandoned(cache);
        let tmp = cache.join(format!(
            "{}.tmp-{}",
            self.dir.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let made = (|| {
            copy_tree(data_dir, &tmp.join(DATA))?;
            let manifest = list(data_dir)?;
            if list(&tmp.join(DATA))? != manifest {
                bail!("the copy of {} differs from it", data_dir.display());
            }
            fs::write(tmp.join(MANIFEST), manifest)?;
            fs::write(tmp.join(KEY), &self.key)?;
            Ok(())
        })();
        let placed = made.and_then(|()| {
            fs::rename(&tmp, &self.dir)
                .with_context(|| format!("renaming {} to {}", tmp.display(), self.dir.display()))
        });
        if placed.is_err() {
            let _ = fs::remove_dir_all(&tmp);
        }
        // Another run's template of the same key is as good as ours.
        placed.or_else(|e| {
            if self.dir.join(KEY).exists() {
                Ok(())
            } else {
                Err(e)
            }
        })
    }
}

/// Where templates are kept; none when there is no home to keep them in.
fn cache_dir() -> Option<PathBuf> {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("LOCKCHECK_TEMPLATE_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("lockcheck/templates")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/lockcheck/templates")))
}

/// A program's path, size and modification time: another build or version of it
/// differs in one of them.
fn identity(program: &Path) -> Option<String> {
    let path = fs::canonicalize(program).ok()?;
    let meta = path.metadata().ok()?;
    Some(format!(
        "{} {} {}.{:09}",
        path.display(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec()
    ))
}

/// Every entry under `root` (itself first), sorted, one a line: its relative
/// path, kind, size (files), mode and owner.
fn list(root: &Path) -> Result<String> {
    let mut lines = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(path) = todo.pop() {
        let meta = fs::symlink_metadata(&path)
            .with_context(|| format!("looking at {}", path.display()))?;
        let kind = if meta.is_dir() {
            for entry in
                fs::read_dir(&path).with_context(|| format!("listing {}", path.display()))?
            {
                todo.push(entry?.path());
            }
            "dir".to_string()
        } else if meta.is_file() {
            format!("file {}", meta.len())
        } else {
            "other".to_string()
        };
        let rel = path.strip_prefix(root).unwrap_or(&path);
        lines.push(format!(
            "{}\t{kind}\t{:o}\t{}:{}",
            rel.display(),
            meta.permissions().mode(),
            meta.uid(),
            meta.gid()
        ));
    }
    lines.sort();
    Ok(lines.join("\n") + "\n")
}

/// Copies the directory tree `from` into `to` (made if missing), with each
/// entry's mode and owner: a server checks its data directory's (PostgreSQL
/// refuses one others may read) and may run as another account than lockcheck.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    if !to.exists() {
        fs::create_dir(to).with_context(|| format!("creating {}", to.display()))?;
    }
    for entry in fs::read_dir(from).with_context(|| format!("listing {}", from.display()))? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let meta = entry.metadata()?;
        if meta.is_dir() {
            copy_tree(&src, &dst)?;
        } else if meta.is_file() {
            fs::copy(&src, &dst)
                .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
        } else {
            bail!("{}: only files and directories are copied", src.display());
        }
    }
    let meta = fs::metadata(from)?;
    fs::set_permissions(to, meta.permissions())?;
    own_like(to, &meta)?;
    for entry in fs::read_dir(to)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            own_like(&entry.path(), &fs::metadata(from.join(entry.file_name()))?)?;
        }
    }
    Ok(())
}

/// Gives `path` the owner of `like`, when it differs (only root can).
fn own_like(path: &Path, like: &fs::Metadata) -> Result<()> {
    let meta = fs::symlink_metadata(path)?;
    if (meta.uid(), meta.gid()) == (like.uid(), like.gid()) {
        return Ok(());
    }
    nix::unistd::chown(
        path,
        Some(nix::unistd::Uid::from_raw(like.uid())),
        Some(nix::unistd::Gid::from_raw(like.gid())),
    )
    .with_context(|| format!("giving {} its template's owner", path.display()))
}

/// Removes the temporary templates of runs that are gone (killed while saving).
fn remove_abandoned(cache: &Path) {
    let Ok(entries) = fs::read_dir(cache) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((_, pid)) = name.rsplit_once(".tmp-") else {
            continue;
        };
        if pid
            .parse::<u32>()
            .is_ok_and(|p| !Path::new(&format!("/proc/{p}")).exists())
        {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An initialisation program that writes a few files, as initdb would.
    fn init_of(data: &Path) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("mkdir -p \"$0/base\" && echo 15 > \"$0/PG_VERSION\" && head -c 5000 /dev/zero > \"$0/base/1\" && chmod 700 \"$0\"")
            .arg(data);
        c
    }

    fn initialised(root: &Path, name: &str) -> PathBuf {
        let data = root.join(name);
        fs::create_dir_all(&data).unwrap();
        assert!(init_of(&data).status().unwrap().success());
        data
    }

    #[test]
    fn a_copy_of_a_template_is_what_the_initialisation_made() {
        let tmp = tempfile::tempdir().unwrap();
        let (cache, server) = (tmp.path().join("cache"), Path::new("/bin/sh"));
        let first = initialised(tmp.path(), "n1");
        let t = Template::of(&cache, &init_of(&first), &first, server).unwrap();
        assert!(
            !t.copy_to(&tmp.path().join("unused")).unwrap(),
            "no template yet"
        );
        t.save_from(&first).unwrap();
        // Another node's directory names the same template: its path is `{data}`.
        let second = tmp.path().join("n2");
        fs::create_dir(&second).unwrap();
        let t2 = Template::of(&cache, &init_of(&second), &second, server).unwrap();
        assert_eq!(t2.dir, t.dir);
        assert!(t2.copy_to(&second).unwrap());
        assert_eq!(list(&second).unwrap(), list(&first).unwrap());
        assert_eq!(fs::read(second.join("base/1")).unwrap().len(), 5000);
    }

    #[test]
    fn another_server_or_command_has_a_template_of_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let data = initialised(tmp.path(), "n1");
        let sh = Template::of(&cache, &init_of(&data), &data, Path::new("/bin/sh")).unwrap();
        let other = Template::of(&cache, &init_of(&data), &data, Path::new("/bin/true")).unwrap();
        assert_ne!(sh.dir, other.dir);
        let mut longer = init_of(&data);
        longer.arg("--option");
        let longer = Template::of(&cache, &longer, &data, Path::new("/bin/sh")).unwrap();
        assert_ne!(sh.dir, longer.dir);
        // A key that does not match what the directory holds is refused.
        sh.save_from(&data).unwrap();
        let forged = Template {
            dir: sh.dir.clone(),
            key: other.key.clone(),
        };
        let into = tmp.path().join("n2");
        fs::create_dir(&into).unwrap();
        assert!(forged.copy_to(&into).is_err());
    }

    #[test]
    fn a_damaged_template_is_found_out_on_copy() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let data = initialised(tmp.path(), "n1");
        let t = Template::of(&cache, &init_of(&data), &data, Path::new("/bin/sh")).unwrap();
        t.save_from(&data).unwrap();
        fs::write(t.dir.join(DATA).join("base/1"), b"short").unwrap();
        let into = tmp.path().join("n2");
        fs::create_dir(&into).unwrap();
        let err = t.copy_to(&into).unwrap_err();
        assert!(
            format!("{err:#}").contains("differs from its list"),
            "{err:#}"
        );
    }
}
