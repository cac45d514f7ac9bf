//! `lockcheck check` reading its input as a user hands it over: every fixture row of
//! `fixtures/expected.tsv` by its exit code (4 for the malformed ones, with the line
//! and field), and the ways a history arrives: a pipe, `-`, `/dev/stdin`, `<(...)`,
//! a FIFO, gzip, zstd; the limits on one line; a truncated tail.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> PathBuf {
    root().join("fixtures").join(name)
}

fn lockcheck() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockcheck"))
}

/// Runs `lockcheck ARGS` with `stdin` piped in.
fn piped(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = lockcheck()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    // Written from a thread: more than a pipe's buffer must not deadlock.
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("an exit code, not a signal")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The anomaly kinds of a `--json` verdict.
fn kinds(o: &Output) -> BTreeSet<String> {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&o.stdout), text(&o.stderr)));
    v["anomalies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_fixture_row_exits_as_expected_tsv_says() {
    let table = std::fs::read_to_string(fixture("expected.tsv")).unwrap();
    let mut malformed = 0;
    for line in table.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let [file, model, expected, want] = line.split('\t').collect::<Vec<_>>()[..] else {
            panic!("expected.tsv: bad row {line:?}");
        };
        let path = fixture(file);
        let resource = fixture(&file.replace(".jsonl", ".resource.jsonl"));
        let mut cmd = lockcheck();
        cmd.args(["check", "--json", "--model", model, s(&path)]);
        if file.ends_with(".jsonl") && resource.exists() {
            cmd.args(["--resource", s(&resource)]);
        }
        let o = cmd.output().unwrap();
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        let what = format!("{file} ({model}): {out}{err}");
        let want_code = match expected {
            "valid" => 0,
            "invalid" => 1,
            "unknown" => 3,
            "malformed" => 4,
            other => panic!("expected.tsv: bad verdict {other}"),
        };
        assert_eq!(code(&o), want_code, "{what}");
        if expected != "malformed" {
            let want: BTreeSet<String> = want
                .split(',')
                .filter(|k| *k != "-")
                .map(str::to_string)
                .collect();
            assert_eq!(kinds(&o), want, "{what}");
            continue;
        }
        malformed += 1;
        assert!(out.is_empty(), "no verdict for malformed input: {what}");
        if want == "no-operations" {
            assert!(err.contains(": no operations: "), "{what}");
        } else {
            // `LINE:FIELD`: the error names the file (the history or its resource
            // log), the line and the field.
            let (line, field) = want.split_once(':').unwrap();
            assert!(err.contains(&format!(":{line}: {field}: ")), "{what}");
            assert!(err.contains("fixtures/input-"), "{what}");
        }
    }
    assert!(
        malformed >= 16,
        "a malformed fixture for each class of issue 11"
    );
}

/// The double holder of `fixtures/double-holder-paused-holder.jsonl`, however it
/// arrives: never "VALID, 0 ops".
fn assert_double_holder(o: &Output, how: &str, ops: usize) {
    let out = text(&o.stdout);
    assert_eq!(code(o), 1, "{how}: {out}{}", text(&o.stderr));
    assert!(out.starts_with("INVALID"), "{how}: {out}");
    assert!(out.contains(&format!("(jsonl, {ops} ops)")), "{how}: {out}");
    assert!(out.contains("double-holder at indexes"), "{how}: {out}");
}

#[test]
fn a_history_reads_the_same_from_a_pipe_stdin_a_fifo_and_compressed() {
    let file = fixture("double-holder-paused-holder.jsonl");
    let history = std::fs::read(&file).unwrap();
    assert_double_holder(
        &lockcheck().args(["check", s(&file)]).output().unwrap(),
        "file",
        18,
    );
    assert_double_holder(&piped(&["check", "-"], &history), "-", 18);
    assert_double_holder(&piped(&["check", "/dev/stdin"], &history), "/dev/stdin", 18);
    // More than the 64 KiB the format is told from, its first lock op past them.
    let long = std::fs::read(fixture("input-nemesis-first.jsonl")).unwrap();
    assert!(long.len() > 96 << 10);
    assert_double_holder(&piped(&["check", "-"], &long), "long pipe", 1018);
    // Process substitution: a /dev/fd path that can be opened only once.
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec {} check <(cat {})",
            env!("CARGO_BIN_EXE_lockcheck"),
            s(&file)
        ))
        .output()
        .unwrap();
    assert_double_holder(&o, "<(...)", 18);

    let dir = tempfile::tempdir().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&long).unwrap();
    let gz = gz.finish().unwrap();
    let gz_file = dir.path().join("h.jsonl.gz");
    std::fs::write(&gz_file, &gz).unwrap();
    assert_double_holder(
        &lockcheck().args(["check", s(&gz_file)]).output().unwrap(),
        "gz",
        1018,
    );
    assert_double_holder(&piped(&["check", "-"], &gz), "gz pipe", 1018);
    let zst =
        ruzstd::encoding::compress_to_vec(&long[..], ruzstd::encoding::CompressionLevel::Fastest);
    let zst_file = dir.path().join("h.jsonl.zst");
    std::fs::write(&zst_file, &zst).unwrap();
    assert_double_holder(
        &lockcheck().args(["check", s(&zst_file)]).output().unwrap(),
        "zst",
        1018,
    );
    // Two zstd frames one after another are one stream.
    let half = long.len() / 2;
    let half = half + long[half..].iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut two = ruzstd::encoding::compress_to_vec(
        &long[..half],
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    two.extend(ruzstd::encoding::compress_to_vec(
        &long[half..],
        ruzstd::encoding::CompressionLevel::Fastest,
    ));
    assert_double_holder(&piped(&["check", "-"], &two), "two zstd frames", 1018);

    // A FIFO with one writer, who writes slowly in pieces.
    let fifo = dir.path().join("h.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let (path, data) = (fifo.clone(), long.clone());
    let writer = std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        for piece in data.chunks(7_000) {
            f.write_all(piece).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    let o = lockcheck().args(["check", s(&fifo)]).output().unwrap();
    writer.join().unwrap();
    assert_double_holder(&o, "fifo", 1018);
}

#[test]
fn piped_input_makes_the_report_too() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let history = std::fs::read(fixture("double-holder-paused-holder.jsonl")).unwrap();
    let o = piped(&["check", "-", "--report", s(&html), "--json"], &history);
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    assert!(kinds(&o).contains("double-holder"));
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("double-holder"));
    // Both from standard input cannot be.
    let o = piped(&["check", "-", "--resource", "-"], &history);
    assert_eq!(code(&o), 2, "{}", text(&o.stderr));
}

#[test]
fn one_line_past_16_mib_is_refused_with_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let head = std::fs::read_to_string(fixture("double-holder-paused-holder.jsonl")).unwrap();
    let mut long = head
        .lines()
        .take(2)
        .collect::<Vec<_>>()
        .join("\n")
        .into_bytes();
    long.push(b'\n');
    long.extend(std::iter::repeat_n(b' ', (16 << 20) + 1));
    long.extend(b"\n");
    let path = dir.path().join("long.jsonl");
    std::fs::write(&path, &long).unwrap();
    let o = lockcheck().args(["check", s(&path)]).output().unwrap();
    assert_eq!(code(&o), 4);
    let err = text(&o.stderr);
    assert!(
        err.contains("long.jsonl:3: line: longer than 16 MiB"),
        "{err}"
    );
    // A stream with no newline at all stops at the limit, not at the end.
    let o = lockcheck().args(["check", "/dev/zero"]).output().unwrap();
    assert_eq!(code(&o), 4);
    assert!(text(&o.stderr).contains("/dev/zero:1: line: longer than 16 MiB"));
    let o = lockcheck()
        .args(["check", "--format", "jepsen-edn", "/dev/zero"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 4, "{}", text(&o.stderr));
}

#[test]
fn a_truncated_tail_is_a_warning_and_the_lines_before_it_are_checked() {
    let head = std::fs::read_to_string(fixture("double-holder-paused-holder.jsonl")).unwrap();
    let cut = format!("{head}{{\"index\": 18, \"time\": 1200");
    let o = piped(&["check", "-"], cut.as_bytes());
    assert_double_holder(&o, "truncated", 18);
    assert!(text(&o.stdout).contains("truncated final line ignored"));
    // The only line, unterminated: nothing to check, even if it is a whole op.
    let first = head.lines().next().unwrap();
    let o = piped(&["check", "-"], first.as_bytes());
    assert_eq!(code(&o), 4);
    assert!(text(&o.stderr).contains("<stdin>: no operations: its only line has no newline"));
}

#[test]
fn imported_formats_from_a_pipe_and_with_no_operations() {
    let etcd = "INFO  jepsen.util - 0\t:invoke\t:write\t1\nINFO  jepsen.util - 0\t:ok\t:write\t1\nINFO  jepsen.util - 1\t:invoke\t:read\tnil\nINFO  jepsen.util - 1\t:ok\t:read\t0\n";
    let o = piped(&["check", "-"], etcd.as_bytes());
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("(porcupine-etcd, 4 ops)"));
    let etcd = ["check", "--format", "porcupine-etcd", "-"];
    for (what, args, input) in [
        ("etcd noise only", &etcd[..], "INFO  other - x\n"),
        ("etcd empty", &etcd[..], ""),
        (
            "edn nemesis only",
            &["check", "-"][..],
            "[{:process :nemesis, :type :info, :f :start}]\n",
        ),
        ("edn empty vector", &["check", "-"][..], "[]\n"),
    ] {
        let o = piped(args, input.as_bytes());
        assert_eq!(code(&o), 4, "{what}: {}", text(&o.stdout));
        assert!(text(&o.stderr).contains("no operations"), "{what}");
    }
}
