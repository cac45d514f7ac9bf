//! The table of the current audits, generated from the published scorecards
//! (docs/audits/*.json, each read by [`scorecard::read`]): README's "What the
//! audits say" and docs/audit.md's table of the newest audits. Every cell comes
//! from a scorecard, so that the table cannot say what no audit found.

use super::battery::Fencing;
use super::decide::AuditVerdict;
use super::render::wall;
use super::scorecard::{self, Scorecard};
use anyhow::{Context, Result};
use std::path::Path;

/// The marker comments the generated table sits between on a page.
pub const BEGIN: &str = "<!-- audit-table:begin -->";
pub const END: &str = "<!-- audit-table:end -->";

/// A scorecard as docs/audits publishes it.
#[derive(Debug, Clone)]
pub struct Published {
    /// Its file name in the directory: `etcd.json`.
    pub file: String,
    /// The page beside it that tells its story (`etcd.md`), if there is one.
    pub page: Option<String>,
    pub card: Scorecard,
}

/// Every scorecard in `dir` (its `*.json`; the counterexamples' directories are
/// not scorecards), by file name; the first that does not read is the error.
pub fn published(dir: &Path) -> Result<Vec<Published>> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("listing {}", dir.display()))?;
    files.retain(|f| f.ends_with(".json"));
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let card = scorecard::read(&dir.join(&file))?;
            let page = format!("{}.md", file.trim_end_matches(".json"));
            let page = dir.join(&page).exists().then_some(page);
            Ok(Published { file, page, card })
        })
        .collect()
}

/// The audit's exit code: 0 complete, 1 complete under an `--expect` it did
/// not meet, 3 not complete, 130 interrupted (`cli::audit`).
pub fn exit_code(card: &Scorecard) -> u8 {
    card.exit(expected(
        card.provenance.argv.as_deref().unwrap_or_default(),
    ))
}

/// `--expect VERDICT` (or `--expect=VERDICT`) in an audit's command line.
fn expected(argv: &[String]) -> Option<AuditVerdict> {
    let value = argv
        .iter()
        .enumerate()
        .find_map(|(i, a)| match a.as_str() {
            "--expect" => argv.get(i + 1).map(String::as_str),
            _ => a.strip_prefix("--expect="),
        })?;
    AuditVerdict::named(value)
}

/// What the scorecard found, in one line: the token's failure, the recipes
/// that broke the lock unfenced, the fenced twins flagged and those that held.
pub fn headline(card: &Scorecard) -> String {
    let mut parts: Vec<String> = Vec::new();
    let failures: Vec<String> = card
        .failures
        .iter()
        .map(|f| f.name().replace('-', " "))
        .collect();
    if !failures.is_empty() {
        parts.push(failures.join(", "));
    }
    if card.verdict == AuditVerdict::EfficiencyLockOnly {
        parts.push("no token".to_string());
    }
    let of = |fencing: Fencing| card.scenarios.iter().filter(move |c| c.fencing == fencing);
    let broke: Vec<String> = of(Fencing::Unfenced)
        .filter(|c| c.flagged > 0)
        .map(|c| match c.flagged_provoked {
            0 => format!("{} (unprovoked)", c.recipe.name()),
            _ => c.recipe.name().to_string(),
        })
        .collect();
    let unfenced = of(Fencing::Unfenced).count();
    parts.push(match broke.len() {
        0 => format!("no unfenced break in {unfenced} scenarios"),
        _ => format!("broke unfenced: {}", broke.join(", ")),
    });
    let flagged: Vec<String> = of(Fencing::Fenced)
        .filter(|c| c.flagged > 0)
        .map(|c| format!("{} ({})", c.recipe.name(), c.anomalies.join(", ")))
        .collect();
    if !flagged.is_empty() {
        parts.push(format!("fenced, flagged: {}", flagged.join(", ")));
    }
    let held: Vec<String> = of(Fencing::Fenced)
        .filter(|c| c.flagged == 0 && c.provoked > 0)
        .map(|c| {
            let below = match c.floor {
                Some(floor) if c.provoked < floor => ", below its floor",
                _ => "",
            };
            format!(
                "{} in {} provoked run{}{below}",
                c.recipe.name(),
                c.provoked,
                if c.provoked == 1 { "" } else { "s" }
            )
        })
        .collect();
    if !held.is_empty() {
        parts.push(format!("fenced, none flagged: {}", held.join(", ")));
    }
    // What the verdict lacks and what it does not rest on, each by its scenario.
    let named = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .map(|l| l.split(':').next().unwrap_or(l).to_string())
            .collect()
    };
    if !card.missing.is_empty() {
        parts.push(format!("missing: {}", named(&card.missing).join(", ")));
    }
    if !card.unsettled.is_empty() {
        parts.push(format!("unsettled: {}", named(&card.unsettled).join(", ")));
    }
    parts.join("; ")
}

/// The table's rows for a page whose links to docs/audits begin with `audits`
/// (`audits/` from docs/audit.md, `docs/audits/` from README.md).
pub fn table(cards: &[Published], audits: &str) -> String {
    let mut out = String::from(
        "| backend | verdict | in one line | weakest claim | runs, wall | exit | lockcheck at | scorecard |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for p in cards {
        let c = &p.card;
        let backend = match &c.client {
            Some(words) => format!("`{}` through `{}`", c.backend, words.join(" ")),
            None => format!("`{}`", c.backend),
        };
        let verdict = match c.complete {
            true => format!("`{}`", c.verdict.name()),
            false => format!("`{}`, not complete", c.verdict.name()),
        };
        let runs: usize = c.scenarios.iter().map(|s| s.ran).sum();
        let date = c
            .provenance
            .started_utc
            .as_deref()
            .map_or("date unknown", |s| &s[..s.len().min(10)]);
        let mut links = format!("[{0}]({audits}{0})", p.file);
        if let Some(page) = &p.page {
            links += &format!(", [{page}]({audits}{page})");
        }
        // Computed from the scenarios, so a scorecard from before `bound_reached`
        // (format 2) shows it too.
        let weakest = scorecard::bound_reached(&c.scenarios)
            .map_or("-".to_string(), |b| format!("≤ {:.1}%", b * 100.0));
        out += &format!(
            "| {backend} | {verdict} | {} | {weakest} | {runs}, {} | {} | {} ({date}) | {links} |\n",
            headline(c).replace('|', "\\|"),
            wall(c),
            exit_code(c),
            c.provenance.short_commit(),
        );
    }
    out
}

/// `page` with the text between its [`BEGIN`] and [`END`] markers replaced by
/// `block`; `None` when the page has no markers.
pub fn replace_block(page: &str, block: &str) -> Option<String> {
    let start = page.find(BEGIN)? + BEGIN.len();
    let end = start + page[start..].find(END)?;
    Some(format!("{}\n{block}{}", &page[..start], &page[end..]))
}

/// The text between the markers, as [`replace_block`] would write it.
pub fn block_of(page: &str) -> Option<&str> {
    let start = page.find(BEGIN)? + BEGIN.len();
    let end = start + page[start..].find(END)?;
    Some(
        page[start..end]
            .strip_prefix('\n')
            .unwrap_or(&page[start..end]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn etcd() -> Published {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/audits");
        let card = scorecard::read(&dir.join("etcd.json")).unwrap();
        Published {
            file: "etcd.json".into(),
            page: Some("etcd.md".into()),
            card,
        }
    }

    fn row(p: &Published) -> Vec<String> {
        let text = table(std::slice::from_ref(p), "audits/");
        let row = text.lines().nth(2).expect("a row").to_string();
        row.split(" | ").map(str::to_string).collect()
    }

    #[test]
    fn a_scorecard_not_complete_says_so_with_exit_3_and_its_commit() {
        let mut p = etcd();
        assert_eq!(row(&p)[5], "0");
        p.card.complete = false;
        let cells = row(&p);
        assert!(cells[1].ends_with(", not complete"), "{cells:?}");
        assert_eq!(cells[5], "3");
        let commit = p.card.provenance.commit.clone().unwrap();
        assert!(cells[6].starts_with(&commit[..7]), "{cells:?}");
    }

    /// etcd's safe-with-fencing rests on "no break" in 10 checked runs of
    /// several scenarios: its weakest claim is ≤ 25.9 %, not the twins' 13.9 %.
    #[test]
    fn the_weakest_claim_is_the_loosest_bound_the_verdict_rests_on() {
        assert_eq!(row(&etcd())[3], "≤ 25.9%");
    }

    /// A merge's wall is no machine's: the table gives the slowest part of each
    /// phase, read off the parts it added up.
    #[test]
    fn a_merge_says_the_slowest_part_of_each_phase_not_one_wall() {
        use crate::shard::PartPhase;
        use crate::stats::minutes;
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/audits");
        let card = scorecard::read(&dir.join("etcd-bound-1.json")).unwrap();
        let shards = card.shards.as_ref().unwrap();
        let slowest = |phase| {
            let most = shards
                .parts
                .iter()
                .filter(|p| p.phase == phase)
                .map(|p| p.elapsed_s)
                .fold(0.0, f64::max);
            minutes(most)
        };
        let want = format!(
            "40 parts of 20 shards, the slowest part of each phase {} + {}",
            slowest(PartPhase::Breaks),
            slowest(PartPhase::Twins)
        );
        assert_eq!(wall(&card), want);
        assert_ne!(slowest(PartPhase::Breaks), slowest(PartPhase::Twins));
        assert_eq!(wall(&etcd().card), minutes(etcd().card.elapsed_s));
    }

    #[test]
    fn an_expect_the_verdict_missed_is_exit_1() {
        let mut p = etcd();
        let argv = p.card.provenance.argv.as_mut().unwrap();
        argv.extend(["--expect".into(), "inconclusive".into()]);
        assert_eq!(exit_code(&p.card), 1);
        let argv = p.card.provenance.argv.as_mut().unwrap();
        argv.truncate(argv.len() - 2);
        argv.push(format!("--expect={}", p.card.verdict.name()));
        assert_eq!(exit_code(&p.card), 0);
    }

    #[test]
    fn the_headline_names_each_unfenced_break_and_each_fenced_outcome() {
        let mut p = etcd();
        let line = headline(&p.card);
        for c in &p.card.scenarios {
            let named = line.contains(c.recipe.name());
            match c.fencing {
                Fencing::Unfenced if c.flagged > 0 => assert!(named, "{line}"),
                Fencing::Fenced if c.flagged > 0 || c.provoked > 0 => assert!(named, "{line}"),
                _ => {}
            }
        }
        // A fenced twin flagged is said with its anomalies.
        let twin = p
            .card
            .scenarios
            .iter_mut()
            .find(|c| c.fencing == Fencing::Fenced)
            .expect("etcd has a fenced twin");
        twin.flagged = 1;
        twin.anomalies = vec!["duplicate-token".into()];
        let name = twin.recipe.name();
        p.card.missing = vec!["slow-links-fenced: 3 of its floor of 20".into()];
        let line = headline(&p.card);
        assert!(
            line.contains(&format!("fenced, flagged: {name} (duplicate-token)")),
            "{line}"
        );
        assert!(line.ends_with("; missing: slow-links-fenced"), "{line}");
    }

    #[test]
    fn the_block_between_the_markers_is_replaced_and_read_back() {
        let page = format!("intro\n{BEGIN}\nold\n{END}\nafter\n");
        let new = replace_block(&page, "| new |\n").unwrap();
        assert_eq!(new, format!("intro\n{BEGIN}\n| new |\n{END}\nafter\n"));
        assert_eq!(block_of(&new), Some("| new |\n"));
        assert_eq!(replace_block("no markers", "x"), None);
    }
}
