//! Small text helpers shared by renderers.

/// Python's `shlex.quote`: safe strings unchanged, others single-quoted.
pub(crate) fn shell_quote(s: &str) -> String {
    if s.is_empty() {
        return "''".into();
    }
    let safe = s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\"'\"'"))
    }
}

/// Python's `shlex.join`.
pub(crate) fn shell_join<S: AsRef<str>>(args: &[S]) -> String {
    args.iter()
        .map(|a| shell_quote(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// At most `max` characters of `s`, with `…` when cut (for quoting untrusted output in errors).
pub(crate) fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_like_python() {
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("main.py"), "main.py");
        assert_eq!(shell_quote("${app_id}"), "'${app_id}'");
        assert_eq!(shell_quote("it's"), "'it'\"'\"'s'");
        assert_eq!(shell_join(&["a b", "c"]), "'a b' c");
        assert_eq!(truncate("héllo", 2), "hé…");
        assert_eq!(truncate("hi", 2), "hi");
    }
}
