//! Renders a report in headless Chromium (Debian's `chromium`) and reads back what the
//! page's script marked on `<body>` once it had drawn: the browser test and the
//! report bench use it to prove the page works in a real browser.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The DOM after load (scripts run), and the `data-*` attributes of `<body>`.
pub struct Rendered {
    pub dom: String,
    pub body: BTreeMap<String, String>,
}

/// Loads `file` (with an optional `#fragment`) in headless Chromium with its own
/// throw-away profile, gives up after `timeout`, and optionally takes a screenshot.
pub fn render(
    file: &Path,
    fragment: &str,
    screenshot: Option<(&Path, u32, u32)>,
    timeout: Duration,
) -> Result<Rendered> {
    let profile = Profile::new()?;
    let url = format!("file://{}{fragment}", file.canonicalize()?.display());
    // The DOM goes to a file: a pipe nobody reads while we wait would fill up and
    // stall Chromium on a large page.
    let dom_file = profile.0.join("dom.html");
    let mut cmd = Command::new("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.0.display()))
    .stdout(std::fs::File::create(&dom_file)?)
    .stderr(Stdio::null());
    match screenshot {
        Some((png, w, h)) => cmd
            .arg(format!("--window-size={w},{h}"))
            .arg(format!("--screenshot={}", png.display())),
        None => cmd.arg("--window-size=1400,1000").arg("--dump-dom"),
    };
    let mut child = cmd.arg(&url).spawn().context("starting chromium")?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > timeout {
            // Ours to stop: the child we started, by its id.
            let _ = child.kill();
            let _ = child.wait();
            bail!("chromium did not finish loading {url} within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let dom = std::fs::read_to_string(&dom_file)?;
    if !status.success() {
        bail!("chromium exited with {status} on {url}");
    }
    Ok(Rendered {
        body: body_data(&dom),
        dom,
    })
}

/// A throw-away Chromium profile directory, removed on drop (tests run in parallel:
/// each Chromium needs its own).
struct Profile(std::path::PathBuf);

impl Profile {
    fn new() -> Result<Profile> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("lockcheck-chromium-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Profile(dir))
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `data-*` attributes of the first `<body ...>` tag, without the prefix.
fn body_data(dom: &str) -> BTreeMap<String, String> {
    let Some(start) = dom.find("<body") else {
        return BTreeMap::new();
    };
    let tag = &dom[start..start + dom[start..].find('>').unwrap_or(0)];
    tag.split(" data-")
        .skip(1)
        .filter_map(|kv| {
            let (k, v) = kv.split_once("=\"")?;
            Some((k.to_string(), v.split('"').next()?.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_body_data_attributes() {
        let d = super::body_data(
            "<html><body data-timeline=\"drawn\" data-fault-bands=\"3\" class=\"x\"><p>",
        );
        assert_eq!(d["timeline"], "drawn");
        assert_eq!(d["fault-bands"], "3");
        assert_eq!(d.len(), 2);
    }
}
