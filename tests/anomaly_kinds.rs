//! Every anomaly kind is in every output: the one list (`AnomalyKind::ALL`) against
//! verdict.json, JUnit, the HTML report's legend and the docs' tables. For each kind,
//! a fixture that shows it is checked through the library, and the JUnit case of
//! its check must fail (CI reads JUnit: a kind that fails the verdict and passes
//! there is a wrong green), the JSON must carry it by name, the report must show it
//! in its legend, counted.

use lockcheck::check::models::register::Register;
use lockcheck::check::{lock, AnomalyKind, Limits, Validity, Verdict};
use lockcheck::history::import::{self, Format};
use lockcheck::history::{read_jsonl, read_resource, History};
use lockcheck::report::{html, junit, Input};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A fixture that shows `kind`, checked: the first row of fixtures/expected.tsv that
/// lists it, or, for the general models' kind, a Porcupine log of a stale read.
fn shown(kind: AnomalyKind) -> (String, History, Verdict) {
    if kind == AnomalyKind::NotLinearizable {
        let path = fixtures().join("not-linearizable-stale-read.log");
        let (h, _) = import::read(&path, Some(Format::PorcupineEtcd)).unwrap();
        let register = Register {
            initial: None,
            cas: true,
        };
        let v = register.check(&h, &Limits::default()).unwrap();
        return (path.display().to_string(), h, v);
    }
    let table = std::fs::read_to_string(fixtures().join("expected.tsv")).unwrap();
    let row = table
        .lines()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .find(|c| c.len() == 4 && c[2] == "invalid" && c[3].split(',').any(|k| k == kind.name()))
        .unwrap_or_else(|| panic!("no fixture in expected.tsv shows {}", kind.name()));
    let path = fixtures().join(row[0]);
    let h = read_jsonl(&path).unwrap();
    let resource = read_resource(&path.with_extension("").with_extension("resource.jsonl")).ok();
    let input = lock::LockInput {
        resource: resource.as_deref(),
    };
    let v = match row[1] {
        "lock" => lock::check(&h, &input, &Limits::default()),
        "fenced-mutex" => lock::check_fenced(&h, &input, &Limits::default()),
        other => panic!("expected.tsv names model {other}"),
    };
    (format!("{} ({})", row[0], row[1]), h, v)
}

/// The `<testcase>` element of `xml` whose name lists `kind`: a case is named
/// `check (kind, kind)`.
fn case_of(xml: &str, kind: AnomalyKind) -> &str {
    xml.split("<testcase ")
        .skip(1)
        .map(|c| &c[..c.find("</testcase>").expect("a closed testcase")])
        .find(|c| {
            let head = &c[..c.find('>').unwrap()];
            let kinds = head.rsplit_once('(').map_or("", |(_, k)| k);
            let kinds = kinds.trim_end_matches("\"").trim_end_matches(')');
            kinds.split(", ").any(|k| k == kind.name())
        })
        .unwrap_or_else(|| panic!("no JUnit case names {}:\n{xml}", kind.name()))
}

#[test]
fn every_kind_that_fails_the_verdict_fails_its_junit_case() {
    for &kind in AnomalyKind::ALL {
        let (what, _, mut v) = shown(kind);
        assert_eq!(v.valid, Validity::Invalid, "{what}");
        assert!(v.anomalies.iter().any(|a| a.kind == kind), "{what}: {v:#?}");
        let xml = junit::render(&what, &v, 1_000_000_000);
        let case = case_of(&xml, kind);
        assert!(
            case.contains("<failure "),
            "{what}: {} failed the verdict but its JUnit case passed:\n{xml}",
            kind.name()
        );
        let failing = xml.matches("<failure ").count();
        assert!(xml.contains(&format!("failures=\"{failing}\"")), "{xml}");
        // Allowed, the same anomaly is listed and fails nothing.
        let found: Vec<AnomalyKind> = v.anomalies.iter().map(|a| a.kind).collect();
        v.apply_allow(&found);
        let xml = junit::render(&what, &v, 1_000_000_000);
        let case = case_of(&xml, kind);
        assert!(
            !case.contains("<failure "),
            "{what}: allowed yet failing:\n{xml}"
        );
        assert!(
            case.contains(&format!("[{}]", kind.name())),
            "{what}:\n{xml}"
        );
    }
}

#[test]
fn every_kind_is_in_the_json_and_the_reports_legend() {
    for &kind in AnomalyKind::ALL {
        // The JSON name is the list's name, both ways.
        let json = serde_json::to_value(kind).unwrap();
        assert_eq!(json, serde_json::json!(kind.name()));
        assert_eq!(serde_json::from_value::<AnomalyKind>(json).unwrap(), kind);
        assert_eq!(kind.name().parse::<AnomalyKind>(), Ok(kind));

        let (what, h, v) = shown(kind);
        let doc = serde_json::to_value(&v).unwrap();
        let kinds: Vec<&str> = doc["anomalies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["kind"].as_str().unwrap())
            .collect();
        assert!(kinds.contains(&kind.name()), "{what}: {doc}");
        assert_eq!(serde_json::from_value::<Verdict>(doc).unwrap(), v);

        let page = html::render(&Input {
            title: &what,
            history: &h,
            resource: None,
            verdict: &v,
            run: None,
            workload: None,
        });
        let found = v.anomalies.iter().filter(|a| a.kind == kind).count();
        assert!(
            page.contains(&format!("{} {found}", kind.name())) && found > 0,
            "{what}: the legend does not count {} ({found})",
            kind.name()
        );
        // The legend names every kind the model is checked for, with its meaning.
        for (_, checked) in AnomalyKind::checks(&v.model, &[kind]) {
            for k in checked {
                let entry = format!("<dt data-kind=\"{}\">", k.name());
                assert!(page.contains(&entry), "{what}: no legend entry {entry}");
            }
        }
    }
}

/// The lock model is checked for every kind but the general models' one, and
/// every check of the list has its JUnit case, even on a clean verdict.
#[test]
fn a_valid_verdict_has_a_passing_case_for_every_check() {
    let v = Verdict {
        valid: Validity::Valid,
        model: "lock".into(),
        anomalies: vec![],
        notes: vec![],
    };
    let xml = junit::render("r", &v, 0);
    for &kind in AnomalyKind::ALL {
        if kind == AnomalyKind::NotLinearizable {
            assert!(!xml.contains(kind.name()), "{xml}");
            continue;
        }
        assert!(!case_of(&xml, kind).contains("<failure"), "{xml}");
    }
    let checks = AnomalyKind::checks("lock", &[]);
    assert_eq!(xml.matches("<testcase ").count(), checks.len());
    // Kinds of one check sit together in the list, so a check is one case.
    let mut seen: Vec<&str> = Vec::new();
    for &k in AnomalyKind::ALL {
        if seen.last() != Some(&k.check()) {
            assert!(
                !seen.contains(&k.check()),
                "{} is apart from its check",
                k.name()
            );
            seen.push(k.check());
        }
    }
}

/// Markdown tables headed `| kind | meaning |` in README.md and docs/ that list
/// anomaly kinds: at least one, and each lists exactly the kinds of the list, each
/// with a meaning (in the docs' own words); and verdict.json's field table names
/// every kind its `kind` may be.
#[test]
fn the_docs_tables_list_every_kind() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
    }
    let names: Vec<&str> = AnomalyKind::ALL.iter().map(|k| k.name()).collect();
    let mut want = names.clone();
    want.sort();
    let (mut tables, mut fields) = (0, 0);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if l.replace(' ', "") == "|kind|meaning|" {
                let rows: Vec<Vec<&str>> = lines[i + 2..]
                    .iter()
                    .take_while(|r| r.starts_with('|'))
                    .map(|r| r.split('|').map(str::trim).collect())
                    .collect();
                let mut listed: Vec<&str> = rows.iter().map(|c| c[1].trim_matches('`')).collect();
                if !listed.iter().any(|k| names.contains(k)) {
                    continue; // a table of other kinds (faults, ...)
                }
                tables += 1;
                listed.sort();
                assert_eq!(
                    listed,
                    want,
                    "{}:{}: the table of anomaly kinds against AnomalyKind::ALL",
                    f.display(),
                    i + 1
                );
                for c in &rows {
                    assert!(
                        c.len() > 3 && !c[2].is_empty(),
                        "{}: {} has no meaning",
                        f.display(),
                        c[1]
                    );
                }
            }
            if l.starts_with("| `kind` | string |") && l.contains("`double-holder`") {
                fields += 1;
                for n in &names {
                    let name = format!("`{n}`");
                    assert!(
                        l.contains(&name),
                        "{}:{}: {name} missing from: {l}",
                        f.display(),
                        i + 1
                    );
                }
            }
        }
    }
    assert!(
        tables >= 1,
        "no `| kind | meaning |` table of anomaly kinds in README.md or docs/"
    );
    assert!(
        fields >= 1,
        "no `kind` row naming the anomaly kinds in docs/ (verdict.json's fields)"
    );
}
