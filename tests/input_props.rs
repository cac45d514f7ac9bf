//! Property tests of the history readers (spec v1.1, "Reading rules"), on generated
//! lock histories:
//! - a field of the wrong type, or a key twice, anywhere is refused, named by its
//!   line and field, by the fast reading and the full parse alike;
//! - a history reads the same from a file, from a pipe handing it over in pieces,
//!   gzip'd or zstd'd, whole or cut at any byte;
//! - a prefix of fault-injector lines changes no verdict (only the indexes shift):
//!   the reader streams every layout the same way.

use lockcheck::check::choice::{check_input, Checked, Options};
use lockcheck::history::synth::{generate, SynthConfig};
use lockcheck::history::{parse_jsonl, read_jsonl_from, History, HistoryError, Input};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::io::{Read, Write};

/// A reader that hands its data over in the pieces `sizes` says, as a pipe does.
struct Pieces {
    data: Vec<u8>,
    pos: usize,
    sizes: Vec<usize>,
    turn: usize,
}

impl Read for Pieces {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let size = self.sizes[self.turn % self.sizes.len()].max(1);
        self.turn += 1;
        let n = size.min(buf.len()).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

fn piped(data: Vec<u8>, sizes: Vec<usize>) -> Input {
    Input::from_reader(
        "h",
        Pieces {
            data,
            pos: 0,
            sizes,
            turn: 0,
        },
    )
    .unwrap()
}

fn history(seed: u64, lines: usize, overlaps: usize) -> String {
    generate(&SynthConfig {
        seed,
        clients: 3,
        lines,
        overlaps,
        ..Default::default()
    })
    .history_jsonl()
}

/// What a reading gave, comparable: the ops and warnings, or the error's words.
fn outcome(r: Result<History, HistoryError>) -> Result<(String, Vec<String>), String> {
    r.map(|h| {
        let ops: Vec<String> = h
            .ops
            .iter()
            .map(|o| serde_json::to_string(o).unwrap())
            .collect();
        (ops.join("\n"), h.warnings)
    })
    .map_err(|e| e.to_string())
}

/// The ways a line can be malformed by type (spec v1.1), each with the field the
/// error must name.
#[derive(Debug, Clone, Copy)]
enum Wrong {
    TokenAsString,
    SeqAsString,
    LockAsNumber,
    ValueOfAnotherType,
    KeyTwiceInValue,
    KeyTwiceInLine,
    IndexAsString,
}

/// `line` made wrong by `how`, and the field that names it; `None` where this
/// line has nothing to make wrong that way.
fn make_wrong(line: &str, how: Wrong) -> Option<(String, &'static str)> {
    let mut v: Value = serde_json::from_str(line).unwrap();
    let client = v["process"].is_u64();
    let object = v["value"].is_object();
    let f = v["f"].as_str().unwrap().to_string();
    match how {
        Wrong::TokenAsString if client && v["value"]["token"].is_u64() => {
            let t = v["value"]["token"].to_string();
            v["value"]["token"] = json!(t);
            Some((v.to_string(), "value.token"))
        }
        Wrong::SeqAsString if client && v["value"]["seq"].is_u64() => {
            let t = v["value"]["seq"].to_string();
            v["value"]["seq"] = json!(t);
            Some((v.to_string(), "value.seq"))
        }
        Wrong::LockAsNumber if client && object => {
            v["value"]["lock"] = json!(7);
            Some((v.to_string(), "value.lock"))
        }
        Wrong::ValueOfAnotherType
            if client && ["acquire", "renew", "release", "write"].contains(&f.as_str()) =>
        {
            v["value"] = json!(["granted"]);
            Some((v.to_string(), "value"))
        }
        Wrong::KeyTwiceInValue if object => {
            let text = v.to_string();
            let at = text.find("\"value\":{")? + "\"value\":{".len();
            Some((
                format!("{}\"k\":1,\"k\":2,{}", &text[..at], &text[at..]),
                "value.k",
            ))
        }
        Wrong::KeyTwiceInLine => {
            let text = v.to_string();
            Some((format!("{},\"f\":\"x\"}}", &text[..text.len() - 1]), "f"))
        }
        Wrong::IndexAsString => {
            let i = v["index"].to_string();
            v["index"] = json!(i);
            Some((v.to_string(), "index"))
        }
        _ => None,
    }
}

fn wrong() -> impl Strategy<Value = Wrong> {
    prop_oneof![
        Just(Wrong::TokenAsString),
        Just(Wrong::SeqAsString),
        Just(Wrong::LockAsNumber),
        Just(Wrong::ValueOfAnotherType),
        Just(Wrong::KeyTwiceInValue),
        Just(Wrong::KeyTwiceInLine),
        Just(Wrong::IndexAsString),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_wrong_type_or_a_key_twice_is_refused_with_its_line_and_field(
        seed in 0u64..1_000,
        at in 0usize..10_000,
        how in wrong(),
        sizes in prop::collection::vec(1usize..5_000, 1..4),
    ) {
        let text = history(seed, 80, 0);
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        // The first line from `at` on that can be made wrong this way.
        let n = lines.len();
        let found = (0..n)
            .map(|k| (at + k) % n)
            .find_map(|i| make_wrong(&lines[i], how).map(|w| (i, w)));
        let Some((i, (line, field))) = found else {
            return Ok(());
        };
        lines[i] = line;
        let bad = lines.join("\n") + "\n";
        let want = format!("h:{}: {field}: ", i + 1);
        let fast = read_jsonl_from(piped(bad.clone().into_bytes(), sizes)).map(|_| ());
        let full = parse_jsonl(&bad, "h").map(|_| ());
        for (how_read, r) in [("fast", fast), ("full", full)] {
            let e = r.expect_err("a malformed line was read").to_string();
            prop_assert!(e.starts_with(&want), "{how_read}: {e} (want {want})");
        }
    }

    #[test]
    fn a_history_reads_the_same_from_any_stream(
        seed in 0u64..1_000,
        cut in prop::option::of(0usize..20_000),
        sizes in prop::collection::vec(1usize..70_000, 1..5),
    ) {
        let mut text = history(seed, 200, 1);
        if let Some(cut) = cut {
            text.truncate(cut.min(text.len()));
        }
        let want = outcome(parse_jsonl(&text, "h"));
        let bytes = text.clone().into_bytes();
        prop_assert_eq!(&outcome(read_jsonl_from(piped(bytes.clone(), sizes.clone()))), &want);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&bytes).unwrap();
        let gz = gz.finish().unwrap();
        prop_assert_eq!(&outcome(read_jsonl_from(piped(gz, sizes.clone()))), &want);
        let zst = ruzstd::encoding::compress_to_vec(&bytes[..], ruzstd::encoding::CompressionLevel::Fastest);
        prop_assert_eq!(&outcome(read_jsonl_from(piped(zst, sizes))), &want);
    }

    #[test]
    fn a_prefix_of_nemesis_lines_changes_no_verdict(
        seed in 0u64..1_000,
        overlaps in 0usize..3,
        prefix in prop_oneof![0usize..5, 900usize..1_500],
        lock_model in any::<bool>(),
    ) {
        let text = history(seed, 300, overlaps);
        let mut shifted = String::new();
        for i in 0..prefix {
            let f = if i % 2 == 0 { "pause" } else { "resume" };
            shifted += &format!(
                "{{\"index\":{i},\"time\":0,\"process\":\"nemesis\",\"type\":\"info\",\"f\":\"{f}\",\"value\":{{\"targets\":[\"n1\"]}}}}\n"
            );
        }
        for line in text.lines() {
            let mut v: Value = serde_json::from_str(line).unwrap();
            v["index"] = json!(v["index"].as_u64().unwrap() + prefix as u64);
            shifted += &(v.to_string() + "\n");
        }
        let opts = Options {
            model: lock_model.then(|| "lock".parse().unwrap()),
            ..Options::default()
        };
        let plain = check_input(piped(text.into_bytes(), vec![65_536]), &opts).unwrap();
        let prefixed = check_input(piped(shifted.into_bytes(), vec![4_096]), &opts).unwrap();
        prop_assert_eq!(prefixed.ops, plain.ops + prefix);
        prop_assert_eq!(prefixed.model, plain.model);
        prop_assert_eq!(prefixed.verdict.valid, plain.verdict.valid);
        let found = |c: &Checked, by: u64| -> Vec<(String, Vec<u64>)> {
            c.verdict
                .anomalies
                .iter()
                .map(|a| (a.kind.name().to_string(), a.indexes.iter().map(|i| i - by).collect()))
                .collect()
        };
        prop_assert_eq!(found(&prefixed, prefix as u64), found(&plain, 0));
    }
}
