//! The tables of the current audits in docs/audit.md (and README.md, once its
//! marker comments are there) are generated from the published scorecards,
//! docs/audits/*.json, each read by `scorecard::read`: regenerated here and
//! compared with the block between `<!-- audit-table:begin -->` and
//! `<!-- audit-table:end -->`. `LOCKCHECK_BLESS=1` rewrites the block instead.

use lockcheck::audit::table;
use std::path::Path;

/// Each page with the table, how its links reach docs/audits, and whether it
/// must have the markers. README.md is checked only once the markers are in
/// it: until then it has no generated table to keep true.
const PAGES: [(&str, &str, bool); 2] = [
    ("docs/audit.md", "audits/", true),
    ("README.md", "docs/audits/", false),
];

#[test]
fn the_audit_tables_are_generated_from_the_published_scorecards() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cards = table::published(&root.join("docs/audits")).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(!cards.is_empty(), "docs/audits holds no scorecard");
    let bless = std::env::var("LOCKCHECK_BLESS").is_ok_and(|v| v == "1");
    for (page, links, required) in PAGES {
        let path = root.join(page);
        let text = std::fs::read_to_string(&path).unwrap();
        let Some(block) = table::block_of(&text) else {
            assert!(
                !required,
                "{page}: no {} ... {} around its audit table",
                table::BEGIN,
                table::END
            );
            continue;
        };
        let want = table::table(&cards, links);
        if bless {
            let new = table::replace_block(&text, &want).expect("the markers were found");
            std::fs::write(&path, new).unwrap();
        } else {
            assert_eq!(
                block, want,
                "{page}: its audit table is not what docs/audits/*.json say; \
                 LOCKCHECK_BLESS=1 cargo test --test audit_table rewrites it"
            );
        }
    }
}

/// A row per scorecard, each with its verdict, its weakest claim, its exit and
/// the commit it ran at.
#[test]
fn every_published_scorecard_has_its_row() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cards = table::published(&root.join("docs/audits")).unwrap_or_else(|e| panic!("{e:#}"));
    let text = table::table(&cards, "audits/");
    let rows: Vec<&str> = text.lines().skip(2).collect();
    assert_eq!(rows.len(), cards.len(), "{text}");
    for (row, p) in rows.iter().zip(&cards) {
        let cells: Vec<&str> = row.split(" | ").collect();
        assert!(cells[1].contains(p.card.verdict.name()), "{row}");
        let weakest = lockcheck::audit::scorecard::bound_reached(&p.card.scenarios)
            .map_or("-".to_string(), |b| format!("≤ {:.1}%", b * 100.0));
        assert_eq!(cells[3], weakest, "{row}");
        assert_eq!(cells[5], table::exit_code(&p.card).to_string(), "{row}");
        let commit = p.card.provenance.short_commit();
        assert!(cells[6].starts_with(&commit), "{row}");
        assert!(row.contains(&format!("(audits/{})", p.file)), "{row}");
    }
}
