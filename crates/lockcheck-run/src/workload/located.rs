//! Errors that name the file, the line and the key.

use anyhow::anyhow;
use std::fmt;

/// The line (from 1) of a byte offset into the file's text.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The line (from 1) where `key` is given in `[table]`, if it is written there
/// as `key = ...`.
pub(super) fn key_line(text: &str, table: &str, key: &str) -> Option<usize> {
    let header = format!("[{table}]");
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == header;
        } else if inside
            && line
                .split_once('=')
                .is_some_and(|(k, _)| k.trim().trim_matches('"') == key)
        {
            return Some(i + 1);
        }
    }
    None
}

/// Turns toml's error (with its span) into `FILE:LINE: KEY: what is expected`.
pub(super) fn located(file: &dyn fmt::Display, text: &str, e: &toml::de::Error) -> anyhow::Error {
    let message = e.message().trim_end();
    match e.span() {
        // A missing key's span is the table that lacks it: from its header, or the
        // whole file for the top level.
        Some(span) if message.starts_with("missing field") => {
            let header = text[span.start.min(text.len())..]
                .lines()
                .next()
                .and_then(|l| l.trim().strip_prefix('['))
                .map(|h| h.trim_matches(|c| c == '[' || c == ']').trim().to_string());
            match header {
                Some(table) => {
                    let line = line_of(text, span.start);
                    anyhow!("{file}:{line}: [{table}]: {message}")
                }
                None => anyhow!("{file}: {message} (at the top level)"),
            }
        }
        Some(span) => {
            let line = line_of(text, span.start);
            let source = text.lines().nth(line - 1).unwrap_or("").trim();
            // The key a value error is about is at the start of its line, inside the
            // table of the nearest header above it.
            let table = text
                .lines()
                .take(line - 1)
                .filter_map(|l| l.trim().strip_prefix('['))
                .last()
                .map(|h| h.trim_matches(|c| c == '[' || c == ']').trim());
            let key = source
                .split_once('=')
                .map(|(k, _)| k.trim())
                .filter(|k| !k.is_empty() && !k.starts_with('['));
            let key = match (table, key) {
                (Some(t), Some(k)) => format!("{t}.{k}"),
                (None, Some(k)) => k.to_string(),
                (Some(t), None) => t.to_string(),
                (None, None) => String::new(),
            };
            if key.is_empty() {
                anyhow!("{file}:{line}: {message}\n    {source}")
            } else {
                anyhow!("{file}:{line}: {key}: {message}\n    {source}")
            }
        }
        None => anyhow!("{file}: {message}"),
    }
}
