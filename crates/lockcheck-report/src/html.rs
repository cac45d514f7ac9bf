//! report.html: one self-contained file (inline CSS, JS and data; no network). The
//! summary, guidance, analyses, anomaly cards and fault list are plain HTML; the
//! timeline and the latency / throughput charts are drawn by the inline script from
//! the embedded columns (see `timeline`).

use super::analysis::Analysis;
use super::answer::Guidance;
use super::election::{self, Leaderships};
use super::input::Input;
use super::summary::{summarize, validity_word, Summary};
use super::text::{count, escape};
use super::timeline::{self, FaultBand};
use super::zombies::Zombie;
use lockcheck_check::calls::Calls;
use lockcheck_check::{secs, Anomaly, AnomalyKind, Validity, Verdict};
use std::fmt::Write;

/// Cards beyond this many are summarised in one line: verdict.json has them all.
const MAX_CARDS: usize = 200;
/// Rows of the zombie table (the worst first).
const MAX_ZOMBIE_ROWS: usize = 12;

fn ix_attr(ix: &[u64]) -> String {
    let s: Vec<String> = ix.iter().map(u64::to_string).collect();
    s.join(",")
}

fn nums(v: &[u64]) -> String {
    let s: Vec<String> = v.iter().map(u64::to_string).collect();
    s.join(", ")
}

pub fn render(input: &Input<'_>) -> String {
    let calls = Calls::of_run(input.history, input.resource);
    let bands = timeline::fault_bands(input.history);
    let analysis = input.analyze_calls(&calls);
    // An election's critical sections are leaderships.
    let section_word = match analysis.election {
        Some(_) => "leadership",
        None => "critical section",
    };
    let summary = summarize(input.history, &calls, &bands);
    let data = timeline::build(input.history, &calls, &bands);
    // JSON can only hold `<` inside strings, where \u003c means the same: the data
    // can never close the script element.
    let data = serde_json::to_string(&data)
        .unwrap_or_else(|_| "{}".into())
        .replace('<', "\\u003c");

    let v = input.verdict;
    let missed = input.missed_faults();
    let untested = v.valid == Validity::Valid && missed.as_ref().is_some_and(|m| !m.allowed);
    let class = match v.valid {
        // Valid, but planned faults never started: never shown as a pass.
        Validity::Valid if untested => "unknown",
        Validity::Valid => "valid",
        Validity::Invalid => "invalid",
        Validity::Unknown => "unknown",
    };
    let word = if untested {
        "UNTESTED"
    } else {
        validity_word(v.valid)
    };
    let mut page = String::with_capacity(data.len() + 64 * 1024);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><style>{css}</style></head>\n<body>\n\
         <header><h1>{title}</h1><span class=\"badge {class}\" id=\"lc-verdict\">{word}</span>\
         <span class=\"meta\">model {model} · {anoms} anomalies · {dur} · {ops} ops</span></header>\n<main>\n",
        title = escape(input.title),
        css = include_str!("report.css"),
        model = escape(&v.model),
        anoms = v.anomalies.len(),
        dur = secs(summary.duration_ns),
        ops = summary.ops,
    );
    page += &figures(
        &summary,
        v.anomalies.iter().filter(|a| !a.allowed).count(),
        section_word,
    );
    page += &guidance_panel(&analysis.guidance);
    page += &super::library::panel(
        input.run.and_then(|r| r.client.as_ref()),
        analysis.library.as_ref(),
    );
    page += &timeline_section(&bands, section_word);
    page += &cards(v);
    page += &analysis_panels(&analysis);
    page += &notes(input);
    let _ = write!(
        page,
        "</main>\n<div id=\"lc-tip\"></div>\n<script type=\"application/json\" id=\"lc-data\">{data}</script>\n<script>{js}</script>\n</body></html>\n",
        js = include_str!("report.js"),
    );
    page
}

fn figures(s: &Summary, failing: usize, section_word: &str) -> String {
    let fig = |n: String, what: &str| {
        format!("<div class=\"figure\"><b>{n}</b><span>{what}</span></div>")
    };
    let mut out = String::from("<section class=\"figures\" id=\"lc-summary\">");
    out += &fig(s.processes.to_string(), "client processes");
    out += &fig(s.critical_sections.to_string(), &format!("{section_word}s"));
    out += &fig(
        format!("{} / {}", s.acquires_ok, s.acquires_ok + s.acquires_failed),
        "acquires ok / tried",
    );
    out += &fig(s.writes_ok.to_string(), "writes applied");
    out += &fig(s.writes_rejected.to_string(), "stale writes rejected");
    out += &fig(
        (s.writes_failed + s.writes_unknown).to_string(),
        "writes failed or unknown",
    );
    if s.writes_withheld > 0 {
        out += &fig(
            s.writes_withheld.to_string(),
            "writes withheld by self-fencing",
        );
    }
    out += &fig(s.faults.to_string(), "fault periods");
    out += &fig(failing.to_string(), "anomalies (not allowed)");
    out + "</section>\n"
}

/// A holder as the tables name it: its process, and its token where it had one.
fn holder_cell(process: u64, token: Option<u64>) -> String {
    match token {
        Some(t) => format!("p{process} (t{t})"),
        None => format!("p{process}"),
    }
}

fn zombie_row(z: &Zombie) -> String {
    format!(
        "<tr data-ix=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {} / {}</td></tr>",
        ix_attr(&z.indexes),
        holder_cell(z.process, z.token),
        holder_cell(z.by_process, z.by_token),
        secs(z.deposed_at),
        secs(z.window_ns),
        z.writes_after,
        z.writes_accepted_after,
        z.writes_rejected_after,
    )
}

/// An election's leaderships: how long each deposed leader went on acting after a
/// new leader was elected.
fn leaderships_panel(l: &Leaderships, deposed: &[Zombie]) -> String {
    let mut out = format!(
        "<div class=\"panel\" id=\"lc-leaderships\"><h2>Leaderships</h2><p>{}</p>",
        escape(&l.sentence)
    );
    let mut acted: Vec<(&Zombie, u64)> = deposed
        .iter()
        .filter_map(|z| Some((z, election::acting_ns(z)?)))
        .collect();
    acted.sort_by_key(|&(_, ns)| std::cmp::Reverse(ns));
    if !acted.is_empty() {
        out += "<table class=\"zlist\"><tr><th>deposed leader</th><th>new leader</th><th>elected at</th><th>went on acting for</th><th>acts after</th></tr>";
        for (z, ns) in acted.iter().take(MAX_ZOMBIE_ROWS) {
            let _ = write!(
                out,
                "<tr data-ix=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                ix_attr(&z.indexes),
                holder_cell(z.process, z.token),
                holder_cell(z.by_process, z.by_token),
                secs(z.deposed_at),
                secs(*ns),
                z.writes_after
            );
        }
        out += "</table>";
    }
    out + "</div>"
}

fn guidance_panel(g: &Guidance) -> String {
    let answer = serde_json::to_value(g.answer)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    let mut out = format!(
        "<section class=\"panel guidance {answer}\" id=\"lc-guidance\"><h2>Guidance: {}</h2><p>{}</p><ul>",
        escape(&g.title),
        escape(&g.sentence)
    );
    for f in &g.figures {
        let _ = write!(out, "<li>{}</li>", escape(f));
    }
    out + "</ul></section>\n"
}

fn analysis_panels(a: &Analysis) -> String {
    let mut out = String::from("<section class=\"row\">");
    if let Some(l) = &a.election {
        out += &leaderships_panel(l, &a.zombies.all);
    }
    let z = &a.zombies;
    let _ = write!(
        out,
        "<div class=\"panel\" id=\"lc-zombies\"><h2>Zombie window</h2><p>{} deposed while they still believed they held the lock: another process acquired, and they went on for p50 {}, p90 {}, max {}. They attempted {} after that ({} accepted, {} rejected by the resource).</p>",
        count(z.deposed, "holder was", "holders were"),
        secs(z.p50_ns),
        secs(z.p90_ns),
        secs(z.max_ns),
        count(z.writes_after, "write", "writes"),
        z.writes_accepted_after,
        z.writes_rejected_after
    );
    if !z.all.is_empty() {
        let mut worst: Vec<&Zombie> = z.all.iter().collect();
        worst.sort_by_key(|z| std::cmp::Reverse(z.window_ns));
        out += "<table class=\"zlist\"><tr><th>deposed</th><th>by</th><th>at</th><th>went on for</th><th>writes after / accepted / rejected</th></tr>";
        for z in worst.iter().take(MAX_ZOMBIE_ROWS) {
            out += &zombie_row(z);
        }
        out += "</table>";
        if worst.len() > MAX_ZOMBIE_ROWS {
            let _ = write!(
                out,
                "<p class=\"muted\">and {} more in verdict.json (analysis.zombies.all)</p>",
                worst.len() - MAX_ZOMBIE_ROWS
            );
        }
    }
    out += "</div>";
    let _ = write!(
        out,
        "<div class=\"panel\" id=\"lc-fencing\"><h2>Would fencing have stopped it?</h2><p>{}</p><p class=\"muted\">Replayed from {}: {} applied writes, {} without a token.</p>",
        escape(&a.fencing.sentence),
        escape(&a.fencing.source),
        a.fencing.writes,
        a.fencing.tokenless
    );
    if let Some(p) = &a.provoked {
        let _ = write!(
            out,
            "<h2>Did the run provoke the danger?</h2><p id=\"lc-provoked\" data-class=\"{}\">{} ({} deposed, {} late writes, {} reached the resource; {} fault starts).</p>",
            p.class.name(),
            escape(p.class.sentence()),
            p.deposed,
            p.late_writes,
            p.late_writes_reached,
            p.faults_started
        );
    }
    if let Some(s) = &a.self_fencing {
        let _ = write!(
            out,
            "<h2>Self-fencing client</h2><p id=\"lc-self-fencing\">{}</p>",
            escape(&s.sentence)
        );
    }
    out + "</div></section>\n"
}

fn card(a: &Anomaly) -> String {
    let mut facts = Vec::new();
    if !a.processes.is_empty() {
        facts.push(format!("processes {}", nums(&a.processes)));
    }
    if !a.tokens.is_empty() {
        facts.push(format!("tokens {}", nums(&a.tokens)));
    }
    let ops: Vec<String> = a.indexes.iter().map(|i| format!("#{i}")).collect();
    facts.push(format!("ops {}", ops.join(" ")));
    format!(
        "<div class=\"card anomaly{}\" data-kind=\"{}\" data-ix=\"{}\"><span class=\"when\">{}</span><span class=\"kind\">{}</span> {}<p>{}</p><div class=\"facts\">{}</div></div>\n",
        if a.allowed { " allowed" } else { "" },
        a.kind.name(),
        ix_attr(&a.indexes),
        a.time.map(|t| format!("at {}", secs(t))).unwrap_or_default(),
        a.kind.name(),
        if a.allowed {
            "<span class=\"badge allowed\">allowed</span>"
        } else {
            ""
        },
        escape(&a.explanation),
        escape(&facts.join(" · "))
    )
}

/// The cards' legend: every kind the verdict's model is checked for (the one list
/// of anomaly kinds), how many of each were found, and what each means.
fn kinds_legend(v: &Verdict) -> String {
    let found: Vec<AnomalyKind> = v.anomalies.iter().map(|a| a.kind).collect();
    let (mut counts, mut meanings) = (Vec::new(), String::new());
    for (_, kinds) in AnomalyKind::checks(&v.model, &found) {
        for k in kinds {
            let n = found.iter().filter(|&&f| f == k).count();
            counts.push(format!("{} {n}", k.name()));
            let _ = write!(
                meanings,
                "<dt data-kind=\"{}\">{}</dt><dd>{}</dd>",
                k.name(),
                k.name(),
                escape(k.meaning())
            );
        }
    }
    format!(
        "<details class=\"kinds\" id=\"lc-kinds\"><summary>Checked for: {}</summary><dl>{meanings}</dl></details>",
        counts.join(" · ")
    )
}

fn cards(v: &Verdict) -> String {
    let anomalies = &v.anomalies;
    let mut out = format!(
        "<section id=\"lc-anomalies\"><h2>Anomalies ({}) <span class=\"muted\">— click one to see it on the timeline</span></h2>{}",
        anomalies.len(),
        kinds_legend(v)
    );
    if anomalies.is_empty() {
        out += "<p class=\"muted\">None: no anomaly was found.</p>";
    }
    out += "<div class=\"cards\">";
    for a in anomalies.iter().take(MAX_CARDS) {
        out += &card(a);
    }
    out += "</div>";
    if anomalies.len() > MAX_CARDS {
        let _ = write!(
            out,
            "<p class=\"muted\">and {} more in verdict.json</p>",
            anomalies.len() - MAX_CARDS
        );
    }
    out + "</section>\n"
}

fn timeline_section(bands: &[FaultBand], section_word: &str) -> String {
    let mut out = format!(
        "<section class=\"tl\" id=\"lc-timeline-section\"><div class=\"controls\">\
         <b>Timeline</b><button id=\"lc-fit\">Fit</button><button id=\"lc-in\">Zoom in</button><button id=\"lc-out\">Zoom out</button>\
         <span id=\"lc-view\" class=\"muted\"></span><span class=\"legend\">\
         <span><i style=\"background:#bfdbfe\"></i>acquire / release window</span>\
         <span><i style=\"background:#2563eb\"></i>{section_word}</span>\
         <span><i style=\"background:#ea580c\"></i>after being deposed</span>\
         <span><i style=\"background:#1e3a8a;height:2px\"></i>lease (server)</span>\
         <span><i style=\"background:#15803d;width:3px\"></i>write (token, seq)</span>\
         <span><i style=\"background:#dc2626;width:3px\"></i>rejected write</span>",
    );
    for (band, colour) in timeline::bands() {
        let _ = write!(
            out,
            "<span><i style=\"background:{colour};opacity:.5\"></i>{band}</span>"
        );
    }
    out.push_str(
        "</span></div>\
         <canvas id=\"lc-timeline\"></canvas>\
         <div class=\"chart-title\">latency of acquire (blue) and write (green): mean line, up to the max shaded; log scale</div>\
         <canvas id=\"lc-latency\"></canvas>\
         <div class=\"chart-title\">throughput: ok ops per second (rejected writes red)</div>\
         <canvas id=\"lc-throughput\"></canvas>\
         <p class=\"muted\">Wheel to zoom, drag to pan, double-click to fit. Zoomed out, ops are aggregated per pixel; zoomed in, every op is drawn.</p>",
    );
    let _ = write!(
        out,
        "<h2>Fault periods ({})</h2><table class=\"zlist\" id=\"lc-faults\"><tr><th>fault</th><th>from</th><th>to</th><th>lasted</th></tr>",
        bands.len()
    );
    for b in bands {
        let _ = write!(
            out,
            "<tr class=\"fault-band {}\" data-ix=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            b.kind,
            ix_attr(&b.indexes),
            escape(&b.label),
            secs(b.start),
            b.end.map_or("end of run".into(), secs),
            b.end.map_or("-".into(), |e| secs(e.saturating_sub(b.start)))
        );
    }
    out + "</table></section>\n"
}

fn notes(input: &Input<'_>) -> String {
    let mut out = String::new();
    // The checker may already have copied the reader's warnings into its notes.
    let mut notes: Vec<&String> = input.verdict.notes.iter().collect();
    for w in &input.history.warnings {
        if !notes.contains(&w) {
            notes.push(w);
        }
    }
    let missed = input.missed_faults();
    let missed: Vec<String> = missed
        .iter()
        .flat_map(|m| std::iter::once(m.headline()).chain(m.lines.iter().cloned()))
        .collect();
    notes.extend(missed.iter());
    if !notes.is_empty() {
        out += "<section class=\"panel notes\"><h2>Notes</h2><ul>";
        for n in notes {
            let _ = write!(out, "<li>{}</li>", escape(n));
        }
        out += "</ul></section>\n";
    }
    if let Some(w) = input.workload {
        let _ = write!(
            out,
            "<section><details><summary>Workload</summary><pre>{}</pre></details></section>",
            escape(w)
        );
    }
    out
}
