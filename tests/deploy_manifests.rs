//! deploy/'s sharded audit (docs/shards.md) as the engines and lockcheck take it:
//! the Kubernetes manifests validate against Kubernetes' published OpenAPI
//! schemas (kubernetes-validate, strict: an unknown field, as a typo makes, is
//! refused) and the CI workflow against GitHub's workflow schema
//! (check-jsonschema's vendored copy), offline, with the validators scripts/setup
//! installs in deploy/.venv, and a broken copy of each is refused; every
//! `lockcheck ...` line of their scripts, expanded as its shell expands it, is
//! one the binary takes; the pods of an Indexed Job and the jobs of a matrix run
//! shards 1 to N of N, and every step of one audit shares the image, the
//! backend, the bound and the volume the parts are on.

mod docs_support;

use docs_support::{command_args, lockcheck, root};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const K8S: &str = "deploy/k8s";
const WORKFLOW: &str = "deploy/ci/audit-shards.yml";
/// The oldest Kubernetes the manifests are for (a Job's podFailurePolicy is GA
/// from 1.31; 1.30's schema, where it was beta, wants what 1.31's does) and the
/// newest whose schemas the pinned kubernetes-validate bundles.
const KUBERNETES: [&str; 2] = ["1.31.0", "1.37.0"];

/// A program of the validators' virtualenv.
fn venv(program: &str) -> Command {
    let path = root().join("deploy/.venv/bin").join(program);
    assert!(
        path.exists(),
        "{}: missing; scripts/setup installs deploy/validators.txt there",
        path.display()
    );
    Command::new(path)
}

fn k8s_files() -> Vec<PathBuf> {
    let dir = root().join(K8S);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{}: {files:?}", dir.display());
    files
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn validate_k8s(files: &[PathBuf], version: &str) -> Output {
    venv("kubernetes-validate")
        .args(["--strict", "--quiet", "--kubernetes-version", version])
        .args(files)
        .output()
        .unwrap()
}

fn validate_workflow(file: &Path) -> Output {
    venv("check-jsonschema")
        .args(["--builtin-schema", "vendor.github-workflows"])
        .arg(file)
        .output()
        .unwrap()
}

/// `rel` with `edit` made to it, written into `dir`; the edit must change it.
fn broken_copy(dir: &Path, rel: &str, from: &str, to: &str) -> PathBuf {
    let shipped = docs_support::read(rel);
    assert!(shipped.contains(from), "{rel} has no {from:?} to break");
    let path = dir.join(Path::new(rel).file_name().unwrap());
    std::fs::write(&path, shipped.replacen(from, to, 1)).unwrap();
    path
}

/// Every YAML document of each file, as JSON. The validators' ruamel.yaml reads
/// YAML 1.2, as the engines do: a workflow's `on:` stays a key, not `true`.
fn yaml(files: &[PathBuf]) -> Vec<Vec<Value>> {
    let out = venv("python")
        .arg("-c")
        .arg(
            "import json, sys\nfrom ruamel.yaml import YAML\n\
             json.dump([list(YAML(typ='safe').load_all(open(f))) for f in sys.argv[1:]], sys.stdout)",
        )
        .args(files)
        .output()
        .unwrap();
    assert!(out.status.success(), "{files:?}: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn as_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One `lockcheck ...` line of a script, its words expanded as its shell would.
struct Call {
    /// The file and the step or container it is in.
    place: String,
    args: Vec<String>,
}

impl Call {
    fn value_of(&self, flag: &str) -> Option<&str> {
        let at = self.args.iter().position(|a| a == flag)?;
        self.args.get(at + 1).map(String::as_str)
    }

    /// What it runs: a phase's shard (phase 2's asked the twins) or a merge.
    fn step(&self) -> &'static str {
        let sub: Vec<&str> = self.args.iter().take(2).map(String::as_str).collect();
        match sub[..] {
            ["audit", "merge"] => "merge",
            ["audit", ..] if self.value_of("--asked").is_some() => "phase 2",
            ["audit", ..] => "phase 1",
            _ => "another command",
        }
    }
}

/// `words` (after `lockcheck`) as the shell expands them after `assignments`, in
/// `env` and an empty directory (a glob of parts matches nothing there and stays
/// as written).
fn expand(
    place: &str,
    assignments: &str,
    words: &[String],
    env: &BTreeMap<String, String>,
) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "{assignments}set -- {}\nprintf '%s\\0' \"$@\"",
        words.join(" ")
    );
    let out = Command::new("/bin/sh")
        .args(["-euc", &script])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs(env)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{place}: {script}: {}", text(&out));
    let mut args: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .map(String::from)
        .collect();
    args.pop();
    args
}

/// Whether `line` assigns a shell variable (`shard=$((JOB_COMPLETION_INDEX + 1))`).
fn assigns(line: &str) -> bool {
    line.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The `lockcheck ...` lines of a script run in `env`, each expanded after the
/// variables the script assigned before it.
fn calls(place: &str, script: &str, env: &BTreeMap<String, String>) -> Vec<Call> {
    let mut assignments = String::new();
    let mut found = Vec::new();
    for line in script.lines() {
        if let Some(words) = command_args(line) {
            // The words of a continued line would go unchecked.
            assert!(
                !line.trim_end().ends_with('\\'),
                "{place}: keep a lockcheck command on one line: {line}"
            );
            let args = expand(place, &assignments, &words, env);
            found.push(Call {
                place: place.to_string(),
                args,
            });
        } else if assigns(line) {
            assignments.push_str(line);
            assignments.push('\n');
        }
    }
    found
}

/// The shell script a container runs (`command: [..., /bin/sh, -c]`, the script
/// its first arg), if it runs one.
fn container_script(container: &Value) -> Option<String> {
    let command = container["command"].as_array()?;
    let sh = command.ends_with(&[Value::from("/bin/sh"), Value::from("-c")]);
    sh.then(|| as_str(&container["args"][0]))
}

fn container_env(container: &Value) -> BTreeMap<String, String> {
    let env = container["env"].as_array().into_iter().flatten();
    env.map(|e| (as_str(&e["name"]), as_str(&e["value"])))
        .collect()
}

/// A manifest's pod spec: a Job's template's, or a Pod's own.
fn pod_spec(doc: &Value) -> Option<&Value> {
    match doc["kind"].as_str()? {
        "Job" => Some(&doc["spec"]["template"]["spec"]),
        "Pod" => Some(&doc["spec"]),
        _ => None,
    }
}

/// Every lockcheck line of the Kubernetes manifests `files`; an Indexed Job's
/// once for each of its pods (JOB_COMPLETION_INDEX 0 to completions - 1).
fn k8s_calls(files: &[PathBuf]) -> Vec<Call> {
    let mut found = Vec::new();
    for (file, docs) in files.iter().zip(yaml(files)) {
        for doc in &docs {
            let Some(spec) = pod_spec(doc) else { continue };
            let indexed = doc["spec"]["completionMode"] == "Indexed";
            let pods = if indexed {
                doc["spec"]["completions"].as_u64().unwrap()
            } else {
                1
            };
            let place = format!("{}: {}", file.display(), as_str(&doc["metadata"]["name"]));
            for container in spec["containers"].as_array().unwrap() {
                let Some(script) = container_script(container) else {
                    continue;
                };
                for index in 0..pods {
                    let mut env = container_env(container);
                    if indexed {
                        env.insert("JOB_COMPLETION_INDEX".into(), index.to_string());
                    }
                    found.extend(calls(&place, &script, &env));
                }
            }
        }
    }
    found
}

/// `text` with each `${{ expr }}` replaced by `resolve(expr)`.
fn github_expressions(text: &str, resolve: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        let end = start + rest[start..].find("}}").expect("an unclosed ${{");
        out.push_str(&rest[..start]);
        out.push_str(&resolve(rest[start + 3..end].trim()));
        rest = &rest[end + 2..];
    }
    out + rest
}

/// Every lockcheck line of the workflow `file`'s `run:` scripts, once for each
/// shard of its job's matrix, with the expressions as a run sees them: the
/// inputs' defaults, the shard, the matrix's size.
fn workflow_calls(file: &Path) -> Vec<Call> {
    let workflow = yaml(&[file.to_path_buf()]).remove(0).remove(0);
    let inputs = &workflow["on"]["workflow_dispatch"]["inputs"];
    let mut found = Vec::new();
    for (name, job) in workflow["jobs"].as_object().unwrap() {
        let place = format!("{}: jobs.{name}", file.display());
        let matrix = job["strategy"]["matrix"]["shard"].as_array();
        let shards: Vec<Value> = matrix.cloned().unwrap_or_else(|| vec![Value::Null]);
        for shard in &shards {
            let resolve = |expr: &str| match (expr.strip_prefix("inputs."), expr) {
                (Some(input), _) if !inputs[input]["default"].is_null() => {
                    as_str(&inputs[input]["default"])
                }
                (_, "matrix.shard") if !shard.is_null() => as_str(shard),
                (_, "strategy.job-total") => shards.len().to_string(),
                _ => panic!("{place}: this test knows no value for ${{{{ {expr} }}}}"),
            };
            let env_of = |v: &Value| -> BTreeMap<String, String> {
                let vars = v.as_object().into_iter().flatten();
                vars.map(|(k, v)| (k.clone(), github_expressions(&as_str(v), &resolve)))
                    .collect()
            };
            for step in job["steps"].as_array().unwrap() {
                let Some(run) = step["run"].as_str() else {
                    continue;
                };
                let mut env = env_of(&workflow["env"]);
                env.extend(env_of(&job["env"]));
                env.extend(env_of(&step["env"]));
                found.extend(calls(&place, &github_expressions(run, &resolve), &env));
            }
        }
    }
    found
}

/// The calls the binary refuses, each with its reason. With `--help` after a
/// line's own words, clap reads every flag and value first (an unknown flag or a
/// bad value is refused) and then prints the help instead of running anything.
fn refused(calls: &[Call]) -> Vec<String> {
    let refusal = |c: &Call| {
        let out = lockcheck().args(&c.args).arg("--help").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        (!out.status.success())
            .then(|| format!("{}: lockcheck {}: {stderr}", c.place, c.args.join(" ")))
    };
    calls.iter().filter_map(refusal).collect()
}

#[test]
fn the_kubernetes_manifests_are_valid_against_kubernetes_schemas_and_a_broken_one_is_not() {
    let files = k8s_files();
    for version in KUBERNETES {
        let out = validate_k8s(&files, version);
        assert!(out.status.success(), "Kubernetes {version}: {}", text(&out));
    }
    // A field's name mistyped, and SHARDS changed to an unquoted number (an env
    // value must be a string): both refused, each naming what is wrong.
    let dir = tempfile::tempdir().unwrap();
    let job = format!("{K8S}/breaks-job.yaml");
    for (from, to, said) in [
        (
            "  completionMode: Indexed",
            "  completionmode: Indexed",
            "'completionmode' was unexpected",
        ),
        (
            "value: \"4\"",
            "value: 4",
            "env.2.value: 4 is not of type 'string'",
        ),
    ] {
        let out = validate_k8s(&[broken_copy(dir.path(), &job, from, to)], KUBERNETES[1]);
        assert!(
            !out.status.success() && text(&out).contains(said),
            "{to}: {}",
            text(&out)
        );
    }
}

#[test]
fn the_workflow_is_valid_against_githubs_schema_and_a_broken_one_is_not() {
    let out = validate_workflow(&root().join(WORKFLOW));
    assert!(out.status.success(), "{WORKFLOW}: {}", text(&out));
    let dir = tempfile::tempdir().unwrap();
    let broken = broken_copy(
        dir.path(),
        WORKFLOW,
        "    if: ${{ !cancelled() }}",
        "    when: ${{ !cancelled() }}",
    );
    let out = validate_workflow(&broken);
    assert!(
        !out.status.success() && text(&out).contains("'when' was unexpected"),
        "{}",
        text(&out)
    );
}

/// "1/N", ..., "N/N": shards 1 to N of N, once each, in order.
fn one_to(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{i}/{n}")).collect()
}

#[test]
fn every_lockcheck_line_of_deploy_is_one_the_binary_takes_and_shards_run_1_to_n() {
    for (engine, calls) in [
        (K8S, k8s_calls(&k8s_files())),
        (WORKFLOW, workflow_calls(&root().join(WORKFLOW))),
    ] {
        let refused = refused(&calls);
        assert!(refused.is_empty(), "{}", refused.join("\n"));
        // Both phases, as many pods or jobs as the Job's completions or the
        // matrix's values, shards 1 to N of N; and both merges.
        for step in ["phase 1", "phase 2"] {
            let shards: Vec<&str> = calls
                .iter()
                .filter(|c| c.step() == step)
                .map(|c| {
                    c.value_of("--shard")
                        .unwrap_or_else(|| panic!("{}: no --shard", c.place))
                })
                .collect();
            assert_eq!(shards, one_to(shards.len()), "{engine}: {step}");
            assert!(shards.len() >= 2, "{engine}: {step}: {shards:?}");
        }
        let merges = calls.iter().filter(|c| c.step() == "merge").count();
        assert_eq!(merges, 2, "{engine}: the merge of phase 1 and the last");
    }
}

#[test]
fn a_flag_lockcheck_lacks_is_refused() {
    // The check above, on a copy of the workflow whose phase 1 misspells a flag.
    let dir = tempfile::tempdir().unwrap();
    let broken = broken_copy(dir.path(), WORKFLOW, "--results part", "--result part");
    let refused = refused(&workflow_calls(&broken));
    assert_eq!(refused.len(), 4, "every phase-1 shard: {refused:#?}");
    for reason in &refused {
        assert!(
            reason.contains("jobs.breaks") && reason.contains("'--result'"),
            "{reason}"
        );
    }
}

#[test]
fn every_step_of_one_audit_shares_its_image_backend_bound_and_volume() {
    let files = k8s_files();
    let docs: Vec<Value> = yaml(&files).into_iter().flatten().collect();
    let claim = docs
        .iter()
        .find(|d| d["kind"] == "PersistentVolumeClaim")
        .expect("no PVC");
    let pods: Vec<&Value> = docs.iter().filter_map(pod_spec).collect();
    assert!(pods.len() >= 5, "{docs:?}");
    let mut images = std::collections::BTreeSet::new();
    for pod in &pods {
        let volume = &pod["volumes"][0];
        assert_eq!(
            volume["persistentVolumeClaim"]["claimName"], claim["metadata"]["name"],
            "{pod}"
        );
        for container in pod["containers"].as_array().unwrap() {
            images.insert(as_str(&container["image"]));
            let mount = &container["volumeMounts"][0];
            assert_eq!(
                (&mount["name"], &mount["mountPath"]),
                (&volume["name"], &Value::from("/parts")),
                "{container}"
            );
        }
    }
    // The merge refuses parts of another lockcheck commit, battery or flags.
    assert_eq!(images.len(), 1, "{images:?}");
    for (engine, calls) in [
        (K8S, k8s_calls(&files)),
        (WORKFLOW, workflow_calls(&root().join(WORKFLOW))),
    ] {
        let audits: Vec<&Call> = calls.iter().filter(|c| c.step() != "merge").collect();
        let flags = |c: &Call| {
            (
                c.value_of("--backend").map(String::from),
                c.value_of("--bound").map(String::from),
            )
        };
        assert!(
            audits.windows(2).all(|w| flags(w[0]) == flags(w[1])),
            "{engine}: every shard the same backend and bound"
        );
    }
    // Every shard runs privileged (pauses, namespaces, clocks), and an Indexed
    // Job at most its completions at once.
    for job in docs
        .iter()
        .filter(|d| d["spec"]["completionMode"] == "Indexed")
    {
        let spec = &job["spec"];
        let container = &spec["template"]["spec"]["containers"][0];
        assert_eq!(container["securityContext"]["privileged"], true, "{job}");
        assert!(
            spec["parallelism"].as_u64() <= spec["completions"].as_u64(),
            "{job}"
        );
    }
    let workflow = yaml(&[root().join(WORKFLOW)]).remove(0).remove(0);
    for call in workflow_calls(&root().join(WORKFLOW))
        .iter()
        .filter(|c| c.step() != "merge")
    {
        let job = call.place.rsplit("jobs.").next().unwrap();
        let options = as_str(&workflow["jobs"][job]["container"]["options"]);
        assert!(
            options.contains("--privileged"),
            "{}: {options}",
            call.place
        );
    }
}
