//! Java-style regular expressions on top of the `regex` crate. Kafka compiles client patterns with
//! RE2J or `java.util.regex` (ListTransactions' transactional id pattern, KIP-848 topic regexes); both
//! accept `\Q...\E` literal quoting, which `Pattern.quote` produces and the `regex` crate does not.
//! Everything else is passed through: the supported syntaxes overlap closely but not exactly.

/// Compiles `pattern` so that it must match a whole string, as Java's `Matcher.matches`.
pub fn full_match(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&format!("^(?:{})$", unquote(pattern)))
}

/// Rewrites every `\Q...\E` span (an unterminated `\Q` runs to the end) as escaped literal text.
pub fn unquote(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(start) = rest.find("\\Q") {
        let (before, after) = rest.split_at(start);
        // `\\Q` is an escaped backslash followed by Q, not a quote: count the backslashes.
        let backslashes = before.chars().rev().take_while(|&c| c == '\\').count();
        if backslashes % 2 == 1 {
            out.push_str(before);
            out.push_str("\\Q");
            rest = &after[2..];
            continue;
        }
        out.push_str(before);
        let quoted = &after[2..];
        let (literal, tail) = match quoted.find("\\E") {
            Some(end) => (&quoted[..end], &quoted[end + 2..]),
            None => (quoted, ""),
        };
        out.push_str(&regex::escape(literal));
        rest = tail;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_spans_match_literally() {
        let r = full_match("\\Qa.b+c\\E-tx.*").unwrap();
        assert!(r.is_match("a.b+c-tx-1"));
        assert!(!r.is_match("aXbbc-tx-1"));
        assert_eq!(unquote("\\Q(x)"), "\\(x\\)");
        assert_eq!(unquote("a\\\\Qb"), "a\\\\Qb");
        assert_eq!(unquote("plain.*"), "plain.*");
    }

    #[test]
    fn whole_string_only() {
        let r = full_match("tx-[0-9]+").unwrap();
        assert!(r.is_match("tx-12"));
        assert!(!r.is_match("my-tx-12"));
        assert!(full_match("(").is_err());
    }
}
