//! Words and markup: counts in sentences, and escaping for HTML and XML.

/// "1 write", "2 writes": counts in sentences.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// "once", "2 times": counts in sentences.
pub fn times(n: usize) -> String {
    if n == 1 {
        "once".into()
    } else {
        format!("{n} times")
    }
}

/// HTML and XML text and attribute escaping; characters XML 1.0 cannot carry are dropped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}
