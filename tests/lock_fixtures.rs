//! Every history under `fixtures/` is checked against the model named in
//! `fixtures/expected.tsv` and must give exactly the verdict and the anomaly kinds
//! listed there; generated histories with planted anomalies must give exactly those.

use lockcheck::check::{lock, AnomalyKind, Limits, Validity, Verdict};
use lockcheck::history::synth::{generate, SynthConfig};
use lockcheck::history::{read_jsonl, AppliedWrite, History};
use std::collections::BTreeSet;
use std::path::Path;

fn fixtures() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures"))
}

/// `X.resource.jsonl` next to `X.jsonl`, where there is one.
fn resource_of(file: &Path) -> Option<Vec<AppliedWrite>> {
    let path = file.with_extension("").with_extension("resource.jsonl");
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .map(|l| serde_json::from_str(l).expect("a resource.jsonl line"))
            .collect(),
    )
}

fn check(model: &str, h: &History, resource: Option<&[AppliedWrite]>) -> Verdict {
    let input = lock::LockInput { resource };
    match model {
        "lock" => lock::check(h, &input, &Limits::default()),
        "fenced-mutex" => lock::check_fenced(h, &input, &Limits::default()),
        other => panic!("expected.tsv names an unknown model {other}"),
    }
}

fn kinds(v: &Verdict) -> BTreeSet<AnomalyKind> {
    v.anomalies.iter().map(|a| a.kind).collect()
}

/// Evidence a person can follow: indexes of real ops, processes, a time, words.
fn assert_evidence(v: &Verdict, h: &History, what: &str) {
    for a in &v.anomalies {
        assert!(!a.indexes.is_empty(), "{what}: {a:?} names no op");
        assert!(
            a.indexes.iter().all(|&i| (i as usize) < h.ops.len()),
            "{what}: {a:?} names an op past the end"
        );
        assert!(!a.processes.is_empty(), "{what}: {a:?} names no process");
        assert!(a.time.is_some(), "{what}: {a:?} has no time");
        assert!(
            a.explanation.contains(" s") && a.explanation.len() > 40,
            "{what}: explanation too thin: {}",
            a.explanation
        );
    }
}

#[test]
fn every_fixture_gives_its_expected_verdict() {
    let table = std::fs::read_to_string(fixtures().join("expected.tsv")).unwrap();
    let mut rows = 0;
    let mut listed = BTreeSet::new();
    for line in table.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [file, model, expected, want] = cols[..] else {
            panic!("expected.tsv: bad row {line:?}");
        };
        let path = fixtures().join(file);
        if expected == "malformed" {
            // Refused before any check: tests/input_cli.rs holds the error's line,
            // field and exit code to the row.
            listed.insert(file.to_string());
            continue;
        }
        let h = read_jsonl(&path).unwrap();
        let resource = resource_of(&path);
        let v = check(model, &h, resource.as_deref());
        let what = format!("{file} ({model})");
        let want_valid = match expected {
            "valid" => Validity::Valid,
            "invalid" => Validity::Invalid,
            "unknown" => Validity::Unknown,
            other => panic!("expected.tsv: bad verdict {other}"),
        };
        let want: BTreeSet<AnomalyKind> = want
            .split(',')
            .filter(|k| *k != "-")
            .map(|k| k.parse().unwrap())
            .collect();
        assert_eq!(v.valid, want_valid, "{what}: {:#?}", v.anomalies);
        assert_eq!(kinds(&v), want, "{what}: {:#?}", v.anomalies);
        assert_evidence(&v, &h, &what);
        assert_eq!(v.model, model);
        // Read line by line, the same history gives the same verdict.
        let input = lock::LockInput {
            resource: resource.as_deref(),
        };
        let fenced = model == "fenced-mutex";
        let (streamed, lines) =
            lock::check_jsonl(&path, &input, &Limits::default(), fenced).unwrap();
        assert_eq!(lines, h.ops.len());
        assert_eq!(streamed, v, "{what}: read line by line");
        listed.insert(file.to_string());
        rows += 1;
    }
    // Every fixture history is listed, and every anomaly kind of the lock model has one.
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".jsonl") && !name.ends_with(".resource.jsonl") {
            assert!(listed.contains(&name), "{name} is not in expected.tsv");
        }
    }
    assert!(rows >= 20);
    for kind in AnomalyKind::ALL
        .iter()
        .filter(|k| **k != AnomalyKind::NotLinearizable)
    {
        assert!(
            table.contains(kind.name()),
            "no fixture shows {}",
            kind.name()
        );
    }
}

#[test]
fn the_paused_holder_is_explained_with_times_tokens_and_its_failed_release() {
    let h = read_jsonl(&fixtures().join("double-holder-paused-holder.jsonl")).unwrap();
    let v = check("lock", &h, None);
    let a = &v.anomalies[0];
    assert_eq!(a.processes, vec![0, 1]);
    assert_eq!(a.tokens, vec![1, 2]);
    // p0's acquire ok, p1's acquire ok, p0's stale write and its release invoke.
    assert_eq!(a.indexes, vec![1, 6, 10, 12]);
    assert!(
        a.explanation.starts_with(
            "process 0 acquired the lock at 1.000 s with token 1 and had not released; \
             process 1 acquired it at 2.010 s with token 2 — both held it from 2.010 s to 11.002 s."
        ),
        "{}",
        a.explanation
    );
    assert!(a.explanation.contains("failed"), "{}", a.explanation);
    assert!(
        a.explanation.ends_with(
            "Faults meanwhile: pause of client-0 at 1.003 s, resume of client-0 at 11.000 s."
        ),
        "{}",
        a.explanation
    );
}

/// An overlap of 40 µs is shown with the digits that tell its ends apart.
#[test]
fn a_sub_millisecond_overlap_reads_as_one() {
    let h = read_jsonl(&fixtures().join("double-holder-sub-millisecond.jsonl")).unwrap();
    let v = check("lock", &h, None);
    let e = &v.anomalies[0].explanation;
    assert!(
        e.contains("process 1 acquired it at 0.772 s with token 2 — both held it from 0.77210 s to 0.77214 s."),
        "{e}"
    );
}

/// A holder whose retry of its acquire failed still holds: its later write, after
/// another process acquired, is that of a double holder, and the sentence says so.
#[test]
fn a_failed_reacquire_does_not_end_the_section() {
    let h = read_jsonl(&fixtures().join("double-holder-reacquire-failed.jsonl")).unwrap();
    let v = check("lock", &h, None);
    let a = &v.anomalies[0];
    assert_eq!(
        (a.processes.clone(), a.tokens.clone()),
        (vec![0, 1], vec![1, 2])
    );
    // p0's acquire ok, p1's acquire ok, p0's write and its release invoke.
    assert_eq!(a.indexes, vec![1, 5, 6, 8]);
    assert!(
        a.explanation
            .contains("Meanwhile process 0 wrote at 1.600 s with token 1 (applied as seq 1)."),
        "{}",
        a.explanation
    );
}

/// A retired holder's write that the resource applied after the next holder's write
/// makes the retired holder's section last until then: a double holder, even with no
/// token to compare.
#[test]
fn a_retired_holders_write_landing_late_is_a_double_holder() {
    let path = fixtures().join("double-holder-retired-write-landed.jsonl");
    let h = read_jsonl(&path).unwrap();
    let v = check("lock", &h, resource_of(&path).as_deref());
    let a = &v.anomalies[0];
    // p0's acquire ok and its write, p1's acquire ok and its write.
    assert_eq!(a.indexes, vec![1, 2, 5, 6]);
    assert!(
        a.explanation.ends_with(
            "Then process 0 was retired after its write invoked at 0.002 s went unanswered \
             (info), yet the resource applied that write after process 1's write invoked at 1.005 s."
        ),
        "{}",
        a.explanation
    );
    // Without the resource's log the retired holder still holds to the end of the
    // history (history.md v1.1): a double holder all the same, last seen at its write.
    let v = check("lock", &h, None);
    assert_eq!(v.valid, Validity::Invalid);
    assert_eq!(v.anomalies[0].indexes, vec![1, 2, 5]);
    assert!(
        v.anomalies[0].explanation.contains(
            "a retired holder may still be acting, so it holds to the end of the history"
        ),
        "{}",
        v.anomalies[0].explanation
    );
}

/// A counter read below an earlier read names both reads.
#[test]
fn a_counter_going_backwards_names_both_reads() {
    let h = read_jsonl(&fixtures().join("lost-update-backwards-read.jsonl")).unwrap();
    let v = check("lock", &h, None);
    let a = &v.anomalies[0];
    assert_eq!(a.indexes, vec![10, 11, 12, 13]);
    assert_eq!(a.processes, vec![2, 3]);
    assert_eq!(
        a.explanation,
        "process 3 read the counter as 1 at 0.031 s, but process 2's read had returned 2 at \
         0.021 s, before process 3 asked at 0.030 s: the counter went backwards, 1 update(s) lost"
    );
}

#[test]
fn generated_histories_give_exactly_their_planted_anomalies() {
    let base = SynthConfig {
        seed: 7,
        clients: 4,
        lines: 20_000,
        info_rate: 0.005,
        fail_rate: 0.05,
        ..Default::default()
    };
    let v = check("lock", &generate(&base).history, None);
    assert_eq!(v.valid, Validity::Valid, "{:#?}", v.anomalies);
    assert!(!v.notes.is_empty(), "info acquires are noted");

    let s = generate(&SynthConfig {
        overlaps: 3,
        ..base.clone()
    });
    let v = check("lock", &s.history, Some(&s.resource));
    assert_eq!(kinds(&v), BTreeSet::from([AnomalyKind::DoubleHolder]));
    assert_eq!(v.anomalies.len(), 3, "{:#?}", v.anomalies);
    assert_evidence(&v, &s.history, "synth");

    // Without fencing at the resource, the paused holder's write lands between the
    // new holder's writes, with a lower token.
    let s = generate(&SynthConfig {
        overlaps: 1,
        fenced: false,
        ..base
    });
    let v = check("lock", &s.history, Some(&s.resource));
    assert_eq!(
        kinds(&v),
        BTreeSet::from([
            AnomalyKind::DoubleHolder,
            AnomalyKind::StaleWriteAccepted,
            AnomalyKind::InterleavedWrites
        ]),
        "{:#?}",
        v.anomalies
    );
    // The same seen through the write oks' seq alone.
    let w = check("lock", &s.history, None);
    assert_eq!(kinds(&w), kinds(&v));
}
